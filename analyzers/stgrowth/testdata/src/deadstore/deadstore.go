package deadstore

// Log is a handle with an appends method.
type Log struct{ n int }

// Append grows the log.
//
//state:appends
func (l *Log) Append(x int) error { l.n++; return nil }

// ---- loops built with goto ----

func gotoLoop(l *Log, xs []int) {
	i := 0
again:
	if i < len(xs) {
		l.Append(xs[i]) // want `error of \(\*Log\).Append is discarded inside a loop; when it fails \(an append once Log reaches its bound`
		i++
		goto again
	}
}

func gotoAssigned(l *Log, n int) {
	i := 0
next:
	_ = l.Append(i) // want `error of \(\*Log\).Append is discarded inside a loop`
	i++
	if i < n {
		goto next
	}
}

func gotoForward(l *Log) error {
	if l.n > 3 {
		goto done
	}
	l.Append(1) // a forward goto builds no loop
done:
	return nil
}

// ---- an error assigned but never read ----

func overwritten(l *Log, xs []int) {
	var err error
	for _, x := range xs {
		err = l.Append(x) // want `error of \(\*Log\).Append is assigned to err but never read inside a loop`
	}
	err = nil
	_ = err
}

func neverChecked(l *Log, xs []int) {
	var err error
	_ = err // read before the loop only
	for _, x := range xs {
		err = l.Append(x)     // want `error of \(\*Log\).Append is assigned to err but never read inside a loop`
		err = l.Append(x + 1) // want `error of \(\*Log\).Append is assigned to err but never read inside a loop`
	}
}

func checkedOnSomePath(l *Log, xs []int, verbose bool) {
	for _, x := range xs {
		err := l.Append(x) // read when verbose: not dropped on every path
		if verbose && err != nil {
			println(err.Error())
		}
	}
}

func gotoNeverChecked(l *Log, n int) {
	var err error
	i := 0
loop:
	err = l.Append(i) // want `error of \(\*Log\).Append is assigned to err but never read inside a loop`
	i++
	if i < n {
		goto loop
	}
	err = nil
	_ = err
}

// ---- no findings ----

func checkedAfter(l *Log, xs []int) error {
	var err error
	for _, x := range xs {
		err = l.Append(x) // read after the loop, on the way out
	}
	return err
}

func checkedIn(l *Log, xs []int) error {
	for _, x := range xs {
		err := l.Append(x)
		if err != nil {
			return err
		}
	}
	return nil
}

func gotoChecked(l *Log, n int) error {
	i := 0
loop:
	if err := l.Append(i); err != nil {
		return err
	}
	i++
	if i < n {
		goto loop
	}
	return nil
}

func joined(l *Log, xs []int) (err error) {
	for _, x := range xs {
		err = l.Append(x) // a named result: the return reads it
	}
	return
}

func captured(l *Log, xs []int) {
	var err error
	defer func() {
		if err != nil {
			panic(err)
		}
	}()
	for _, x := range xs {
		err = l.Append(x) // the deferred literal reads it
	}
}

func outsideLoop(l *Log) {
	err := l.Append(1) // not in a loop: another analyzer's business
	_ = l
	err = nil
	_ = err
}
