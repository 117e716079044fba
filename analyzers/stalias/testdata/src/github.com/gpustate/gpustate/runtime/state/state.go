// Package state stands in for the runtime's block store: the heads and the
// directives on them that generated handles wrap.
package state

import "github.com/gpustate/gpustate/runtime/device"

// Owner names the owner of a head.
type Owner string

// Domain names a sharing domain.
type Domain string

// Layout describes the columns of a state.
type Layout struct {
	Type     string
	ShareKey string
}

// Pool hands out heads.
type Pool struct{ n int }

// Head is a mutable state.
type Head struct{ rows int }

// NewSharedHead returns a new head that shares the blocks of its prefix
// with the heads of its domain.
//
//state:acquire
func (p *Pool) NewSharedHead(l *Layout, owner Owner, domain Domain) (*Head, error) {
	return &Head{}, nil
}

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
