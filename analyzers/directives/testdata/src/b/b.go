package b

import "a"

func use() {
	h, _ := a.Open() // want `call a.Open: directives acquire`
	defer h.Close()  // want `call \(\*a.Handle\).Close: directives release`
	var s a.Snap     // want `snapshot a.Snap`
	_ = s
	var p *a.Snap // want `snapshot \*a.Snap`
	_ = p
	var kv a.KV // want `contract a.KV valid=true`
	_ = kv
	var bad a.Bad // want `contract a.Bad valid=false`
	_ = bad
	var box a.Box[int]
	_ = box.Data() // want `call \(\*a.Box\[int\]\).Data: directives view`
	a.Fill(h, nil) // want `call a.Fill: directives takes=h writes=dst`
}

// Wrap returns a wrapped handle; the package exports a fact because it imports a.
func Wrap() *a.Handle { return nil }
