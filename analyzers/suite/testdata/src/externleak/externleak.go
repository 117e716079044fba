// Package externleak uses ml through the contracts of mlcontracts.
package externleak

import (
	"errors"
	"ml"
	"mlcontracts"
)

var _ = mlcontracts.Loaded

func leak(b ml.Backend) {
	ctx := b.NewContext() // want `acquired by NewContext is not released on every path`
	ctx.Empty(1)
}

func leakOnError(b ml.Backend, fail bool) error {
	ctx := b.NewContextSize(8) // want `acquired by NewContextSize is not released on every path`
	if fail {
		return errors.New("fail")
	}
	ctx.Close()
	return nil
}

func backendLeak() error {
	b, err := ml.Open("model") // want `acquired by Open is not released on every path`
	if err != nil {
		return err
	}
	b.NewContext().Close()
	return nil
}

func closed(b ml.Backend) {
	ctx := b.NewContext()
	defer ctx.Close()
	ctx.Forward(ctx.Empty(1)).Compute()
}

func closedAfterLayer(b ml.Backend) {
	ctx := b.NewContext()
	ctx.Layer(0).Empty(1)
	ctx.Close()
}

func backendClosed() error {
	b, err := ml.Open("model")
	if err != nil {
		return err
	}
	defer b.Close()
	return nil
}

// A view of an acquiring call is the same resource: stored, it escapes;
// kept in a local only, it leaks; dropped, it is discarded.

type cache struct{ ctxs map[int]ml.Context }

func (c *cache) layer(b ml.Backend, i int) ml.Tensor {
	if _, ok := c.ctxs[i]; !ok {
		c.ctxs[i] = b.NewContextSize(2).Layer(i)
	}
	return c.ctxs[i].Empty(1)
}

func (c *cache) layerLeak(b ml.Backend, i int) ml.Tensor {
	l := b.NewContextSize(2).Layer(i) // want `acquired by NewContextSize is not released on every path`
	return l.Empty(1)
}

func layerClosed(b ml.Backend) {
	l := b.NewContext().Layer(0)
	l.Empty(1)
	l.Close()
}

func layerDiscarded(b ml.Backend) {
	b.NewContext().Layer(0) // want `acquired by NewContext is discarded`
}
