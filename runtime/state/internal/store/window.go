package store

// Window states (Layout.Window > 0). Row indices are stable: a root's rows
// counts every row ever appended, and only rows [floor, rows) are
// readable, floor being rows-Window (or 0). After each write the head drops
// from its own root the blocks that hold only rows below the floor; a
// block goes back to the pool when no snapshot, branch or other version
// holds it any more. So a head holds at most Window rows plus one block per
// column, beyond what its snapshots pin, and each snapshot keeps the
// readable range of its own version.

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
		if h.tier != nil {
			return h.floor(h.tier.rows)
		}
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
		if s.tier != nil {
			return s.floor(s.tier.rows)
		}
		return 0
	}
	return s.floor(s.r.rows)
}
