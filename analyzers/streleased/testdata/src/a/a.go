package a

import "res"

func closeIt(s *res.State) { s.Release() }

func useAfter() int {
	s := res.Open()
	s.Release()
	return s.Len() // want `State s is used after Release released it; move the Release after its last use`
}

func useAfterHelper() {
	s := res.Open()
	closeIt(s)
	s.Append(1) // want `State s is used after closeIt released it`
}

func argAfter() {
	s := res.Open()
	s.Release()
	closeIt(s) // releasing again is allowed
	peek(s)    // want `State s is used after Release released it`
}

func peek(s *res.State) int { return 0 }

func snapshotAfter() {
	s := res.Open()
	v, err := s.Snapshot()
	if err != nil {
		return
	}
	v.Release()
	_ = v.Spans() // want `Snap v is used after Release released it`
	s.Release()
}

// ---- no findings ----

func twice() {
	s := res.Open()
	s.Release()
	s.Release()
}

func onePath(b bool) int {
	s := res.Open()
	if b {
		s.Release()
	}
	n := s.Len()
	s.Release()
	return n
}

func deferred() int {
	s := res.Open()
	defer s.Release()
	return s.Len()
}

func reassigned() int {
	s := res.Open()
	s.Release()
	s = res.Open()
	defer s.Release()
	return s.Len()
}

func nilCompare() bool {
	s := res.Open()
	s.Release()
	return s != nil
}

func loop(n int) {
	for i := 0; i < n; i++ {
		s := res.Open()
		s.Append(i)
		s.Release()
	}
}

func closure() func() int {
	s := res.Open()
	f := func() int { return s.Len() }
	s.Release()
	return f
}

func branches(k int) {
	s := res.Open()
	switch k {
	case 0:
		s.Release()
		return
	}
	s.Append(k)
	s.Release()
}
