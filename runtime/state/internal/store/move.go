package store

import "slices"

// A move changes the versions of one or more heads as one operation:
// Rollback sends each head back to a snapshot, Merge fast-forwards each to
// a branch of its lineage. Head.Rollback and Head.Merge move one head; a
// group's Rollback and Merge move its members, every one or none. This is
// the one place a head's version moves other than by a write or a rebuild.
//
// The heads' calls are begun (their locks held and prepared) before run.
// run locks the targets' snapshots (back from the host tier), takes every lineage's lock, checks
// every head, and moves them only when all pass; then, the lineages
// unlocked, it runs each head's moved hooks and frees what the moves gave
// up, in one list.
type move struct {
	heads []*Head // the heads that move
	to    []*Snap // Rollback's targets: heads[i] moves back to to[i]
	child []*Head // Merge's: heads[i] fast-forwards to child[i]
	group bool    // the heads are a group's members; else one head
}

// join adds o's snapshots to w and reports whether all fit, adding none
// when they do not. When o has any, h's tail waits for them: w takes a
// reference to old, h's root before the move.
func (w *snapWaits) join(o *snapWaits, h *Head, old *root) bool {
	if o.over || w.n+o.n > len(w.s) || (o.n > 0 && w.nh == len(w.heads)) {
		return false
	}
	w.n += copy(w.s[w.n:], o.s[:o.n])
	if o.n > 0 {
		w.heads[w.nh] = lateTail{h, old.retain()}
		w.nh++
	}
	return true
}

// wait waits out the reads of w's snapshots that began before they were
// marked invalid: a read that begins after sees the mark and reads
// nothing. The targets, which run holds locked, are no heads' abandoned
// versions, but are skipped all the same. (A method of w, not of the
// move: the locks' receivers escape, and the move's slices would with
// them.)
func (w *snapWaits) wait(targets []*Snap) {
	for _, s := range w.s[:w.n] {
		if !slices.Contains(targets, s) {
			s.mu.Lock()
			s.mu.Unlock() //nolint:staticcheck // an empty critical section: it waits for the readers
		}
	}
}

// lower lowers the tails of w's heads (lowerTails), after wait, and gives
// up their old roots to freed.
func (w *snapWaits) lower(freed *[]*block) {
	for _, t := range w.heads[:w.nh] {
		lowerTails(t.h, t.old, t.h.r)
		t.old.release(freed)
	}
}

// op names m's call for errors: a constant, so that an error made of it
// keeps no reference to m, which stays on its caller's stack.
func (m *move) op() string {
	if m.to != nil {
		return "Rollback"
	}
	return "Merge"
}

// errorf returns an error of m's call about head h: the head's own for a
// head's call, the group's naming the member for a group's.
func (m *move) errorf(h *Head, format string, args ...any) error {
	if !m.group {
		return h.errorf(m.op(), format, args...)
	}
	return groupErrorf(m.op(), "member %s: "+format, append([]any{h.l.Type}, args...)...)
}

// args checks what can be checked of the targets without a lock: their
// owners, and for a merge that each child is a branch of its head's
// lineage in the same pool.
func (m *move) args() error {
	for i, h := range m.heads {
		if m.to != nil {
			to := m.to[i]
			if to == nil {
				return m.errorf(h, "nil snapshot: %w", ErrNotAncestor)
			}
			if to.owner != h.owner {
				return m.errorf(h, "snapshot of owner %q, head of owner %q: %w", to.owner, h.owner, ErrOwner)
			}
			continue
		}
		c := m.child[i]
		switch {
		case c == nil:
			return m.errorf(h, "nil child: %w", ErrDiverged)
		case c.owner != h.owner:
			return m.errorf(h, "child of owner %q, head of owner %q: %w", c.owner, h.owner, ErrOwner)
		case c.pool != h.pool || c.lin != h.lin:
			return m.errorf(h, "the child is no branch of this head's lineage: %w", ErrDiverged)
		}
	}
	return nil
}

// run moves the heads, or none of them (see move).
func (m *move) run() error {
	// Each target is brought back from the host tier and stays locked:
	// bringing back the next one must not send it out again.
	for i, s := range m.to {
		s.mu.Lock()
		if s.tier != nil && !s.released && !s.invalid.Load() {
			if err := s.bringBackLocked(m.op()); err != nil {
				for _, s := range m.to[:i+1] {
					s.mu.Unlock()
				}
				return err
			}
		}
	}
	defer m.unlockTargets() // one defer: a defer in the loop would allocate
	var locks lineageLocks
	locks.lock(m.heads)
	if err := m.checkLocked(); err != nil {
		locks.unlock()
		return err
	}
	p := m.heads[0].pool
	freed := p.takeFreed()
	var waits snapWaits
	for i := range m.heads {
		m.moveOne(i, freed, &waits)
	}
	locks.unlock()
	waits.wait(m.to)
	waits.lower(freed)
	for _, h := range m.heads {
		h.moved()
	}
	p.freeList(freed)
	return nil
}

// unlockTargets unlocks the snapshots run locked.
func (m *move) unlockTargets() {
	for _, s := range m.to {
		s.mu.Unlock()
	}
}

// check is checkLocked with the lineages' locks taken for it: a merge of
// evicted heads asks it before they are rebuilt.
func (m *move) check() error {
	var locks lineageLocks
	locks.lock(m.heads)
	defer locks.unlock()
	return m.checkLocked()
}

// checkLocked checks that every head can move, changing nothing. The
// heads' calls are begun, the targets' snapshots locked and every
// lineage's lock held. In a group's rollback a target that any member
// has invalidated answers first.
func (m *move) checkLocked() error {
	if m.group && m.to != nil {
		for i, h := range m.heads {
			if m.to[i].invalid.Load() || h.invalid.Load() {
				return groupErrorf(m.op(), "member %s, nothing moved: %w", h.l.Type, ErrInvalidated)
			}
		}
	}
	for i, h := range m.heads {
		err := m.checkOne(i)
		if err != nil && m.group {
			return groupErrorf(m.op(), "member %s, nothing moved: %w", h.l.Type, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkOne checks that head i can move: back to its snapshot, or
// forward to its child.
func (m *move) checkOne(i int) error {
	h := m.heads[i]
	if m.to == nil {
		child := m.child[i]
		if h.invalid.Load() || child.invalid.Load() {
			return h.errorf("Merge", "%w", ErrInvalidated)
		}
		if !isAncestor(h.pos, child.pos) {
			return h.errorf("Merge", "head at version %d changed since the child at version %d left it: %w",
				h.pos.v, child.pos.v, ErrDiverged)
		}
		return nil
	}
	to := m.to[i]
	switch {
	case to.released:
		return h.errorf("Rollback", "snapshot: %w", ErrReleased)
	case to.invalid.Load():
		return h.errorf("Rollback", "snapshot: %w", ErrInvalidated)
	case to.evicted:
		return h.errorf("Rollback", "snapshot: %w", ErrEvicted)
	case to.lin != h.lin:
		return h.errorf("Rollback", "snapshot of another lineage: %w", ErrNotAncestor)
	case h.invalid.Load():
		return h.errorf("Rollback", "%w", ErrInvalidated)
	case !isAncestor(to.pos, h.pos):
		return h.errorf("Rollback", "version %d is not an ancestor of the head's version %d: %w", to.pos.v, h.pos.v, ErrNotAncestor)
	}
	return nil
}

// moveOne moves head i, which checkOne accepted, adding to waits the
// snapshots whose readers run waits out (snapWaits) and the blocks it
// gives up to freed: back to its snapshot (invalidating the line it
// leaves, with the Invalidate policy), or forward to its child, whose
// history it takes.
func (m *move) moveOne(i int, freed *[]*block, waits *snapWaits) {
	h := m.heads[i]
	r, pos := (*root)(nil), position{}
	lower := false
	if m.to != nil {
		r, pos = m.to[i].r, m.to[i].pos
		// The head must stand on its own segment: after a merge it stands
		// on the child's, whose rows in the tail block the child still
		// reads. A head that shares its prefix in a domain keeps its fill
		// (lowerTails); one of a shared layout made in no domain
		// registers nothing.
		lower = h.l.Growth == Append && h.hist == nil && (h.share == nil || h.share.tab == nil) && h.gshare == nil &&
			pos.seg == h.mine && h.pos.seg == h.mine
		// Held is asked before invalidate brings it down: a holder of a
		// version past pos may read the rows the head would write over.
		held := lower && h.mine.held > pos.v
		late := false
		if h.l.Descendants == Invalidate {
			var w snapWaits
			heads := h.lin.invalidate(h, pos, &w)
			// Every holder past pos that a rollback invalidates is invalid
			// now; one it does not (pinned) keeps the fill. No head's
			// reads are waited for (another head's lock is not taken
			// under a lineage's), so none may be among them. The
			// snapshots' reads that began before are waited out by run,
			// which lowers the tail after them (late).
			if held && heads == 0 && h.mine.pinned <= pos.v && waits.join(&w, h, h.r) {
				held, late = false, w.n > 0
			}
		}
		lower = lower && !held && !late
	} else {
		r, pos = m.child[i].r, capture(m.child[i].pos)
		h.async.merged(h, m.child[i])
	}
	h.writeFrom = h.sameRows(h.r, r)
	if lower {
		lowerTails(h, h.r, r)
	}
	h.r.release(freed)
	h.r = r.retain()
	h.pos = pos
	switch {
	case h.hist == nil:
	case m.to != nil:
		h.hist.rollback(pos, r, freed)
	case m.child[i].hist != nil:
		h.hist.releaseAll(freed)
		h.hist = m.child[i].hist.clone()
		h.parts.set(h)
	}
}

// lowerTails lets a head rolled back from old to r append on in each
// column's tail block, where it would otherwise copy it. When old holds
// r's tail block too and its rows there end at the block's fill, every
// byte below the fill is old's: the bytes past r's rows were written by
// the versions the rollback abandoned, and when no holder took one of
// those (the caller checked that the head stands on its own segment, not
// on a merged child's, and that no one took a version of it past r's),
// nothing reads them; or when every holder that took one is a snapshot
// the rollback invalidated, whose readers run waits out (snapWaits)
// before it lowers the fill, the lineages unlocked. The block's fill then
// comes back down to r's rows (Block.ReturnFill), and the next append
// claims them (tree.appendsInPlace). A block queued work may use, or that the prefix
// cache keeps, keeps its fill. A head that shares its prefix in a domain
// keeps every fill (the caller checks): another head may have adopted a
// full block of its before the cache let the block go, and its
// registrations of kernel-written rows hold versions, until its next call,
// without taking them. A head of a shared layout made in no domain
// registers nothing, so no other head reads its blocks. The lineage's lock
// is held, or, after the waits, the head's alone: no holder can take a
// version of it then, and another's claim on the bytes (a branch at r's
// rows) races ours as any two claims do (Block.ClaimFill).
func lowerTails(h *Head, old, r *root) {
	// Streams are recorded on blocks under rec.mu, by the head's calls
	// and by its snapshots' (ReadAsync, RecordStream): a fill is lowered
	// only where none is, and none can be while it is.
	rec := &h.pool.rec
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for c, per := range h.perBlock {
		bi, t, o := r.rows/per, &r.cols[c], &old.cols[c]
		if r.rows%per == 0 || bi < t.lo || bi >= t.n || bi < o.lo || bi >= o.n {
			continue
		}
		end := min(old.rows, (bi+1)*per)
		b, rb := t.get(bi), h.rowBytes[c]
		if o.get(bi) == b && b.Owner() == string(h.owner) && b.Uses() == nil && !b.Hooked() {
			b.ReturnFill((end-bi*per)*rb, (r.rows-bi*per)*rb)
		}
	}
}

// lineageLocks are the lineages of a group's heads, each once, locked in
// id order and unlocked in reverse: a caller declares one, lock, then
// unlock. The lineages of a group of up to four members need no
// allocation (a closure over a list did, twice a rollback or merge).
type lineageLocks struct {
	n     int
	small [4]*lineage
	more  []*lineage // all of them, once there are more than small holds
}

func (ll *lineageLocks) list() []*lineage {
	if ll.more != nil {
		return ll.more
	}
	return ll.small[:ll.n]
}

func (ll *lineageLocks) add(l *lineage) {
	switch {
	case slices.Contains(ll.list(), l):
	case ll.more == nil && ll.n < len(ll.small):
		ll.small[ll.n] = l
		ll.n++
	case ll.more == nil:
		ll.more = append(slices.Clone(ll.small[:ll.n]), l)
	default:
		ll.more = append(ll.more, l)
	}
}

// lock locks the lineages of heads, each once, in id order.
func (ll *lineageLocks) lock(heads []*Head) {
	for _, h := range heads {
		ll.add(h.lin)
	}
	list := ll.list()
	slices.SortFunc(list, func(a, b *lineage) int { return cmpID(a.id, b.id) })
	for _, l := range list {
		l.mu.Lock()
	}
}

// unlock unlocks what lock locked.
func (ll *lineageLocks) unlock() {
	for _, l := range slices.Backward(ll.list()) {
		l.mu.Unlock()
	}
}

func cmpID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
