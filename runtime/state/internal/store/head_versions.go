package store

import (
	"fmt"
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
	h.parts.set(h)
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
	h.parts.branched(h, c)
	c.parts.set(c)
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
	if h == nil {
		return errNil("Head", "Merge")
	}
	if err := h.live("Merge"); err != nil {
		return err
	}
	m := move{heads: []*Head{h}, child: []*Head{child}}
	if err := m.args(); err != nil {
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
		if err := m.check(); err != nil {
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
	return m.run()
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
	m := move{heads: []*Head{h}, to: []*Snap{to}}
	if err := m.args(); err != nil {
		return err
	}
	if err := h.begin("Rollback"); err != nil {
		return err
	}
	defer h.end()
	return m.run()
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
	*freed = h.parts.release(h, *freed)
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

// StepHost is Step for a step function written for the host: f gets every
// row of the head, per column, as bytes (rows, Len() rows a column) and
// the input, and returns the next rows, per column, of the same lengths:
// rows itself, written in place, or slices of its own, which the runtime
// copies into rows (a column of another length fails the step with
// ErrShape). The runtime copies the rows out of device memory before f
// runs and back after it returns, except where the backend's device
// memory is host memory and a column's rows lie in one run of it
// (device.HostBytes): there f reads and writes the rows where they live,
// with no copy. f must not keep rows or in; the rest is as Step: the
// history keeps in and f, At and Rollback run f again, and a failed f
// leaves the head as before.
//
//state:mutates
func (h *Head) StepHost(in [][]byte, verify bool, f func(rows, in [][]byte) ([][]byte, error)) error {
	if h == nil {
		return errNil("Head", "StepHost")
	}
	var step Stepper
	if f != nil {
		step = hostStep(h.pool.b, h.rowBytes, f)
	}
	return h.StepWith(in, verify, step)
}

// Step makes a new version of a mutable state by running f on the head's
// rows in place: blocks a snapshot, a branch or a checkpoint still holds
// are copied first, and no others. The version's delta is in and f, not
// the rows f wrote; At and Rollback rebuild it by running f on in again.
// With verify, Step records a hash of the rows f produced, and a
// reconstruction whose rows hash otherwise answers ErrReplayDiverged.
//
// When f fails, or panics, Step returns an error wrapping f's (or
// panics on with f's value) and the head is as before, even if f wrote
// rows: the version before is rebuilt from its last checkpoint by
// replay, into the blocks f wrote (failures pay, steps do not). Where the
// history cannot rebuild that version, Step runs f on copies instead.
// Generated code hands f over as a Stepper: a func type with a Step
// method converts to one with no allocation, where a closure over the
// user's typed function would allocate at every step.
//
//state:mutates
func (h *Head) StepWith(in [][]byte, verify bool, f Stepper) error {
	if err := h.begin("Step"); err != nil {
		return err
	}
	defer h.end()
	switch {
	case h.l.Growth != Mutable:
		return h.errorf("Step", "a step rewrites the rows of a mutable state, and this one only appends: %w", ErrRange)
	case h.hist == nil:
		return h.errorf("Step", "%s keeps no checkpoints to replay from: %w", h.l.Type, ErrNotRetained)
	case f == nil:
		return h.errorf("Step", "nil step function: %w", ErrShape)
	}
	return h.hist.step(h, in, verify, f)
}

// VersionAt returns the last version of the head's own line that held
// exactly n rows, from the history its checkpoint line keeps, so that a
// caller who knows how many rows it had (tokens accepted, steps taken)
// need not keep a table of versions: At(VersionAt(n)) rebuilds it, and
// Rollback takes that snapshot. n outside [0, Len()] answers ErrRange; a
// row count no retained version had (before the oldest checkpoint kept,
// or inside one append's batch) answers ErrNotRetained, as does a layout
// without checkpoints.
func (h *Head) VersionAt(n int) (Version, error) {
	if err := h.begin("VersionAt"); err != nil {
		return 0, err
	}
	defer h.end()
	if n < 0 || n > h.r.rows {
		return 0, h.errorf("VersionAt", "%d rows, the head has %d: %w", n, h.r.rows, ErrRange)
	}
	if h.hist == nil {
		return 0, h.errorf("VersionAt", "%s keeps no checkpoints: %w", h.l.Type, ErrNotRetained)
	}
	es := h.hist.entries
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].rows == n {
			return es[i].pos.v, nil
		}
	}
	return 0, h.errorf("VersionAt", "no version of the retained history held %d rows: %w", n, ErrNotRetained)
}
