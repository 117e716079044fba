// Package stateimpl is the runtime API that stategen's generated code calls:
// the store's heads, snapshots and groups, and the layouts that describe a
// state type. It is not for hand-written code. Its API may change between
// versions of the module, with the generated code that calls it: run go
// generate again after an upgrade. What users write against is package
// runtime/state (Pool, Owner, Version, Stats, the errors) and the generated
// handles themselves.
package stateimpl

import (
	"sync"

	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/internal/slab"
	"github.com/gpustate/gpustate/runtime/state/internal/store"
)

// The store's types, as generated code names them.
type (
	Head             = store.Head
	Snap             = store.Snap
	Group            = store.Group
	GroupSnap        = store.GroupSnap
	Layout           = store.Layout
	Column           = store.Column
	CheckpointPolicy = store.CheckpointPolicy
	Stepper          = store.Stepper
	HostStepper      = store.HostStepper
	Growth           = store.Growth
	Retention        = store.Retention
	Descendants      = store.Descendants
)

// A layout's growth, retention and rollback rule.
const (
	Append          = store.Append
	Mutable         = store.Mutable
	Mandatory       = store.Mandatory
	Optional        = store.Optional
	Reconstructable = store.Reconstructable
	Invalidate      = store.Invalidate
	Keep            = store.Keep
)

// NewHead makes a state of layout l owned by owner on pool p.
func NewHead(p *state.Pool, l *Layout, owner state.Owner) (*Head, error) {
	return store.PoolOf(p).NewHead(l, owner)
}

// NewHeadInto is NewHead making the head in h, a zero Head no call used
// before: the generated handle's own field, so that a new state and its
// handle are one allocation.
func NewHeadInto(p *state.Pool, h *Head, l *Layout, owner state.Owner) error {
	return store.PoolOf(p).NewHeadInto(h, l, owner)
}

// NewSharedHeadInto is NewSharedHead making the head in h (NewHeadInto).
func NewSharedHeadInto(p *state.Pool, h *Head, l *Layout, owner state.Owner, d state.Domain) error {
	return store.PoolOf(p).NewSharedHeadInto(h, l, owner, d)
}

// NewSharedHead makes a state of layout l that may share the blocks of a
// common prefix with the states of domain d.
func NewSharedHead(p *state.Pool, l *Layout, owner state.Owner, d state.Domain) (*Head, error) {
	return store.PoolOf(p).NewSharedHead(l, owner, d)
}

// NewGroup makes a group of one state per layout, moved together.
func NewGroup(p *state.Pool, owner state.Owner, layouts ...*Layout) (*Group, error) {
	return store.NewGroup(store.PoolOf(p), owner, layouts...)
}

// NewSharedGroup is NewGroup whose members may share prefixes in domain d.
func NewSharedGroup(p *state.Pool, owner state.Owner, d state.Domain, layouts ...*Layout) (*Group, error) {
	return store.NewSharedGroup(store.PoolOf(p), owner, d, layouts...)
}

// Table returns a store block table as runtime/state's, with the error
// that came with it.
func Table(t *store.BlockTable, err error) (*state.BlockTable, error) {
	return store.PublicTable(t), err
}

// Resize returns s with n elements, reusing its array when its capacity
// holds n, else a new one: generated ReadInto methods fill a caller's
// batch with it, so that a batch read again and again allocates nothing.
// The elements kept are not cleared (the read overwrites them); a
// negative n gives an empty slice.
func Resize[T any](s []T, n int) []T {
	if n <= 0 {
		return s[:0]
	}
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// Slab hands out new handles of type T carved from larger allocations: a
// generated type keeps one per handle type, so that a serving loop's
// snapshots and branches allocate once every few dozen calls. No handle is
// handed out twice, so that a handle used after its Release still answers
// that it was released. A live handle keeps its chunk (about 8 KiB of host
// memory) from the garbage collector. The zero Slab is ready to use.
type Slab[T any] struct{ s slab.Slab[T] }

// New returns a zero T that no earlier call returned.
func (s *Slab[T]) New() *T { return s.s.New() }

// Scratch keeps values of type T for reuse: a generated StepHost hands
// the user's step function its rows as a *T, which the call would
// otherwise allocate each step (a pointer handed to a function value
// escapes). A value must not be used after Put. The zero Scratch is ready
// to use.
type Scratch[T any] struct{ p sync.Pool }

// Get returns a zero T, kept or new.
func (s *Scratch[T]) Get() *T {
	if v, ok := s.p.Get().(*T); ok {
		return v
	}
	return new(T)
}

// Put zeroes v, so that it keeps nothing alive, and keeps it for Get.
func (s *Scratch[T]) Put(v *T) {
	var zero T
	*v = zero
	s.p.Put(v)
}
