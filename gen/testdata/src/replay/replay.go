// Package replay holds a recurrent state whose history is kept as the
// inputs of its steps.
package replay

// Layers is the number of recurrent layers.
const Layers = 4

type Token uint32

// Recurrent is the state of the recurrent layers of one session, rewritten
// by every decoding step from the step's input.
//
//state:contract purpose="recurrent layers' state of one session"
//state:growth mutable bound=Layers
//state:owner session
//state:rollback descendants=invalidate
//state:checkpoint every=16 keep=4
//state:replay input=RecInput verify=hash
type Recurrent struct {
	H    []float32 `state:"width=1024"`
	Gate []float32 `state:"width=64"`
}

// RecInput is the input of one step: the token's activations and the
// token itself.
type RecInput struct {
	X   []float32 `state:"width=64"`
	Tok []Token
}

// Conv is a convolution state replayed without verification, from an
// input of three fields.
//
//state:contract
//state:growth mutable bound=8
//state:owner session
//state:checkpoint every=8 keep=2
//state:replay input=ConvIn
type Conv struct {
	W []int16 `state:"width=4"`
}

// ConvIn is Conv's step input.
type ConvIn struct {
	A []int16 `state:"width=4"`
	B []int8
	C [][2]uint8
}
