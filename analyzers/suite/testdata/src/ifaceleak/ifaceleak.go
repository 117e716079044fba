// Package ifaceleak declares directives on interface methods and uses them.
package ifaceleak

import "errors"

type Tensor interface{ Data() []float32 }

// Backend makes contexts.
type Backend interface {
	//state:acquire
	NewContext() Context
}

// Context is a resource its owner closes.
type Context interface {
	//state:view
	Layer(i int) Context
	Empty(n int) Tensor
	//state:release
	Close() error
}

func leak(b Backend) {
	ctx := b.NewContext() // want `acquired by NewContext is not released on every path`
	ctx.Empty(1)
}

func leakOnError(b Backend, fail bool) error {
	ctx := b.NewContext() // want `acquired by NewContext is not released on every path`
	if fail {
		return errors.New("fail")
	}
	return ctx.Close()
}

func discarded(b Backend) {
	b.NewContext() // want `acquired by NewContext is discarded`
}

func closed(b Backend) {
	ctx := b.NewContext()
	defer ctx.Close()
	ctx.Empty(1)
}

func closedThroughView(b Backend) {
	ctx := b.NewContext()
	l := ctx.Layer(0)
	l.Empty(1)
	ctx.Close()
}

func returned(b Backend) Context {
	return b.NewContext()
}
