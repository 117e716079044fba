package alias

import "res"

// releaseAll releases every head it is given.
func releaseAll(ss ...*res.State) {
	for _, s := range ss {
		s.Release()
	}
}

// releaser is what a generic helper releases.
type releaser interface{ Release() error }

// closeEach releases each of xs.
func closeEach[T releaser](xs ...T) {
	for _, x := range xs {
		x.Release()
	}
}

// closeOne releases x.
func closeOne[T releaser](x T) { x.Release() }

func variadic() int {
	a := res.Open()
	b := res.Open()
	releaseAll(a, b)
	return a.Len() + b.Len() // want `State a is used after releaseAll released it` `State b is used after releaseAll released it`
}

func generic() int {
	a := res.Open()
	b := res.Open()
	closeEach(a, b)
	n := a.Len() // want `State a is used after closeEach released it`
	c := res.Open()
	closeOne(c)
	return n + c.Len() // want `State c is used after closeOne released it`
}

func spread() int {
	a := res.Open()
	hs := []*res.State{a}
	releaseAll(hs...)
	return len(hs) // the slice is not a handle
}

func aliased() int {
	v := res.Open()
	w := v
	v.Release()
	return w.Len() // want `State w is used after Release released it`
}

func aliasReleased() int {
	v := res.Open()
	w := v
	w.Release()
	return v.Len() // want `State v is used after Release released it`
}

func aliasedLate() int {
	v := res.Open()
	v.Release()
	w := v
	return w.Len() // want `State w is used after Release released it`
}

// ---- no findings ----

func reboundAlias() int {
	v := res.Open()
	w := v
	w = res.Open()
	defer w.Release()
	v.Release()
	return w.Len() // w no longer aliases v
}

func reboundBefore() int {
	v := res.Open()
	w := v
	n := w.Len()
	v.Release()
	v = res.Open()
	defer v.Release()
	return n + v.Len() // a new head
}

func usedBefore() int {
	a := res.Open()
	b := res.Open()
	n := a.Len() + b.Len()
	releaseAll(a, b)
	return n
}

func imported() int {
	a := res.Open()
	res.CloseAll(a)
	return a.Len() // want `State a is used after CloseAll released it`
}

func kept() int {
	a := res.Open()
	res.Keep(a)
	return a.Len() // Keep stores a: not a release
}

// A parameter reassigned after its copy holds another handle: releasing
// the copy releases the old one only.
func swapParam(s, b *res.State) error {
	old := s
	s = b
	old.Release()
	return s.Append(1)
}

func swapResult(b *res.State) (s *res.State) {
	s = res.Open()
	old := s
	s = b
	old.Release()
	s.Append(1)
	return s
}

func copyOfParam(s *res.State) int {
	old := s
	old.Release()
	return s.Len() // want `State s is used after Release released it`
}
