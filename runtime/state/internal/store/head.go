package store

import (
	"fmt"
)

func (h *Head) describe() string {
	return fmt.Sprintf("%s head of owner %q at version %d", h.l.Type, h.owner, h.pos.v)
}

func (h *Head) logicalBytes() int64 { return h.logical }

// begin starts a call: it holds the pool open and h's lock, and fails
// when h is released or invalidated. A nil error must be followed by end.
func (h *Head) begin(op string) error { return h.open(call{op: op, land: true, share: true}) }

// open starts a call: it holds the pool open and h's lock, and prepares
// h (prepareLocked).
func (h *Head) open(c call) error {
	if h == nil {
		return errNil("Head", c.op)
	}
	if err := h.pool.enterAt(h.gate); err != nil {
		return h.errorf(c.op, "%w", err)
	}
	h.mu.Lock()
	if h.evicted {
		return prepareEvicted(h, c)
	}
	if err := h.prepareLocked(c); err != nil {
		h.end()
		return err
	}
	return nil
}

// prepareEvicted is open's preparation of an evicted head, whose rebuild
// may replay step functions: one that ends the goroutine (runtime.Goexit)
// must still end the call. Apart from open's common path, which runs no
// caller's code and pays for no defer.
func prepareEvicted(h *Head, c call) error {
	prepared := false
	defer func() {
		if !prepared {
			h.end()
		}
	}()
	if err := h.prepareLocked(c); err != nil {
		return err
	}
	prepared = true
	return nil
}

// prepareLocked is the one preparation of a call once h.mu is held: open
// runs it, Merge runs it on both heads, a group on each member (group.go),
// so that no call starts otherwise. It fails when h is released or
// invalidated, then runs the parts' prepare hooks in order: eviction
// rebuilds an evicted reconstructable head and stamps the use clock, the
// async part waits for the copies of earlier AppendAsync calls (c.land),
// history takes the delta a kernel's write left pending, and sharing
// registers the blocks that rows a kernel wrote filled (c.share).
func (h *Head) prepareLocked(c call) error {
	if err := h.usableLocked(c.op); err != nil {
		return err
	}
	h.deviceRows = false // the caller's kernels are queued by now
	return h.parts.prepare(h, c)
}

// usableLocked fails when h is released or invalidated. h.mu is held.
func (h *Head) usableLocked(op string) error {
	if h.released {
		return h.errorf(op, "%w", ErrReleased)
	}
	if h.invalid.Load() {
		return h.errorf(op, "%w", ErrInvalidated)
	}
	return nil
}

// usable is usableLocked for a call that has not opened h: it answers, as
// open would, for the checks a call makes before its opening, ErrEvicted
// for a head the pool dropped included (open's rebuild answers it; a head
// in the host tier or one that rebuilds is usable).
func (h *Head) usable(op string) error {
	if err := h.pool.enterAt(h.gate); err != nil {
		return h.errorf(op, "%w", err)
	}
	defer h.pool.leaveAt(h.gate)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.usableLocked(op); err != nil {
		return err
	}
	if h.evictedForGood() {
		return h.errorf(op, "%w", ErrEvicted)
	}
	return nil
}

// end ends a call begun by begin.
func (h *Head) end() {
	h.mu.Unlock()
	h.pool.leaveAt(h.gate)
}

// commitVersion moves h to a new version of its lineage, starting a new
// segment when h may not write on its position's (writable: a branch's
// first write, after a merge, after a rollback past a version another
// holder took).
func (h *Head) commitVersion() {
	h.lin.mu.Lock()
	if !writable(h.pos, h.mine) {
		h.pos.seg = h.lin.newSegment(h.pos.seg, h.pos.v)
		h.mine = h.pos.seg
	}
	h.pos.v = h.lin.next()
	h.lin.mu.Unlock()
	h.setLogical()
}

// setLogical brings the pool's LogicalBytes up to date with h's rows, and
// tells the parts that h's root changed: from row h.writeFrom on, when a
// write set it (writing), else anywhere.
func (h *Head) setLogical() {
	l := h.logicalOf(h.r)
	h.pool.addLogical(h.gate, l-h.logical)
	h.logical = l
	h.parts.changed(h)
	h.writeFrom = 0
}

// committed tells the parts that a write made h's new version: rows
// [w.from, w.to). h.mu is held.
func (h *Head) committed(w written) {
	h.deviceRows = w.kernel()
	if w.kernel() {
		h.async.join(h) // it keeps the rows kernels may still write
	}
	h.parts.committed(h, w)
}

// moved finishes a change of h's version other than by a write (a
// rollback, a merge, a rebuild): the pool's accounting and the parts'
// changed and moved hooks. h.mu is held.
func (h *Head) moved() {
	h.setLogical()
	h.parts.moved(h)
}

// awayLogical keeps the logical bytes of a head whose root went (evicted,
// lost to a failed step's restore, its image dropped from the host tier)
// as long as its rows can come back, from its history or the tier: Len
// and Stats answer them, and its rebuild finds them counted
// (setLogical). A head evicted for good reads as no rows, and drops
// them from the pool's count. h.mu is held.
func awayLogical(h *Head) {
	if h.evictedForGood() {
		h.pool.addLogical(h.gate, -h.logical)
		h.logical = 0
	}
}

// Len returns the number of rows (0 once released, or evicted unless
// reconstructable or in the host tier): for a window state,
// every row ever appended, of which rows [Oldest(), Len()) are readable.
func (h *Head) Len() int {
	if h == nil || h.pool.isClosed() {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rowsLocked()
}

// rowsLocked returns h's rows from what it keeps even while its blocks
// are away: its root, its image in the host tier, or the history entry
// of its version when it was evicted; 0 when released. h.mu is held.
func (h *Head) rowsLocked() int {
	switch {
	case h.r != nil:
		return h.r.rows
	case h.tier != nil:
		return h.tier.rows
	case h.evicted && h.hist != nil:
		if t := h.hist.find(h.pos.v); t >= 0 {
			return h.hist.entries[t].rows
		}
	}
	return 0
}

// Bound returns the layout's bound (<= 0: unbounded).
func (h *Head) Bound() int {
	if h == nil {
		return 0
	}
	return h.l.Bound
}

// Version returns the head's version.
func (h *Head) Version() Version {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pos.v
}

// uncoupled answers ErrCoupled when h is a member of a group: op moves or
// releases h, which is the group's to do.
func (h *Head) uncoupled(op string) error {
	if h != nil && h.group.Load() != nil {
		return h.errorf(op, "the head is a member of a group, which moves and releases its members together; call %s on the group: %w", op, ErrCoupled)
	}
	return nil
}

// live answers ErrReleased for a released head. Merge and Rollback check
// it before their arguments, so that a released head answers ErrReleased
// whatever it is passed; begin checks it again under the lock it holds.
func (h *Head) live(op string) error {
	h.mu.Lock()
	released := h.released
	h.mu.Unlock()
	if released {
		return h.errorf(op, "%w", ErrReleased)
	}
	return nil
}

// Oldest returns the first readable row: Len()-Window for a window state
// that has passed its window, else 0.
func (h *Head) Oldest() int {
	if h == nil || h.pool.isClosed() {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.floor(h.rowsLocked())
}

// Window returns the layout's window (0: none).
func (h *Head) Window() int {
	if h == nil {
		return 0
	}
	return h.l.Window
}

// evictedForGood reports whether h was evicted and no call rebuilds it or
// brings it back: it is not in the host tier, and its retention is
// optional and no failed step lost it, or it keeps no history. h.mu is
// held.
func (h *Head) evictedForGood() bool {
	return h.evicted && h.tier == nil && ((h.l.Retention != Reconstructable && !h.lost) || h.hist == nil)
}

// NewHead returns a new head of layout l for owner, at version 0: an
// append state with no rows, or a mutable state of l.Bound rows that read
// as zeros. l is copied; later changes to it change nothing. An empty
// owner is an error that wraps ErrOwner.
//
//state:acquire
func (p *Pool) NewHead(l *Layout, owner Owner) (*Head, error) {
	h := new(Head)
	if err := p.NewHeadInto(h, l, owner); err != nil {
		return nil, err
	}
	return h, nil
}

// NewHeadInto is NewHead making the head in h, memory the caller holds (a
// generated handle holds its store head, so that a new state and its
// handle are one allocation): a zero Head that no call used before. On
// error h stays unused.
func (p *Pool) NewHeadInto(h *Head, l *Layout, owner Owner) error {
	if p == nil {
		return errNilPool
	}
	sh, ok := cachedShape(p, l)
	if !ok {
		limit := p.blockBytes
		if l != nil && (l.BlockRows > 0 || p.rowSized) {
			limit = maxBlockBytes // blocks follow the rows
		}
		if err := l.check(limit); err != nil {
			return err
		}
	}
	if owner == "" {
		return fmt.Errorf("state: NewHead of %s: the owner is empty; every state needs one, for isolation: %w", l.Type, ErrOwner)
	}
	if err := p.enter(); err != nil {
		return fmt.Errorf("state: NewHead of %s: %w", l.Type, err)
	}
	defer p.leave()
	if !ok {
		sh = cacheShape(p, l)
	}
	l = sh.l
	sh.owner = owner
	h.gate = nextShard()
	h.shape, h.id, h.lin = sh, newHeadID(h.gate), newLineage(owner)
	p.spares.take(h.gate, &h.writeBufs)
	h.pos = position{seg: &h.lin.root}
	h.mine = h.pos.seg
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
		blks, err := h.allocCols(nil, counts, handZeroed)
		if err != nil {
			p.spares[h.gate].put(&h.writeBufs)
			return h.errorf("NewHead", "%d rows: %w", l.Bound, err)
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
		h.hist = newHistory(l.Checkpoint, h.pos, r, &p.gate.shards[h.gate].history, &p.steps[h.gate])
	}
	h.parts.set(h)
	h.lin.heads.add(h)
	p.register(h, h.gate, &h.inPool)
	return nil
}

// snapshotLocked makes h's snapshot in s, a zero Snap. h's call is begun.
func (h *Head) snapshotLocked(s *Snap) error {
	h.lin.mu.Lock()
	defer h.lin.mu.Unlock()
	if h.invalid.Load() {
		return h.errorf("Snapshot", "%w", ErrInvalidated)
	}
	s.shape, s.gate, s.lin, s.r, s.pos = h.shape, h.gate, h.lin, h.r.retain(), capture(h.pos)
	s.logical = h.logicalOf(s.r)
	h.lin.snaps.add(s)
	h.pool.register(s, s.gate, &s.inPool)
	return nil
}

// branchLocked makes h's branch in c, a zero Head, with h's call begun.
func (h *Head) branchLocked(c *Head) error {
	h.lin.mu.Lock()
	defer h.lin.mu.Unlock()
	if h.invalid.Load() {
		return h.errorf("Branch", "%w", ErrInvalidated)
	}
	c.gate = h.gate // its parent's goroutine's, most likely
	c.shape, c.id, c.lin, c.r, c.pos = h.shape, newHeadID(c.gate), h.lin, h.r.retain(), capture(h.pos)
	h.pool.spares.take(c.gate, &c.writeBufs)
	c.logical = h.logicalOf(c.r)
	h.parts.branched(h, c)
	c.parts.set(c)
	h.lin.heads.add(c)
	h.pool.register(c, c.gate, &c.inPool)
	return nil
}

// release is Release without the coupling check: a group releases its
// members with it.
//
//state:release
func (h *Head) release() error {
	h.pool.gate.rlock(h.gate)
	defer h.pool.leaveAt(h.gate)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return nil
	}
	h.released = true
	if h.pool.closed.Load() {
		return nil
	}
	h.lin.mu.Lock()
	h.lin.heads.remove(h)
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
	h.pool.unregister(h.gate, &h.inPool, h.logical)
	h.logical = 0
	h.pool.spares[h.gate].put(&h.writeBufs)
	return nil
}
