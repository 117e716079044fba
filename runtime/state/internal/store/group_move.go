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
	for i, h := range g.heads {
		if err := h.rollbackArg(to.snaps[i]); err != nil {
			return err
		}
	}
	if err := g.begin("Rollback", g.order, nil); err != nil {
		return err
	}
	defer g.end(g.order, nil)
	for _, s := range to.snaps {
		if err := s.back("Rollback"); err != nil {
			return err
		}
	}
	for _, s := range to.snaps {
		s.mu.RLock()
		defer s.mu.RUnlock()
	}
	var locks lineageLocks
	locks.lock(g.heads)
	for i, h := range g.heads {
		// A target any member has invalidated answers that first.
		if to.snaps[i].invalid.Load() || h.invalid.Load() {
			locks.unlock()
			return g.errorf("Rollback", "member %s, nothing moved: %w", h.l.Type, ErrInvalidated)
		}
	}
	for i, h := range g.heads {
		if err := h.rollbackCheck(to.snaps[i]); err != nil {
			locks.unlock()
			return g.errorf("Rollback", "member %s, nothing moved: %w", h.l.Type, err)
		}
	}
	freed := g.pool.takeFreed()
	for i, h := range g.heads {
		h.rollbackMove(to.snaps[i], freed)
	}
	locks.unlock()
	for _, h := range g.heads {
		h.moved()
	}
	g.pool.freeList(freed) // finishMove, for every member
	return nil
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
	for i, h := range g.heads {
		c := child.heads[i]
		if c.owner != h.owner {
			return g.errorf("Merge", "member %s: child of owner %q, head of owner %q: %w", h.l.Type, c.owner, h.owner, ErrOwner)
		}
		if c.pool != h.pool || c.lin != h.lin {
			return g.errorf("Merge", "member %s: the child is no branch of this head's lineage: %w", h.l.Type, ErrDiverged)
		}
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
	var locks lineageLocks
	locks.lock(g.heads)
	for i, h := range g.heads {
		if err := h.mergeCheck(child.heads[i]); err != nil {
			locks.unlock()
			return g.errorf("Merge", "member %s, nothing moved: %w", h.l.Type, err)
		}
	}
	freed := g.pool.takeFreed()
	for i, h := range g.heads {
		h.mergeMove(child.heads[i], freed)
	}
	locks.unlock()
	for _, h := range g.heads {
		h.moved()
	}
	g.pool.freeList(freed) // finishMove, for every member
	return nil
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
