// Package edge holds contracts in odd places and on odd types.
package edge

//state:contract // want `state type Slice is not a struct type`
//state:growth append bound=8
//state:owner session
type Slice []float32

//state:contract // want `state type Empty has no fields`
//state:growth append bound=8
//state:owner session
type Empty struct{}

// Inner is embedded below.
type Inner struct{ Y []int8 }

//state:contract
//state:growth append bound=8
//state:owner session
type Embeds struct {
	Inner // want `embedded field Inner in state type Embeds`
	X     []int32
}

//state:contract // want `state type Generic has type parameters`
//state:growth append bound=8
//state:owner session
type Generic[E ~float32 | ~float64] struct{ X []E }

//state:contract // want `state type Alias is an alias`
//state:growth append bound=8
//state:owner session
type Alias = Inner

// Base is a struct type that a state type is defined over.
type Base struct{ Z []uint16 }

// Over is a defined type over a struct type: a valid state type.
//
//state:contract
//state:growth append bound=8
//state:owner session
type Over Base

// Grouped declarations carry their directives on each spec.
type (
	// A is valid.
	//
	//state:contract
	//state:growth append bound=8
	//state:owner session
	A struct{ X []int8 }

	// B is a second contract in the same group.
	//
	//state:contract
	//state:growth mutable bound=8
	//state:owner step
	B struct{ X []int8 }
)

//state:growth append bound=8 // want `//state:growth applies to the doc comment of a state type, not to func OnFunc`
func OnFunc() {}

//state:snapshot // want `//state:snapshot applies to the doc comment of a state type, not to func SnapOnFunc`
func SnapOnFunc() {}

//state:owner session // want `//state:owner on Loose is outside a contract; add //state:contract`
type Loose struct{ X []int8 }

//state:snapshot immutable // want `//state:snapshot on SnapArg takes no arguments outside a contract`
type SnapArg struct{}

//state:acquire // want `//state:acquire applies to a func or method, not to type AcqType`
type AcqType struct{}

//state:contract // want `is not in the doc comment of a type or func`
var V int

func body() {
	//state:acquire // want `//state:acquire is not in the doc comment of a type or func`
	x := 1
	_ = x
}

//state:contract // want `is not in the doc comment of a type or func`

// Detached is not the type the floating contract line above meant.
type Detached struct{ X []int8 }

type Fielded struct {
	//state:writes x // want `//state:writes is not in the doc comment of a type or func`
	X []int8
}
