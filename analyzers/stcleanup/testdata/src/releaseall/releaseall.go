// Package releaseall releases its resources with helpers that are variadic
// over an interface or a type parameter.
package releaseall

import "res"

type releaser interface{ Release() error }

func releaseAll(xs ...releaser) {
	for _, x := range xs {
		x.Release()
	}
}

func releaseAllT[T releaser](xs ...T) {
	for _, x := range xs {
		if err := x.Release(); err != nil {
			panic(err)
		}
	}
}

func closeNonNil(xs ...releaser) {
	for _, x := range xs {
		if x != nil {
			x.Release()
		}
	}
}

func deferred(p *res.Pool) error {
	a, err := res.NewState(p)
	if err != nil {
		return err
	}
	b, err := res.NewState(p)
	if err != nil {
		a.Release()
		return err
	}
	defer releaseAll(a, b)
	return a.Append(1)
}

func deferredGeneric(p *res.Pool) error {
	a, err := res.NewState(p)
	if err != nil {
		return err
	}
	b, err := res.NewState(p)
	if err != nil {
		a.Release()
		return err
	}
	defer releaseAllT(a, b)
	return b.Append(1)
}

func atEnd(p *res.Pool) error {
	a, err := res.NewState(p)
	if err != nil {
		return err
	}
	s := res.Open()
	closeNonNil(a, s)
	return nil
}

func oneForgotten(p *res.Pool) error {
	a, err := res.NewState(p)
	if err != nil {
		return err
	}
	b, err := res.NewState(p) // want `State acquired by NewState is not released on every path; add defer b.Release\(\)`
	if err != nil {
		a.Release()
		return err
	}
	defer releaseAll(a)
	return b.Append(1)
}

func earlyReturn(p *res.Pool, n int) error {
	a, err := res.NewState(p) // want `State acquired by NewState is not released on every path; add defer a.Release\(\)`
	if err != nil {
		return err
	}
	if n < 0 {
		return nil
	}
	releaseAllT(a)
	return nil
}
