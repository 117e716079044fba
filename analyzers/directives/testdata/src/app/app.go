package app

import (
	"ext"
	"gpu"
)

var _ = ext.Helper

func Use(b gpu.Backend) *gpu.Pool {
	ctx := b.NewContext() // want `call \(gpu.Backend\).NewContext: directives acquire`
	_ = ctx.Layer(0)      // want `call \(gpu.Context\).Layer: directives view`
	ctx.Close()           // want `call \(gpu.Context\).Close: directives release`
	var impl gpu.Impl
	impl.Close()       // a concrete type's method carries its own facts
	p, _ := gpu.Open() // want `call gpu.Open: directives acquire`
	p.Put(nil)         // want `call \(\*gpu.Pool\).Put: directives takes=b`
	return p
}
