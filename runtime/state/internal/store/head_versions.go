package store

import (
	"fmt"
	"math"
)

// NewHead returns a new head of layout l for owner, at version 0: an
// append state with no rows, or a mutable state of l.Bound rows that read
// as zeros. l is copied; later changes to it change nothing. An empty
// owner is an error that wraps ErrOwner.
//
//state:acquire
func (p *Pool) NewHead(l *Layout, owner Owner) (*Head, error) {
	if p == nil {
		return nil, errNilPool
	}
	limit := p.blockBytes
	if l != nil && (l.BlockRows > 0 || p.rowSized) {
		limit = maxBlockBytes // blocks follow the rows
	}
	if err := l.check(limit); err != nil {
		return nil, err
	}
	if owner == "" {
		return nil, fmt.Errorf("state: NewHead of %s: the owner is empty; every state needs one, for isolation: %w", l.Type, ErrOwner)
	}
	if err := p.enter(); err != nil {
		return nil, fmt.Errorf("state: NewHead of %s: %w", l.Type, err)
	}
	defer p.leave()
	l = l.clone()
	h := &Head{shape: newShape(p, l, owner), id: headIDs.Add(1), lin: newLineage(owner), owned: true}
	p.spares.take(&h.writeBufs)
	h.pos = position{seg: &segment{}}
	if k := l.shareColumn(); k >= 0 {
		h.shareMem = sharing{key: k, ks: l.Columns[k].ElemSize}
		h.share = &h.shareMem
	}
	r := newRoot(len(l.Columns))
	if l.Growth == Mutable {
		counts := make([]int, len(h.perBlock))
		for i, per := range h.perBlock {
			counts[i] = (l.Bound + per - 1) / per
		}
		blks, err := h.allocCols(nil, counts, true)
		if err != nil {
			return nil, h.errorf("NewHead", "%d rows: %w", l.Bound, err)
		}
		var freed []*block
		for i, per := range h.perBlock {
			for bi := 0; bi < (l.Bound+per-1)/per; bi++ {
				r.cols[i].set(bi, blks[0], &freed)
				blks = blks[1:]
			}
		}
		r.rows = l.Bound
	}
	h.r = r
	h.logical = h.logicalOf(r)
	if l.Checkpoint != nil {
		h.hist = newHistory(l.Checkpoint, h.pos, r, &p.history)
	}
	h.setParts()
	h.lin.heads[h] = struct{}{}
	p.register(h)
	return h, nil
}

// Stats returns the head's version, rows, logical and physical bytes
// (none once released, or once its pool is closed).
func (h *Head) Stats() Stats {
	if h == nil {
		return Stats{}
	}
	closed := h.pool.isClosed()
	h.mu.Lock()
	defer h.mu.Unlock()
	if closed {
		return Stats{Version: h.pos.v}
	}
	st := h.stats(h.r, h.pos.v)
	if h.tier != nil {
		st.Rows, st.LogicalBytes = h.tier.rows, h.logical // from the image: nothing comes back
	}
	if h.hist != nil {
		st.Checkpoints = len(h.hist.roots())
		for _, b := range h.hist.deltaBlocks() {
			st.HistoryBytes += int64(b.Bytes())
		}
		st.HistoryBytes += h.hist.inputBytes() // recorded step inputs (replay.go)
	}
	return st
}

// SnapshotInto makes in s an immutable snapshot of the head's version, in
// O(1): it shares the version's blocks, and later writes to the head copy
// the blocks they write. s is memory the caller holds (a generated
// snapshot handle holds its store snapshot, so that the two are one
// allocation): a zero Snap that no call used before.
func (h *Head) SnapshotInto(s *Snap) error {
	if err := h.begin("Snapshot"); err != nil {
		return err
	}
	defer h.end()
	return h.snapshotLocked(s)
}

// snapshotLocked makes h's snapshot in s, a zero Snap. h's call is begun.
func (h *Head) snapshotLocked(s *Snap) error {
	h.lin.mu.Lock()
	defer h.lin.mu.Unlock()
	if h.invalid.Load() {
		return h.errorf("Snapshot", "%w", ErrInvalidated)
	}
	s.shape, s.lin, s.r, s.pos = h.shape, h.lin, h.r.retain(), h.pos
	s.logical = h.logicalOf(s.r)
	h.lin.snaps[s] = struct{}{}
	h.pool.register(s)
	return nil
}

// BranchInto makes in c a new head at the head's version and content,
// sharing its blocks; writes to one are invisible to the other. c is
// memory the caller holds (a generated handle holds its store head, so
// that a branch and its handle are one allocation): a zero Head that no
// call used before.
func (h *Head) BranchInto(c *Head) error {
	if err := h.begin("Branch"); err != nil {
		return err
	}
	defer h.end()
	return h.branchLocked(c)
}

// branchLocked makes h's branch in c, a zero Head, with h's call begun.
func (h *Head) branchLocked(c *Head) error {
	h.lin.mu.Lock()
	defer h.lin.mu.Unlock()
	if h.invalid.Load() {
		return h.errorf("Branch", "%w", ErrInvalidated)
	}
	c.shape, c.id, c.lin, c.r, c.pos = h.shape, headIDs.Add(1), h.lin, h.r.retain(), h.pos
	h.pool.spares.take(&c.writeBufs)
	c.logical = h.logicalOf(c.r)
	for s := h.parts; s != 0; s &= s - 1 {
		h.part(s&-s).branched(h, c)
	}
	c.setParts()
	h.lin.heads[c] = struct{}{}
	h.pool.register(c)
	return nil
}

// Merge fastforwards h to child, a branch of h's lineage: h takes the
// child's content and version. It needs h unchanged since the child's line
// left it (h's version an ancestor of the child's), else ErrDiverged and
// nothing changes. The child stays live and unchanged.
//
//state:mutates
func (h *Head) Merge(child *Head) error {
	if err := h.uncoupled("Merge"); err != nil {
		return err
	}
	if h != nil {
		if err := h.live("Merge"); err != nil {
			return err
		}
	}
	if err := h.checkChild(child); err != nil {
		return err
	}
	if child == h {
		if err := h.begin("Merge"); err != nil {
			return err
		}
		h.end()
		return nil
	}
	if err := h.pool.enter(); err != nil {
		return h.errorf("Merge", "%w", err)
	}
	defer h.pool.leave()
	first, second := h, child
	if child.id < h.id {
		first, second = child, h
	}
	first.mu.Lock()
	defer first.mu.Unlock()
	second.mu.Lock()
	defer second.mu.Unlock()
	for _, x := range []*Head{h, child} {
		if x.released {
			return h.errorf("Merge", "%w", ErrReleased)
		}
	}
	if h.invalid.Load() || child.invalid.Load() {
		return h.errorf("Merge", "%w", ErrInvalidated)
	}
	// A merge of heads whose versions diverged answers so before an
	// evicted one is rebuilt, which would take memory, and evict others'
	// state, for a call that fails anyway. (A head evicted for good
	// answers ErrEvicted from its preparation, as before.)
	if (h.evicted || child.evicted) && !h.evictedForGood() && !child.evictedForGood() {
		h.lin.mu.Lock()
		err := h.mergeCheck(child)
		h.lin.mu.Unlock()
		if err != nil {
			return err
		}
	}
	// Both heads are prepared as every call prepares them (open): an
	// evicted one is rebuilt, copies in flight land, pending deltas are
	// taken, kernel-filled blocks are registered, the use clock ticks.
	for _, x := range []*Head{h, child} {
		if err := x.prepareLocked(call{op: "Merge", land: true, share: true}); err != nil {
			return err
		}
	}
	h.lin.mu.Lock()
	if err := h.mergeCheck(child); err != nil {
		h.lin.mu.Unlock()
		return err
	}
	freed := h.pool.takeFreed()
	h.mergeMove(child, freed)
	h.lin.mu.Unlock()
	h.finishMove(freed)
	return nil
}

// checkChild checks Merge's arguments, before any lock is taken.
func (h *Head) checkChild(child *Head) error {
	switch {
	case h == nil:
		return errNil("Head", "Merge")
	case child == nil:
		return h.errorf("Merge", "nil child: %w", ErrDiverged)
	case child.owner != h.owner:
		return h.errorf("Merge", "child of owner %q, head of owner %q: %w", child.owner, h.owner, ErrOwner)
	case child.pool != h.pool || child.lin != h.lin:
		return h.errorf("Merge", "the child is no branch of this head's lineage: %w", ErrDiverged)
	}
	return nil
}

// Rollback moves h back to the version of to, which must be of h's owner
// (else ErrOwner) and an ancestor of h's version (else ErrNotAncestor).
// Afterwards h reads as to and has its version. With the Invalidate policy,
// every snapshot and branch taken from the line h leaves answers
// ErrInvalidated from then on; with Keep they stay usable.
//
//state:mutates
func (h *Head) Rollback(to *Snap) error {
	if h == nil {
		return errNil("Head", "Rollback")
	}
	if err := h.uncoupled("Rollback"); err != nil {
		return err
	}
	if err := h.live("Rollback"); err != nil {
		return err
	}
	if err := h.rollbackArg(to); err != nil {
		return err
	}
	if err := h.begin("Rollback"); err != nil {
		return err
	}
	defer h.end()
	if err := to.back("Rollback"); err != nil {
		return err
	}
	to.mu.RLock()
	defer to.mu.RUnlock()
	h.lin.mu.Lock()
	if err := h.rollbackCheck(to); err != nil {
		h.lin.mu.Unlock()
		return err
	}
	freed := h.pool.takeFreed()
	h.rollbackMove(to, freed)
	h.lin.mu.Unlock()
	h.finishMove(freed)
	return nil
}

// rollbackArg checks what Rollback can check of to without a lock.
func (h *Head) rollbackArg(to *Snap) error {
	if to == nil {
		return h.errorf("Rollback", "nil snapshot: %w", ErrNotAncestor)
	}
	if to.owner != h.owner {
		return h.errorf("Rollback", "snapshot of owner %q, head of owner %q: %w", to.owner, h.owner, ErrOwner)
	}
	return nil
}

// rollbackCheck checks that h can move back to to, changing nothing: h's
// call is begun, to.mu read-held and h.lin.mu held.
func (h *Head) rollbackCheck(to *Snap) error {
	if to.released {
		return h.errorf("Rollback", "snapshot: %w", ErrReleased)
	}
	if to.invalid.Load() {
		return h.errorf("Rollback", "snapshot: %w", ErrInvalidated)
	}
	if to.evicted {
		return h.errorf("Rollback", "snapshot: %w", ErrEvicted)
	}
	if to.lin != h.lin {
		return h.errorf("Rollback", "snapshot of another lineage: %w", ErrNotAncestor)
	}
	if h.invalid.Load() {
		return h.errorf("Rollback", "%w", ErrInvalidated)
	}
	if !isAncestor(to.pos, h.pos) {
		return h.errorf("Rollback", "version %d is not an ancestor of the head's version %d: %w", to.pos.v, h.pos.v, ErrNotAncestor)
	}
	return nil
}

// rollbackMove moves h back to to, which rollbackCheck accepted, under the
// same locks, adding the blocks h gives up to freed; moved finishes.
func (h *Head) rollbackMove(to *Snap, freed *[]*block) {
	if h.l.Descendants == Invalidate {
		h.lin.invalidate(h, to.pos)
	}
	h.writeFrom = h.sameRows(to.r)
	h.r.release(freed)
	h.r = to.r.retain()
	h.pos, h.owned = to.pos, false
	if h.hist != nil {
		h.hist.rollback(to.pos, to.r, freed)
	}
}

// sameRows returns the rows before which h's root and r hold the same
// blocks in every column: the parts (block tables, streams recorded) keep
// their work for those when h moves to r (Head.writing). h.mu is held.
func (h *Head) sameRows(r *root) int {
	if h.r == nil || r == nil {
		return 0
	}
	rows := math.MaxInt
	for c, per := range h.perBlock {
		rows = min(rows, firstDiff(&h.r.cols[c], &r.cols[c])*per)
	}
	return rows
}

// mergeCheck checks that h can fast-forward to child, changing nothing:
// both calls are begun and h.lin.mu is held.
func (h *Head) mergeCheck(child *Head) error {
	if h.invalid.Load() || child.invalid.Load() {
		return h.errorf("Merge", "%w", ErrInvalidated)
	}
	if !isAncestor(h.pos, child.pos) {
		return h.errorf("Merge", "head at version %d changed since the child at version %d left it: %w",
			h.pos.v, child.pos.v, ErrDiverged)
	}
	return nil
}

// mergeMove fast-forwards h to child, which mergeCheck accepted, under the
// same locks, adding the blocks h gives up to freed; moved finishes.
func (h *Head) mergeMove(child *Head, freed *[]*block) {
	h.writeFrom = h.sameRows(child.r)
	h.r.release(freed)
	h.r = child.r.retain()
	h.pos, h.owned = child.pos, false
	if h.hist != nil && child.hist != nil {
		h.hist.releaseAll(freed)
		h.hist = child.hist.clone()
		h.setParts()
	}
}

// finishMove finishes a rollback or merge once h.lin.mu is released: the
// parts' moved hooks, then the blocks the move freed, gathered in a list
// of takeFreed's.
func (h *Head) finishMove(freed *[]*block) {
	h.moved()
	h.pool.freeList(freed)
}

// Release gives up h and the blocks only it holds. Releasing twice does
// nothing; every other call on a released head returns ErrReleased.
//
//state:release
func (h *Head) Release() error {
	if h == nil {
		return errNil("Head", "Release")
	}
	if err := h.uncoupled("Release"); err != nil {
		return err
	}
	return h.release()
}

// release is Release without the coupling check: a group releases its
// members with it.
//
//state:release
func (h *Head) release() error {
	h.pool.closeMu.RLock()
	defer h.pool.closeMu.RUnlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return nil
	}
	h.released = true
	if h.pool.closed {
		return nil
	}
	h.lin.mu.Lock()
	delete(h.lin.heads, h)
	h.lin.mu.Unlock()
	// freed grows as blocks are freed, in a list the pool reuses: sized
	// by the root's blocks, it cost a branch of a large state, which
	// frees a few, an allocation of the whole state's list on every
	// release.
	freed := h.pool.takeFreed()
	*freed = h.releaseParts(*freed)
	if h.r != nil {
		h.r.release(freed)
	}
	h.r = nil
	h.pool.tier.release(h.tier)
	h.tier = nil
	h.pool.freeList(freed)
	h.pool.unregister(h, h.logical)
	h.logical = 0
	h.pool.spares.put(&h.writeBufs)
	return nil
}
