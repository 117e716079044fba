package ifcuse

import "ifc"

type impl struct{}

func (impl) Close() error { return nil }

func Use(b ifc.Backend) {
	ctx := b.NewContext() // want `call \(ifc.Backend\).NewContext: directives acquire`
	_ = ctx.Layer(0)      // want `call \(ifc.Context\).Layer: directives view`
	ctx.Fill(nil)         // want `call \(ifc.Context\).Fill: directives writes=dst`
	ctx.Forward(nil)
	ctx.Close() // want `call \(ifc.Context\).Close: directives release`
	impl{}.Close()
}
