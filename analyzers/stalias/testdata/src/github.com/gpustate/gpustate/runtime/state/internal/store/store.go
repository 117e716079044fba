// Package store stands in for the runtime's store: the heads and groups
// that generated handles wrap, with the directives on their methods.
package store

import "github.com/gpustate/gpustate/runtime/device"

// Layout describes the columns of a state.
type Layout struct {
	Type     string
	ShareKey string
}

// Head is a mutable state.
type Head struct{ rows int }

// AdoptPrefix gives an empty shared head the cached blocks whose keys
// match.
//
//state:appends
func (h *Head) AdoptPrefix(keys []byte) (int, error) { return 0, nil }

// AppendDevice reserves n rows for a kernel to fill.
//
//state:appends
func (h *Head) AppendDevice(n int) ([][]device.Span, error) { return nil, nil }

// Spans locates rows for kernels that read them.
//
//state:view
func (h *Head) Spans(from, to int) ([][]device.Span, error) { return nil, nil }

// Release gives up h.
//
//state:release
func (h *Head) Release() error { return nil }

// Group holds member heads that move together.
type Group struct{ heads []*Head }

// Head returns member i.
func (g *Group) Head(i int) *Head { return g.heads[i] }
