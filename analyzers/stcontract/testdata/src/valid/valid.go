// Package valid holds correct contracts: stcontract says nothing here.
package valid

import "dims"

// The directives below name dims' constants; Go wants a use in code too.
var _ = dims.Head

// Dim is a local head dimension.
const Dim = 32

// MaxTokens is the context length.
const MaxTokens = 2048

// Half is a half-precision float stored as its bits.
type Half uint16

// KVCache holds one session's keys and values.
//
//state:contract purpose="decoder KV cache for one session"
//state:growth append bound=4*MaxTokens
//state:owner session
//state:retention reconstructable
//state:snapshot immutable
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:checkpoint every=64 keep=8
//state:cleanup on=session-end
type KVCache struct {
	Keys   []Half `state:"width=128"`
	Values []Half `state:"width=128"`
	Pos    [][2]int32
}

// Grid is a second contract in the same file.
//
//state:contract
//state:growth mutable bound="1 << 10"
//state:owner step
//state:snapshot none
type Grid struct {
	Cells []float64 `json:"cells" state:"width=4"`
}

// Field is stepped in place and checkpointed by bytes written: a
// checkpoint whenever the deltas since the last one reach 64 KiB.
//
//state:contract
//state:growth mutable bound=256
//state:owner step
//state:retention reconstructable
//state:rollback descendants=keep
//state:checkpoint budget=64<<10 keep=4
type Field struct {
	Cells []float32 `state:"width=64"`
}

// Log grows without a bound, by decision.
//
//state:contract
//state:growth append bound=unbounded reason="drained by the exporter every second"
//state:owner process
type Log struct{ Events []uint64 }

// View is an immutable view.
//
//state:snapshot
type View struct{ data []Half }

// Buffer is a user's own resource.
type Buffer struct{ data []float32 }

// NewBuffer returns a buffer the caller must release.
//
//state:acquire
func NewBuffer(n int) (*Buffer, error) { return &Buffer{data: make([]float32, n)}, nil }

// Release frees the buffer.
//
//state:release
func (b *Buffer) Release() error { return nil }

// Push grows the buffer.
//
//state:appends
func (b *Buffer) Push(x float32) error { b.data = append(b.data, x); return nil }

// Data aliases the buffer.
//
//state:view
func (b *Buffer) Data() []float32 { return b.data }

// Launch writes through out and takes over in.
//
//state:takes in
//state:writes out
func Launch(in *Buffer, out []float32, n int) {}

// Fill writes through any slice type.
//
//state:writes dst
func Fill[S ~[]E, E any](dst S, v E) {
	for i := range dst {
		dst[i] = v
	}
}

// state: prose that mentions state: is not a directive.
func Prose() {}

// Heads is sized by constants: local and imported, alone and in expressions,
// in the bound and in the widths alike.
//
//state:contract
//state:growth mutable bound=dims.Rows
//state:owner step
type Heads struct {
	Q []Half `state:"width=Dim"`
	K []Half `state:"width=2*Dim"`
	V []Half `state:"width=dims.Head"`
	O []Half `json:"o" state:"width=dims.Head * 2"`
}

// Spread grows to the size limit and no further: 1<<44 rows of 16 bytes
// are 256 TiB.
//
//state:contract
//state:growth append bound="1 << 44"
//state:owner process
type Spread struct {
	A []int64
	B []int32 `state:"width=2"`
}
