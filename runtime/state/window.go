package state

import "fmt"

// Window states (Layout.Window > 0). Row indices are stable: a root's rows
// counts every row ever appended, and only rows [floor, rows) are
// readable, floor being rows-Window (or 0). After each write the head drops
// from its own root the blocks that hold only rows below the floor; a
// block goes back to the pool when no snapshot, branch or other version
// holds it any more. So a head holds at most Window rows plus one block per
// column, beyond what its snapshots pin, and each snapshot keeps the
// readable range of its own version.

// checkWindow validates the window and block fields of l.
func (l *Layout) checkWindow() error {
	switch {
	case l.BlockRows < 0:
		return fmt.Errorf("state: layout of %s has %d rows per block: %w", l.Type, l.BlockRows, ErrShape)
	case l.Window < 0:
		return fmt.Errorf("state: layout of %s has a window of %d rows; a window is positive, or 0 for none: %w", l.Type, l.Window, ErrShape)
	case l.Window == 0:
		return nil
	case l.Growth != Append:
		return fmt.Errorf("state: layout of %s has a window but %v growth; a window needs append growth: %w", l.Type, l.Growth, ErrShape)
	case l.Bound > 0:
		return fmt.Errorf("state: layout of %s has both a bound of %d and a window of %d rows; a window is the bound, keep one: %w", l.Type, l.Bound, l.Window, ErrShape)
	case l.Checkpoint != nil:
		return fmt.Errorf("state: layout of %s has a window and a checkpoint policy; expired rows cannot be reconstructed: %w", l.Type, ErrShape)
	case l.Window > maxInt/4:
		return fmt.Errorf("state: layout of %s has a window of %d rows, more than a state can hold: %w", l.Type, l.Window, ErrShape)
	}
	return nil
}

// floor returns the first readable row of a version of rows rows.
func (sh *shape) floor(rows int) int {
	if w := sh.l.Window; w > 0 && rows > w {
		return rows - w
	}
	return 0
}

// logicalOf returns the bytes of the readable rows of r.
func (sh *shape) logicalOf(r *root) int64 {
	return int64(r.rows-sh.floor(r.rows)) * sh.rowSum
}

// checkReadable checks 0 <= from <= to <= rows, and that a non-empty range
// starts at or above the window's floor.
func (sh *shape) checkReadable(op string, from, to, rows int) error {
	if err := sh.checkRange(op, from, to, rows); err != nil {
		return err
	}
	if f := sh.floor(rows); from < f && from < to {
		return sh.errorf(op, "rows [%d, %d): rows below %d left the window of %d rows: %w", from, to, f, sh.l.Window, ErrExpired)
	}
	return nil
}

// expire drops from r, which its caller holds alone, the blocks of every
// column that hold only rows below the window's floor.
func (sh *shape) expire(r *root, freed *[]*block) {
	f := sh.floor(r.rows)
	if f == 0 {
		return
	}
	for i, per := range sh.perBlock {
		r.cols[i].drop(f/per, freed)
	}
}

// Oldest returns the first readable row: Len()-Window for a window state
// that has passed its window, else 0.
func (h *Head) Oldest() int {
	if h == nil || h.pool.isClosed() {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.r == nil {
		return 0
	}
	return h.floor(h.r.rows)
}

// Window returns the layout's window (0: none).
func (h *Head) Window() int {
	if h == nil {
		return 0
	}
	return h.l.Window
}

// Oldest returns the snapshot's first readable row (see Head.Oldest).
func (s *Snap) Oldest() int {
	if s == nil || s.pool.isClosed() {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.r == nil {
		return 0
	}
	return s.floor(s.r.rows)
}

// held returns block i of t, or nil when t holds none there: below lo
// (expired, its subtree perhaps pruned) or past the end. Walks over every
// block of a tree use it, so that a window's dropped blocks are skipped.
func (t *tree) held(i int) *block {
	if i < t.lo || i >= t.n || t.root == nil {
		return nil
	}
	n := t.root
	for h := t.height; h > 1; h-- {
		n = n.kids[(i>>(fanBits*(h-1)))&(fan-1)]
		if n == nil {
			return nil
		}
	}
	return n.blks[i&(fan-1)]
}

// drop releases t's references to blocks [t.lo, hi), in a tree of a root
// its holder holds alone: shared nodes on the way are copied first, so
// other versions keep their blocks. Subtrees left empty are removed.
func (t *tree) drop(hi int, freed *[]*block) {
	hi = min(hi, t.n)
	if hi <= t.lo || t.root == nil {
		return
	}
	t.root = own(t.root, freed)
	dropRange(t.root, t.height, 0, t.lo, hi, freed)
	t.lo = hi
}

// dropRange drops blocks [lo, hi) under n, a node of height h that its
// parent holds alone and whose first block is base, and reports whether n
// is left empty.
func dropRange(n *node, h, base, lo, hi int, freed *[]*block) bool {
	empty := true
	if h == 1 {
		for k, b := range n.blks {
			if i := base + k; b != nil && i >= lo && i < hi {
				releaseBlock(b, freed)
				n.blks[k] = nil
			}
			empty = empty && n.blks[k] == nil
		}
		return empty
	}
	span := capacity(h - 1)
	for k, c := range n.kids {
		kb := base + k*span
		switch {
		case c == nil:
		case kb >= lo && kb+span <= hi:
			releaseNode(c, freed)
			n.kids[k] = nil
		case kb+span > lo && kb < hi:
			c = own(c, freed)
			n.kids[k] = c
			if dropRange(c, h-1, kb, lo, hi, freed) {
				releaseNode(c, freed)
				n.kids[k] = nil
			}
		}
		empty = empty && n.kids[k] == nil
	}
	return empty
}
