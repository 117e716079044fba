// Package externreleased uses ml's contexts after closing them, with the
// contracts of mlcontracts.
package externreleased

import (
	"ml"
	"mlcontracts"
)

var _ = mlcontracts.Loaded

func useAfterClose(b ml.Backend) {
	ctx := b.NewContext()
	ctx.Close()
	ctx.Empty(1) // want `Context ctx is used after Close released it`
}

func backendAfterClose(b ml.Backend) {
	b.Close()
	b.NewContext().Close() // want `Backend b is used after Close released it`
}

func closeLast(b ml.Backend) {
	ctx := b.NewContext()
	ctx.Empty(1)
	ctx.Close()
}
