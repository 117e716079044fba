// Package state stands in for the runtime's block store: the heads and the
// directives on them that generated handles wrap.
package state

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

// NewHead returns a new head for owner.
//
//state:acquire
func (p *Pool) NewHead(l *Layout, owner Owner) (*Head, error) { return &Head{}, nil }

// NewSharedHead is NewHead for a layout with a ShareKey, in a sharing
// domain.
//
//state:acquire
func (p *Pool) NewSharedHead(l *Layout, owner Owner, domain Domain) (*Head, error) {
	return p.NewHead(l, owner)
}

// Append appends rows.
//
//state:appends
func (h *Head) Append(cols [][]byte) error { return nil }

// AdoptPrefix gives an empty shared head the cached blocks whose keys
// match.
//
//state:appends
func (h *Head) AdoptPrefix(keys []byte) (int, error) { return 0, nil }

// Len is a plain read.
func (h *Head) Len() int { return h.rows }

// Release gives up h.
//
//state:release
func (h *Head) Release() error { return nil }

// Bytes views s as bytes.
func Bytes[T any](s []T) []byte { return nil }

// Read copies rows out.
func (h *Head) Read(from, to int, dst [][]byte) error { return nil }
