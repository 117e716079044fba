// Package replay holds replay lines: one fault per contract, and correct
// contracts with no finding.
package replay

const Layers = 4

// RecInput is the input of one recurrent step: silent, it is no state
// type.
type RecInput struct {
	X   []float32 `state:"width=64"`
	Pos []int32
}

// Recurrent is the state of recurrent layers, history kept as inputs:
// silent.
//
//state:contract
//state:growth mutable bound=Layers
//state:owner session
//state:rollback descendants=invalidate
//state:checkpoint every=16 keep=4
//state:replay input=RecInput verify=hash
type Recurrent struct {
	H []float32 `state:"width=4096"`
}

//state:contract
//state:growth append bound=Layers
//state:owner session
//state:checkpoint every=16 keep=4
//state:replay input=RecInput // want `//state:replay of Appended needs mutable growth`
type Appended struct{ H []float32 }

//state:contract
//state:growth mutable bound=Layers
//state:owner session
//state:replay input=RecInput // want `//state:replay of NoCheckpoint needs a //state:checkpoint line`
type NoCheckpoint struct{ H []float32 }

//state:contract
//state:growth mutable bound=Layers
//state:owner session
//state:checkpoint every=16 keep=4
//state:replay input=RecInptu // want `input RecInptu in //state:replay of Missing names no type of the package`
type Missing struct{ H []float32 }

//state:contract
//state:growth mutable bound=Layers
//state:owner session
//state:checkpoint every=16 keep=4
//state:replay input=int // want `input int in //state:replay of Predeclared is a predeclared type, not a struct type of the package; declare type PredeclaredInput struct\{ X \[\]int64 \} beside Predeclared and name it`
type Predeclared struct{ H []float32 }

// Words is no input: a field of strings.
type Words struct{ W []string }

//state:contract
//state:growth mutable bound=Layers
//state:owner session
//state:checkpoint every=16 keep=4
//state:replay input=Words // want `input Words in //state:replay of BadInput has field W of element type string, which is not fixed-size`
type BadInput struct{ H []float32 }

//state:contract
//state:growth mutable bound=Layers
//state:owner session
//state:checkpoint every=16 keep=4
//state:replay input=RecInput verify=sha256 // want `bad value "sha256" for verify in //state:replay of BadVerify; use hash`
type BadVerify struct{ H []float32 }
