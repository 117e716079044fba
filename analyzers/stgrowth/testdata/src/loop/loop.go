package loop

import "errors"

// Log is a handle with an appends method.
type Log struct{ n int }

// Append grows the log.
//
//state:appends
func (l *Log) Append(x int) error {
	if l.n >= 8 {
		return errors.New("bound")
	}
	l.n++
	return nil
}

// Reserve grows the log and returns the first new row.
//
//state:appends
func (l *Log) Reserve(n int) (int, error) { return l.n, nil }

// Len does not grow the log.
func (l *Log) Len() (int, error) { return l.n, nil }

// Write mutates without growing.
//
//state:mutates
func (l *Log) Write(x int) error { return nil }

// Ring is generic; its appends method is found through its origin.
type Ring[T any] struct{ v []T }

// Push grows the ring.
//
//state:appends
func (r *Ring[T]) Push(x T) error { r.v = append(r.v, x); return nil }

func loops(l *Log, r *Ring[float32], xs []int) error {
	for _, x := range xs {
		l.Append(x) // want `error of \(\*Log\).Append is discarded inside a loop; when it fails \(an append once Log reaches its bound`
	}
	for i := 0; i < 3; i++ {
		_ = l.Append(i) // want `error of \(\*Log\).Append is discarded inside a loop`
		_, _ = l.Reserve(i) // want `error of \(\*Log\).Reserve is discarded inside a loop`
		n, _ := l.Reserve(i) // want `error of \(\*Log\).Reserve is discarded inside a loop`
		_ = n
		r.Push(1) // want `error of \(\*Ring\[T\]\).Push is discarded inside a loop; when it fails \(an append once Ring reaches its bound`
		(l.Append(i)) // want `error of \(\*Log\).Append is discarded`
	}
	for {
		if err := l.Append(1); err != nil {
			return err
		}
		if _, err := l.Reserve(1); err != nil {
			return err
		}
		err := l.Append(2)
		if err != nil {
			break
		}
		l.Len()   // not an appends method
		l.Write(1) // mutates, not appends
	}
	// Outside a loop, a discarded error is another analyzer's business.
	l.Append(1)
	_ = l.Append(2)
	for range xs {
		func() {
			l.Append(3) // the literal's body runs when called, not per iteration
		}()
		go l.Append(4)    // not an expression statement
		defer l.Append(5) // nor this
	}
	f := func() {
		for range 3 {
			l.Append(6) // want `error of \(\*Log\).Append is discarded inside a loop`
		}
	}
	f()
	for i := 0; i < 2; l.Append(i) { // want `error of \(\*Log\).Append is discarded inside a loop`
		i++
	}
	return nil
}
