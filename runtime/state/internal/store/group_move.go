package store

import (
	"slices"
)

// Rollback moves every member back to its snapshot in to, a cut of this
// group (or of a group it descends from by Branch, sharing its
// lineages), or none of them: every member is checked first (the
// snapshot's owner, ancestry, release, invalidation and eviction, as
// Head.Rollback checks them), with every member's lock and every
// lineage's lock held, and only then are all moved. A target that any
// member has invalidated answers ErrInvalidated, and no member moves. Each
// member applies its own descendants rule.
//
//state:mutates
func (g *Group) Rollback(to *GroupSnap) error {
	if err := g.live("Rollback"); err != nil {
		return err
	}
	if to == nil || len(to.snaps) != len(g.heads) {
		return g.errorf("Rollback", "the snapshot is no cut of this group's members: %w", ErrNotAncestor)
	}
	m := move{heads: g.heads, to: to.snaps, group: g}
	if err := m.args(); err != nil {
		return err
	}
	if err := g.begin("Rollback", g.order, nil); err != nil {
		return err
	}
	defer g.end(g.order, nil)
	return m.run()
}

// Merge fast-forwards every member to the matching member of child, a
// group branched from g (or from a group of the same lineages), or none of
// them: every pair is checked first (owner, lineage, release,
// invalidation, eviction, divergence, as Head.Merge checks them), with
// every member's lock and every lineage's lock held, and only then are
// all moved. The child stays live and unchanged.
//
//state:mutates
func (g *Group) Merge(child *Group) error {
	if err := g.live("Merge"); err != nil {
		return err
	}
	if child == nil || len(child.heads) != len(g.heads) {
		return g.errorf("Merge", "the child is no branch of this group: %w", ErrDiverged)
	}
	m := move{heads: g.heads, child: child.heads, group: g}
	if err := m.args(); err != nil {
		return err
	}
	if child == g {
		err := g.begin("Merge", g.order, nil)
		if err == nil {
			g.end(g.order, nil)
		}
		return err
	}
	heads := byID(append(slices.Clone(g.heads), child.heads...))
	if err := g.begin("Merge", heads, child); err != nil {
		return err
	}
	defer g.end(heads, child)
	return m.run()
}

// Snap returns member i's snapshot; nil for an i out of range. It belongs
// to the cut: release the cut, not the member's snapshot.
func (v *GroupSnap) Snap(i int) *Snap {
	if v == nil || i < 0 || i >= len(v.snaps) {
		return nil
	}
	return v.snaps[i]
}

// Release releases every member's snapshot. Releasing twice does nothing.
//
//state:release
func (v *GroupSnap) Release() error {
	if v == nil {
		return nil
	}
	var first error
	for _, s := range v.snaps {
		if err := s.Release(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
