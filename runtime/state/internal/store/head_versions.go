package store

import "fmt"

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
	if h.r == nil {
		// Away (in the host tier, or evicted with a history that rebuilds
		// it): its rows as Len answers them, nothing brought back.
		st.Rows, st.LogicalBytes = h.rowsLocked(), h.logical
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
	if err := h.pool.enterAt(h.gate); err != nil {
		return h.errorf("Merge", "%w", err)
	}
	defer h.pool.leaveAt(h.gate)
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

// StepHostWith is Step for a step function written for the host: f gets
// every row of the head, per column, as bytes (rows, Len() rows a column)
// and the input, and rewrites rows in place, or sets a column's slice to
// one of its own of the same length, which the runtime copies into the
// rows (a column of another length fails the step with ErrShape). The
// runtime copies the rows out of device memory before f runs and back
// after it returns, except where the backend's device memory is host
// memory and a column's rows lie in one run of it (device.HostBytes):
// there f reads and writes the rows where they live, with no copy. f must
// not keep rows or in; the rest is as Step: the history keeps in and f,
// At and Rollback run f again, and a failed f leaves the head as before.
// Generated code hands f over as its _T_stepHost func type, which
// converts to a HostStepper with no allocation: on the host backend a
// step then allocates nothing.
//
//state:mutates
func (h *Head) StepHostWith(in [][]byte, verify bool, f HostStepper) error {
	return h.step(in, verify, stepFunc{host: f})
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
	return h.step(in, verify, stepFunc{dev: f})
}

// step is StepWith and StepHostWith.
func (h *Head) step(in [][]byte, verify bool, f stepFunc) error {
	if err := h.begin("Step"); err != nil {
		return err
	}
	defer h.end()
	switch {
	case h.l.Growth != Mutable:
		return h.errorf("Step", "a step rewrites the rows of a mutable state, and this one only appends: %w", ErrRange)
	case h.hist == nil:
		return h.errorf("Step", "%s keeps no checkpoints to replay from: %w", h.l.Type, ErrNotRetained)
	case f.dev == nil && f.host == nil:
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
	if err := h.begin("AdoptPrefix"); err != nil {
		return 0, err
	}
	defer h.end()
	if h.share == nil {
		return 0, h.errorf("AdoptPrefix", "the layout has no ShareKey: %w", ErrShape)
	}
	return h.share.adopt(h, keys)
}

// NewSharedHead is NewHead for a layout with a ShareKey, in a sharing
// domain: every full block the head appends is registered under a hash of
// the key column's values in it and in every block before it, so that a
// later head made from the same Layout in the same domain can adopt it
// (AdoptPrefix) instead of computing and storing its rows again. A head of
// the empty domain shares with nobody. A layout without a ShareKey is an
// error that wraps ErrShape.
//
// Blocks are registered when they fill: at once for rows appended from
// the host, and for rows a kernel writes (AppendDevice, AppendAsync) at
// the next call on the head, when the spans are no longer the caller's.
//
//state:acquire
func (p *Pool) NewSharedHead(l *Layout, owner Owner, domain Domain) (*Head, error) {
	h := new(Head)
	if err := p.NewSharedHeadInto(h, l, owner, domain); err != nil {
		return nil, err
	}
	return h, nil
}

// NewSharedHeadInto is NewSharedHead making the head in h, a zero Head that
// no call used before (NewHeadInto).
func (p *Pool) NewSharedHeadInto(h *Head, l *Layout, owner Owner, domain Domain) error {
	if l != nil && l.ShareKey == "" {
		return fmt.Errorf("state: NewSharedHead of %s: the layout has no ShareKey: %w", l.Type, ErrShape)
	}
	if err := p.NewHeadInto(h, l, owner); err != nil {
		return err
	}
	if domain != "" {
		h.share.tab = p.cache.join(h.shareKey(l, domain), l.Type, &p.clock)
	}
	return nil
}

// Plan explains how At(v) would reconstruct version v of the head's own
// line: the checkpoint it would seed from, the deltas it would apply, the
// estimated cost, and the alternatives. It reconstructs nothing.
func (h *Head) Plan(v Version) (Plan, error) {
	if err := h.begin("Plan"); err != nil {
		return Plan{}, err
	}
	defer h.end()
	p, _, err := newEstimator(h).plan("Plan", v)
	return p.Plan, err
}

// At reconstructs version v of the head's own line as a snapshot, by the
// plan Plan(v) returns, and records the cost it measured for the cost
// model. A version before the oldest retained checkpoint, or not on the
// head's line, answers ErrNotRetained. The snapshot is like any
// other: Rollback accepts it.
//
//state:acquire
func (h *Head) At(v Version) (*Snap, error) {
	if err := h.begin("At"); err != nil {
		return nil, err
	}
	defer h.end()
	return newEstimator(h).at(v, nil)
}
