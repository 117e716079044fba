package ifc // want package:"directives declared"

// Package ifc declares directives on interface methods.

type Tensor interface{ Data() []float32 }

// Backend opens contexts.
type Backend interface {
	// NewContext opens a context the caller must close.
	//
	//state:acquire
	NewContext() Context // want NewContext:"directives acquire"
}

type Context interface {
	//state:view
	Layer(i int) Tensor // want Layer:"directives view"
	//state:release
	Close() error // want Close:"directives release"
	//state:writes dst
	Fill(dst []float32) // want Fill:"directives writes=dst"
	Forward(t Tensor) Tensor
}
