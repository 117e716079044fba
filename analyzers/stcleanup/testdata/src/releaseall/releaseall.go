// Package releaseall releases its resources with helpers that are variadic
// over an interface or a type parameter.
package releaseall

import (
	"errors"

	"res"
)

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

// closeCollect releases each of xs and collects the errors.
func closeCollect(xs ...*res.State) error {
	var errs []error
	for _, x := range xs {
		errs = append(errs, x.Release())
	}
	return errors.Join(errs...)
}

// closePair releases both.
func closePair(a, b *res.State) error {
	return errors.Join(a.Release(), b.Release())
}

func collected(p *res.Pool) error {
	a, err := res.NewState(p)
	if err != nil {
		return err
	}
	b := res.Open()
	defer closeCollect(a, b)
	return a.Append(1)
}

func joined() error {
	a := res.Open()
	b := res.Open()
	defer closePair(a, b)
	return a.Append(1)
}

func deferredJoin() (err error) {
	a := res.Open()
	defer func() { err = errors.Join(err, a.Release()) }()
	return a.Append(1)
}
