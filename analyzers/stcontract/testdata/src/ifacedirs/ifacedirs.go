// Package ifacedirs puts directives on interface methods.
package ifacedirs

type Tensor interface{ Data() []float32 }

// Backend opens contexts.
type Backend interface {
	//state:acquire
	NewContext() Context

	//state:acquire // want `//state:acquire on interface method Backend.Nothing: it returns nothing`
	Nothing()

	//state:writes n // want `//state:writes n on interface method Backend.Count: parameter n has type int`
	Count(n int)

	//state:takes tt // want `//state:takes tt on interface method Backend.Keep names no parameter; did you mean t\?`
	Keep(t Tensor)

	//state:growth append bound=8 // want `//state:growth applies to the doc comment of a state type, not to interface method Backend.Grow`
	Grow()
}

// Context is closed by its owner.
type Context interface {
	//state:view
	Layer(i int) Tensor
	//state:release
	Close() error
	//state:appends
	Append(t Tensor) error
	//state:writes dst
	Fill(dst []float32)
	//state:takes t
	Keep(t Tensor)
}
