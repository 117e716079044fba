// Package ifacereleased uses a context after closing it, through an
// interface whose methods carry directives.
package ifacereleased

type Tensor interface{ Data() []float32 }

type Context interface {
	Empty(n int) Tensor
	//state:release
	Close() error
}

func useAfterClose(ctx Context) {
	ctx.Close()
	ctx.Empty(1) // want `Context ctx is used after Close released it`
}

func closeLast(ctx Context) {
	ctx.Empty(1)
	ctx.Close()
}
