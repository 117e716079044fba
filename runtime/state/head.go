package state

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
)

// Head is a mutable state: the head of a line of versions of one layout and
// one owner. Its methods are safe for concurrent use; one head serializes
// its writers.
type Head struct {
	shape
	id      uint64 // orders the locks of two heads
	lin     *lineage
	invalid atomic.Bool // set by a rollback that abandoned this head's line

	mu       sync.Mutex
	r        *root
	pos      position // written with lin.mu held too
	owned    bool     // pos is the tip of a segment only this head writes
	released bool
	evicted  bool                  // its blocks were taken under memory pressure
	lastUse  atomic.Uint64         // the pool's use clock at its last call
	logical  int64                 // this head's share of the pool's LogicalBytes
	hist     *history              // checkpoints and deltas, with a checkpoint policy
	scratch  []*block              // reused by writes for the blocks they take
	countBuf []int                 // reused by writes for their blocks per column
	ops      []blockOp             // reused by small writes for their plans (write.go)
	copies   []device.HostCopy     // reused by writes for their copies from the host
	tables   []*BlockTable         // live block tables, kept current by writes
	streams  streamSet             // streams recorded by RecordStream
	inflight []device.Event        // after the copies of AppendAsync calls not yet waited for
	share    *sharing              // with a ShareKey: the head's place in its prefix table
	group    atomic.Pointer[Group] // the group that holds it as a member (group.go); nil when none
}

var headIDs atomic.Uint64

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
	leave, err := p.enter()
	if err != nil {
		return nil, fmt.Errorf("state: NewHead of %s: %w", l.Type, err)
	}
	defer leave()
	l = l.clone()
	h := &Head{shape: newShape(p, l, owner), id: headIDs.Add(1), lin: newLineage(owner), owned: true}
	h.pos = position{seg: &segment{}}
	if k := l.shareColumn(); k >= 0 {
		h.share = &sharing{key: k, ks: l.Columns[k].ElemSize}
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
	h.lin.heads[h] = struct{}{}
	p.register(h)
	return h, nil
}

func (h *Head) describe() string {
	return fmt.Sprintf("%s head of owner %q at version %d", h.l.Type, h.owner, h.pos.v)
}

func (h *Head) logicalBytes() int64 { return h.logical }

// lock starts a call: it holds the pool open and h's lock, and fails when
// h is released or invalidated.
func (h *Head) lock(op string) (func(), error) {
	if err := h.begin(op); err != nil {
		return nil, err
	}
	return h.end, nil
}

// landLocked waits until the copies of earlier AppendAsync calls have
// landed, so that host-side reads, snapshots, branches and copy-on-write
// see their rows. h.mu is held.
func (h *Head) landLocked() error {
	var errs []error
	for _, ev := range h.inflight {
		errs = append(errs, ev.Wait(), ev.Close())
	}
	h.inflight = h.inflight[:0]
	return errors.Join(errs...)
}

// lockAsync is lock for the calls that run on a stream (AppendAsync,
// ReadAsync): they leave the copies of earlier ones in flight, as the
// stream orders them.
func (h *Head) lockAsync(op string) (func(), error) {
	if err := h.open(op, false, true); err != nil {
		return nil, err
	}
	return h.end, nil
}

// begin is lock without the closure, for the reads that allocate
// nothing: a nil error must be followed by end.
func (h *Head) begin(op string) error { return h.open(op, true, true) }

// open starts a call: it holds the pool open and h's lock, and fails when
// h is released or invalidated; it rebuilds an evicted reconstructable
// head, with land waits for the copies of earlier AppendAsync calls, and
// with share registers the blocks that rows a kernel wrote filled.
func (h *Head) open(op string, land, share bool) error {
	if h == nil {
		return errNil("Head", op)
	}
	if err := h.pool.enterCall(); err != nil {
		return h.errorf(op, "%w", err)
	}
	h.mu.Lock()
	if err := h.prepareLocked(op, land, share); err != nil {
		h.end()
		return err
	}
	return nil
}

// prepareLocked is open's work once h.mu is held (a group holds the
// locks of all its members, then prepares each): it fails when h is
// released or invalidated, rebuilds an evicted reconstructable head, and
// with land waits for the copies of earlier AppendAsync calls, and with
// share registers the blocks that rows a kernel wrote filled.
func (h *Head) prepareLocked(op string, land, share bool) error {
	if h.released {
		return h.errorf(op, "%w", ErrReleased)
	}
	if h.invalid.Load() {
		return h.errorf(op, "%w", ErrInvalidated)
	}
	if h.evicted {
		if err := h.rebuild(op); err != nil {
			return err
		}
	}
	if land && len(h.inflight) > 0 {
		if err := h.landLocked(); err != nil {
			return h.errorf(op, "rows appended on a stream: %w", err)
		}
	}
	h.pool.touch(&h.lastUse)
	if h.hist != nil && h.hist.pending != nil {
		h.flush()
	}
	if share && h.share != nil && len(h.inflight) == 0 {
		h.shareFull() // blocks that rows a kernel wrote filled
	}
	return nil
}

// end ends a call begun by begin.
func (h *Head) end() {
	h.mu.Unlock()
	h.pool.closeMu.RUnlock()
}

// commitVersion moves h to a new version of its lineage, starting a new
// segment when h does not write at the tip of its own.
func (h *Head) commitVersion() {
	h.lin.mu.Lock()
	if !h.owned {
		h.pos.seg = newSegment(h.pos.seg, h.pos.v)
		h.owned = true
	}
	h.pos.v = h.lin.next()
	h.lin.mu.Unlock()
	h.setLogical()
}

// setLogical brings the pool's LogicalBytes up to date with h's rows.
func (h *Head) setLogical() {
	l := h.logicalOf(h.r)
	h.pool.logical.Add(l - h.logical)
	h.logical = l
	if len(h.tables) > 0 {
		h.syncTables()
	}
}

// Append appends the rows of a batch (one []byte per column, the same
// number of rows in each) as a new version. Past the bound it returns
// ErrBound and appends nothing; a mutable state has no room to append.
//
//state:appends
func (h *Head) Append(cols [][]byte) error {
	if err := h.begin("Append"); err != nil {
		return err
	}
	defer h.end()
	n, err := h.batchRows("Append", cols)
	if err != nil {
		return err
	}
	if err := h.checkAppend("Append", n); err != nil {
		return err
	}
	from := h.r.rows
	if _, err := h.apply("Append", hostAppend, from, from+n, from+n, cols); err != nil {
		return err
	}
	h.record(from, from+n)
	if h.share != nil {
		h.shareAppended(from, cols[h.share.key])
	}
	if g := h.group.Load(); g != nil {
		g.appended(h) // group prefix sharing (group_share.go)
	}
	return nil
}

func (h *Head) checkAppend(op string, n int) error {
	if h.l.Growth == Mutable {
		return h.errorf(op, "a mutable state has exactly its bound of %d rows: %w", h.l.Bound, ErrBound)
	}
	if n < 0 {
		return h.errorf(op, "%d rows: %w", n, ErrRange)
	}
	if h.l.Bound > 0 && n > h.l.Bound-h.r.rows {
		return h.errorf(op, "%d rows after %d exceed the bound of %d: %w", n, h.r.rows, h.l.Bound, ErrBound)
	}
	if h.l.Window > 0 && n > h.l.Window {
		return h.errorf(op, "%d rows are more than the window of %d: %w", n, h.l.Window, ErrBound)
	}
	if h.l.Bound <= 0 && n > maxInt/2-h.r.rows {
		return h.errorf(op, "%d rows after %d: %w", n, h.r.rows, ErrBound)
	}
	return nil
}

// Write writes the rows of a batch over rows [at, at+n) of a mutable
// state, as a new version. It needs 0 <= at and at+n <= Bound, else
// ErrRange. Blocks shared with snapshots or branches are copied first;
// blocks the write covers whole are replaced by new ones.
//
//state:mutates
func (h *Head) Write(at int, cols [][]byte) error {
	unlock, err := h.lock("Write")
	if err != nil {
		return err
	}
	defer unlock()
	n, err := h.batchRows("Write", cols)
	if err != nil {
		return err
	}
	if err := h.checkWrite("Write", at, at+n); err != nil {
		return err
	}
	if _, err := h.apply("Write", hostWrite, at, at+n, h.r.rows, cols); err != nil {
		return err
	}
	h.record(at, at+n)
	return nil
}

func (h *Head) checkWrite(op string, from, to int) error {
	if h.l.Growth != Mutable {
		return h.errorf(op, "an append state's rows never change once written: %w", ErrRange)
	}
	if from < 0 || to < from || to > h.r.rows {
		return h.errorf(op, "rows [%d, %d) outside [0, %d): %w", from, to, h.r.rows, ErrRange)
	}
	return nil
}

// AppendDevice reserves n rows past the end as a new version and returns,
// per column, the spans where they lie, for a kernel to fill. The spans are
// the caller's to write until the next call on h. Past the bound it returns
// ErrBound and reserves nothing.
//
//state:appends
func (h *Head) AppendDevice(n int) ([][]device.Span, error) {
	unlock, err := h.lock("AppendDevice")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := h.checkAppend("AppendDevice", n); err != nil {
		return nil, err
	}
	from := h.r.rows
	spans, err := h.apply("AppendDevice", deviceAppend, from, from+n, from+n, nil)
	if err != nil {
		return nil, err
	}
	h.recordDevice(from, from+n)
	return spans, nil
}

// WriteDevice makes rows [from, to) of a mutable state writable as a new
// version (copying the blocks it shares with snapshots and branches) and
// returns, per column, the spans where they lie, for a kernel to write. The
// spans are the caller's to write until the next call on h.
//
//state:mutates
func (h *Head) WriteDevice(from, to int) ([][]device.Span, error) {
	unlock, err := h.lock("WriteDevice")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := h.checkWrite("WriteDevice", from, to); err != nil {
		return nil, err
	}
	spans, err := h.apply("WriteDevice", deviceWrite, from, to, h.r.rows, nil)
	if err != nil {
		return nil, err
	}
	h.recordDevice(from, to)
	return spans, nil
}

// Read copies rows [from, to) into dst: per column, (to-from) rows' bytes.
func (h *Head) Read(from, to int, dst [][]byte) error {
	if err := h.begin("Read"); err != nil {
		return err
	}
	defer h.end()
	return h.read("Read", h.r, from, to, dst)
}

// Spans locates rows [from, to) in device memory: per column, one span per
// block. They are for reading: the blocks may be shared with snapshots and
// branches, so kernels that write use WriteDevice.
//
//state:view
func (h *Head) Spans(from, to int) ([][]device.Span, error) {
	unlock, err := h.lock("Spans")
	if err != nil {
		return nil, err
	}
	defer unlock()
	return h.spans("Spans", h.r, from, to)
}

// Len returns the number of rows (0 once released, or evicted unless reconstructable): for a window state,
// every row ever appended, of which rows [Oldest(), Len()) are readable.
func (h *Head) Len() int {
	if h == nil || h.pool.isClosed() {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.r == nil {
		if h.evicted && h.hist != nil {
			if t := h.hist.find(h.pos.v); t >= 0 {
				return h.hist.entries[t].rows
			}
		}
		return 0
	}
	return h.r.rows
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

// Owner returns the head's owner.
func (h *Head) Owner() Owner {
	if h == nil {
		return ""
	}
	return h.owner
}

// Layout returns a copy of the head's layout.
func (h *Head) Layout() *Layout {
	if h == nil {
		return nil
	}
	return h.l.clone()
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
	if h.hist != nil {
		st.Checkpoints = len(h.hist.roots())
		for _, b := range h.hist.deltaBlocks() {
			st.HistoryBytes += int64(b.Bytes())
		}
		st.HistoryBytes += h.hist.inputBytes() // recorded step inputs (replay.go)
	}
	return st
}

// Snapshot returns an immutable snapshot of the head's version, in O(1):
// it shares the version's blocks, and later writes to the head copy the
// blocks they write.
//
//state:acquire
func (h *Head) Snapshot() (*Snap, error) {
	unlock, err := h.lock("Snapshot")
	if err != nil {
		return nil, err
	}
	defer unlock()
	return h.snapshotLocked()
}

func (h *Head) snapshotLocked() (*Snap, error) {
	h.lin.mu.Lock()
	defer h.lin.mu.Unlock()
	if h.invalid.Load() {
		return nil, h.errorf("Snapshot", "%w", ErrInvalidated)
	}
	s := &Snap{shape: h.shape, lin: h.lin, r: h.r.retain(), pos: h.pos}
	s.logical = h.logicalOf(s.r)
	h.lin.snaps[s] = struct{}{}
	h.pool.register(s)
	return s, nil
}

// Branch returns a new head at the head's version and content, sharing its
// blocks; writes to one are invisible to the other.
//
//state:acquire
func (h *Head) Branch() (*Head, error) {
	unlock, err := h.lock("Branch")
	if err != nil {
		return nil, err
	}
	defer unlock()
	return h.branchLocked()
}

// branchLocked is Branch with h's call begun.
func (h *Head) branchLocked() (*Head, error) {
	h.lin.mu.Lock()
	defer h.lin.mu.Unlock()
	if h.invalid.Load() {
		return nil, h.errorf("Branch", "%w", ErrInvalidated)
	}
	c := &Head{shape: h.shape, id: headIDs.Add(1), lin: h.lin, r: h.r.retain(), pos: h.pos}
	c.logical = h.logicalOf(c.r)
	if h.hist != nil {
		c.hist = h.hist.clone()
	}
	c.share = h.share.clone(h.pool)
	// The branch holds h's blocks: work on h's recorded streams uses them
	// (the prefix cache and the branch's tables wait for it too).
	c.streams.list = h.streams.get()
	h.lin.heads[c] = struct{}{}
	h.pool.register(c)
	return c, nil
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
	if err := h.checkChild(child); err != nil {
		return err
	}
	if child == h {
		unlock, err := h.lock("Merge")
		if err != nil {
			return err
		}
		unlock()
		return nil
	}
	leave, err := h.pool.enter()
	if err != nil {
		return h.errorf("Merge", "%w", err)
	}
	defer leave()
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
	for _, x := range []*Head{h, child} {
		if x.evicted {
			if err := x.rebuild("Merge"); err != nil {
				return err
			}
		}
	}
	for _, x := range []*Head{h, child} {
		if err := x.landLocked(); err != nil {
			return h.errorf("Merge", "rows appended on a stream: %w", err)
		}
		if x.hist != nil && x.hist.pending != nil {
			x.flush()
		}
	}
	h.lin.mu.Lock()
	if err := h.mergeCheck(child); err != nil {
		h.lin.mu.Unlock()
		return err
	}
	var freed []*block
	h.mergeMove(child, &freed)
	h.lin.mu.Unlock()
	h.moved(freed)
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
	if err := h.rollbackArg(to); err != nil {
		return err
	}
	unlock, err := h.lock("Rollback")
	if err != nil {
		return err
	}
	defer unlock()
	to.mu.RLock()
	defer to.mu.RUnlock()
	h.lin.mu.Lock()
	if err := h.rollbackCheck(to); err != nil {
		h.lin.mu.Unlock()
		return err
	}
	var freed []*block
	h.rollbackMove(to, &freed)
	h.lin.mu.Unlock()
	h.moved(freed)
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
	h.r.release(freed)
	h.r = to.r.retain()
	h.pos, h.owned = to.pos, false
	if h.hist != nil {
		h.hist.rollback(to.pos, to.r, freed)
	}
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
	h.r.release(freed)
	h.r = child.r.retain()
	h.pos, h.owned = child.pos, false
	if h.hist != nil && child.hist != nil {
		h.hist.release(freed)
		h.hist = child.hist.clone()
	}
}

// moved finishes a rollback or merge once h.lin.mu is released: the
// pool's accounting, the block tables, the prefix table, and the blocks
// given up.
func (h *Head) moved(freed []*block) {
	h.setLogical()
	h.resyncShare()
	h.pool.free(freed)
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
	if h.share != nil && h.share.tab != nil {
		if len(h.inflight) == 0 {
			// Blocks a kernel filled, if the streams recorded on h are
			// past it already (Release never waits).
			h.shareFull()
		}
		h.share.dropWaits()
		h.pool.cache.leave(h.share.tab)
	}
	releaseTables(h.tables)
	h.tables = nil
	for _, ev := range h.inflight {
		ev.Close() // its copies' blocks wait as pending, if recorded
	}
	h.inflight = nil
	var freed []*block
	if h.r != nil {
		if h.r.unique() {
			freed = make([]*block, 0, h.r.blocks()) // no regrowth for a large state
		}
		h.r.release(&freed)
	}
	if h.hist != nil {
		h.hist.release(&freed)
	}
	h.r = nil
	h.pool.free(freed)
	h.pool.unregister(h, h.logical)
	h.logical = 0
	return nil
}
