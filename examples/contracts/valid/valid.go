// Package valid shows well-formed gpustate contracts and function
// directives. statevet reports nothing here.
package valid

//go:generate go run github.com/gpustate/gpustate/cmd/stategen

import "errors"

// MaxTokens is the longest context a session may hold.
const MaxTokens = 4096

// HeadDim is the width of one attention head; KVCache holds two heads per
// row. Widths, like bounds, are constant expressions, and other packages'
// contracts may name them (width=valid.HeadDim).
const HeadDim = 64

// Half is an IEEE 754 half-precision float, stored as its bits.
type Half uint16

// KVCache holds one session's attention keys and values, one row per token.
//
//state:contract purpose="decoder KV cache for one session"
//state:growth append bound=MaxTokens
//state:owner session
//state:snapshot immutable
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:checkpoint every=256 keep=4
//state:cleanup on=session-end
type KVCache struct {
	Keys   []Half `state:"width=2*HeadDim"`
	Values []Half `state:"width=2*HeadDim"`
}

// Recurrent is a recurrent layer's state beside KVCache, one row per
// layer, rewritten by every token's step; its history keeps the steps'
// inputs, and a past version is rebuilt by running them again.
//
//state:contract purpose="recurrent layers' state of one session"
//state:growth mutable bound=4
//state:owner session
//state:rollback descendants=invalidate
//state:checkpoint every=16 keep=4
//state:replay input=RecInput verify=hash
type Recurrent struct {
	H []float32 `state:"width=HeadDim"`
}

// RecInput is one step's input to Recurrent: a row per layer.
type RecInput struct {
	X []float32 `state:"width=HeadDim"`
}

// Session is one session's KVCache and Recurrent state, which move
// together. Both keep a history, so the group rebuilds a past cut (At).
//
//state:group purpose="one session's attention and recurrent state"
//state:owner session
type Session struct {
	KV  KVCache
	Rec Recurrent
}

// Field is a simulation grid written in place each step.
//
//state:contract purpose="pressure field"
//state:growth mutable bound=64*64
//state:owner step
//state:snapshot none
type Field struct {
	Pressure []float32
	Flags    [][4]uint8
}

// Events is an append-only log that grows without a bound, by decision.
//
//state:contract
//state:growth append bound=unbounded reason="drained by the exporter every second"
//state:owner process
//state:retention optional
type Events struct {
	At   []int64
	Kind []uint16
}

// ErrFull is returned by Push on a full ring.
var ErrFull = errors.New("ring is full")

// Ring is a fixed-capacity buffer written by hand, not generated; its
// directives tell statevet how to check its callers.
type Ring struct {
	rows     []float32
	released bool
}

// NewRing returns an empty ring of the given capacity, which the caller
// must release.
//
//state:acquire
func NewRing(capacity int) (*Ring, error) {
	if capacity <= 0 {
		return nil, errors.New("ring capacity must be positive")
	}
	return &Ring{rows: make([]float32, 0, capacity)}, nil
}

// Push appends x, or returns ErrFull.
//
//state:appends
func (r *Ring) Push(x float32) error {
	if len(r.rows) == cap(r.rows) {
		return ErrFull
	}
	r.rows = append(r.rows, x)
	return nil
}

// Rows aliases the ring's memory.
//
//state:view
func (r *Ring) Rows() []float32 { return r.rows }

// Release frees the ring; calling it twice does nothing.
//
//state:release
func (r *Ring) Release() error {
	r.released = true
	r.rows = nil
	return nil
}

// Sum pushes xs into a ring and adds them up, checking every error.
func Sum(xs []float32) (float32, error) {
	r, err := NewRing(len(xs))
	if err != nil {
		return 0, err
	}
	defer r.Release()
	for _, x := range xs {
		if err := r.Push(x); err != nil {
			return 0, err
		}
	}
	var s float32
	for _, x := range r.Rows() {
		s += x
	}
	return s, nil
}
