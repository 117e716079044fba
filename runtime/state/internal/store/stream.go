package store

import (
	"errors"
	"fmt"

	"github.com/gpustate/gpustate/runtime/device"
)

// Stream-ordered lifetimes. Work queued on a device stream may use a
// state's blocks long after the call that queued it returned. RecordStream
// marks every block a handle holds as used by a stream; when such a block's
// last reference goes (release, rollback, copy-on-write), the pool records
// an event on each stream that used it and keeps the block pending (not
// free, not zeroed, not reusable) until those events complete. A goroutine
// per batch of released blocks waits for the events and then hands the
// blocks to the free lists; the releasing call never waits.

// checkRecord fails unless st is a live stream of backend b.
func checkRecord(b device.Backend, st device.Stream) error {
	ev, err := recordOn(b, st)
	if err != nil {
		return err
	}
	return ev.Close()
}

// recordOn is checkRecord that returns the event the check recorded on
// st, after the work queued on it so far, for the caller to close.
func recordOn(b device.Backend, st device.Stream) (device.Event, error) {
	if st == nil {
		return nil, errors.New("RecordStream of a nil stream")
	}
	sb, ok := b.(device.Streams)
	if !ok {
		return nil, fmt.Errorf("RecordStream: the %s backend has no streams: %w", b.Name(), errors.ErrUnsupported)
	}
	// A stream of another backend (or a closed one) would never order
	// this backend's frees: the event the check records fails on it.
	ev, err := recordLive(sb, st)
	if err != nil {
		return nil, fmt.Errorf("RecordStream: %w", err)
	}
	return ev, nil
}

// addFrom marks the blocks of r as used by st, a stream checkRecord
// passed: for each column c, those from index from[c] on (those before it
// carry st already), and sets from[c] to the column's end; from nil is
// every block.
func (rec *recorded) addFrom(r *root, st device.Stream, from []int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var added int64
	for ci := range r.cols {
		t := &r.cols[ci]
		lo := t.lo
		if from != nil {
			lo = max(lo, from[ci])
			from[ci] = t.n
		}
		for b := range t.heldIn(lo, t.n) {
			if rec.addLocked(b, st) {
				added++
			}
		}
	}
	rec.n.Add(added)
}

// addRows marks the blocks holding rows [from, to) of r, of shape sh, as
// used by st.
func (rec *recorded) addRows(sh *shape, r *root, from, to int, st device.Stream) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var added int64
	for ci := range r.cols {
		per := sh.perBlock[ci]
		t := &r.cols[ci]
		for b := range t.heldIn(from/per, (to+per-1)/per) {
			if rec.addLocked(b, st) {
				added++
			}
		}
	}
	rec.n.Add(added)
}

// checkStream fails unless st is a live stream of the backend: it records
// an event on it and frees the event.
func checkStream(sb device.Streams, st device.Stream) error {
	ev, err := recordLive(sb, st)
	if err != nil {
		return err
	}
	return ev.Close()
}

// recordLive records an event on st, which fails unless st is a live
// stream of the backend.
func recordLive(sb device.Streams, st device.Stream) (device.Event, error) {
	if st == nil {
		return nil, errors.New("nil stream")
	}
	return sb.Record(st)
}

// mark returns how far h's blocks of each of cols columns carry st (a
// new mark, from the start, the first time). h.mu is held.
func (ap *asyncPart) mark(st device.Stream, cols int) []int {
	for _, m := range ap.marks {
		if m.st == st {
			return m.upTo
		}
	}
	ap.marks = append(ap.marks, streamMark{st: st, upTo: make([]int, cols)})
	return ap.marks[len(ap.marks)-1].upTo
}

// changed takes the marks back to the blocks of the first row the change
// touched (Head.writing): a block from there on may be new.
func (ap *asyncPart) changed(h *Head) {
	for _, m := range ap.marks {
		for c, per := range h.perBlock {
			m.upTo[c] = min(m.upTo[c], h.writeFrom/per)
		}
	}
}

// join adds the async part to h's parts, once it has state.
func (ap *asyncPart) join(h *Head) { h.parts |= partAsync }

// prepare marks where the kernels of the last call's device write end,
// as they are queued by now (kernelRows.queued), and waits, with c.land,
// until the copies of earlier AppendAsync calls have landed, so that
// host-side reads, snapshots, branches and copy-on-write see their rows.
// It does not ask whether the kernels' events completed: on CUDA that is
// a driver call a decode step would make; a copy that needs them waits,
// and an event that completed answers at once.
func (ap *asyncPart) prepare(h *Head, c call) error {
	if k := ap.kern; k != nil && k.fresh != (rowRange{}) && c.st == nil {
		k.queued(h, nil, nil) // RecordStream's own, once it has begun
	}
	if c.land && len(ap.inflight) > 0 {
		if err := ap.land(); err != nil {
			return h.errorf(c.op, "rows appended on a stream: %w", err)
		}
	}
	return nil
}

// land waits for the copies in flight. h.mu is held.
func (ap *asyncPart) land() error {
	var errs []error
	for _, f := range ap.inflight {
		errs = append(errs, f.ev.Wait(), f.ev.Close())
	}
	clear(ap.inflight)
	ap.inflight = ap.inflight[:0]
	return errors.Join(errs...)
}

// landClean waits for the copies in flight and forgets them when every
// one succeeded. A failed one keeps them all, for the next call to answer
// its error (land): a wait that lands them and fails must not drop the
// error with them. h.mu is held.
func (ap *asyncPart) landClean() bool {
	for _, f := range ap.inflight {
		if f.ev.Wait() != nil {
			return false
		}
	}
	return ap.land() == nil
}

// landDone forgets the copies in flight whose events report they
// completed, without waiting for the others: a head whose last
// AppendAsync landed while nobody called it holds nothing in flight, and
// may move to the host tier. A copy that failed stays, for the next call
// to answer its error (land). h.mu is held.
func (ap *asyncPart) landDone() {
	kept := ap.inflight[:0]
	for _, f := range ap.inflight {
		if done, err := f.ev.Done(); done && err == nil {
			f.ev.Close()
			continue
		}
		kept = append(kept, f)
	}
	clear(ap.inflight[len(kept):])
	ap.inflight = kept
}

// committed keeps the rows of a write whose spans go to a kernel
// (written.kernel).
// The blocks the kernel writes may be new since a stream was recorded on
// h: they are that stream's too from now on, as RecordStream would make
// them, so that no write in place, lowered fill, free, eviction or move
// to the host tier goes before a kernel queued on it, whatever the next
// call is (a release, or none on an invalidated branch).
func (ap *asyncPart) committed(h *Head, w written) {
	if w.kernel() && w.from < w.to {
		k := ap.kernels()
		k.rows.add(w.from, w.to)
		k.fresh = rowRange{w.from, w.to}
		ap.streams.mu.Lock() // not get: a decode step would copy the list
		for _, s := range ap.streams.list {
			h.pool.rec.addRows(&h.shape, h.r, w.from, w.to, s)
		}
		ap.streams.mu.Unlock()
	}
}

// kernels returns ap.kern, made on first use.
func (ap *asyncPart) kernels() *kernelRows {
	if ap.kern == nil {
		ap.kern = new(kernelRows)
	}
	return ap.kern
}

// queued records, at the call after a device write of h, an event on
// each stream its kernels may be on: the one a RecordStream names (st,
// with ev, the event its check recorded as it began, which queued keeps)
// and those recorded on h before. Work queued on them later is not the
// kernels': a write that keeps their rows waits for the events, not for
// the streams (awaitKernel). An event replaces the one before it on its
// stream, which it follows. h.mu is held.
func (k *kernelRows) queued(h *Head, st device.Stream, ev device.Event) {
	k.fresh = rowRange{}
	sb, ok := h.pool.b.(device.Streams)
	if !ok {
		k.rows = rowRange{} // no stream: the kernels ran in their call
		return
	}
	if ev != nil {
		k.evs = latestOn(k.evs, st, ev)
	}
	ss := &h.async.streams
	ss.mu.Lock() // not get: a decode step would copy the list
	for _, s := range ss.list {
		if s == st {
			continue // RecordStream records it on the rows
		}
		k.record(sb, s)
	}
	ss.mu.Unlock()
	if len(k.evs) == 0 {
		k.rows = rowRange{} // no kernel may still write them
	}
}

// record records the event after the kernels queued on st so far. Where
// none can be recorded it waits for st now, for the work queued on it so
// far and none later: a wait for the whole device at the copy would also
// wait for work queued since, which may wait for that copy's caller.
func (k *kernelRows) record(sb device.Streams, st device.Stream) {
	ev, err := sb.Record(st)
	switch {
	case err == nil:
		k.evs = latestOn(k.evs, st, ev)
	case errors.Is(err, device.ErrStreamClosed):
		// Close waited for its work.
	default:
		st.Sync() // a failed stream's kernels are over too
	}
}

// latestOn adds ev, an event on st, to list in place of the one before it
// on st, which it closes: work on a stream runs in order and its first
// failure stays with it, so the later event stands for the earlier.
func latestOn(list []streamEvent, st device.Stream, ev device.Event) []streamEvent {
	for i := range list {
		if f := &list[i]; f.st == st {
			f.ev.Close()
			f.ev = ev
			return list
		}
	}
	return append(list, streamEvent{st: st, ev: ev})
}

// shareKernels gives c the rows kernels may still write in blocks it now
// holds of h (a branch of h, or h fast-forwarded to it), and the events
// that mark their end, which both then hold.
func (ap *asyncPart) shareKernels(c *Head) {
	k := ap.kern
	if k == nil || k.rows == (rowRange{}) {
		return
	}
	to := c.async.kernels()
	to.rows.add(k.rows.from, k.rows.to)
	for i := range k.evs {
		e := &k.evs[i]
		if s, ok := e.ev.(*sharedEvent); ok {
			s.hold()
		} else {
			e.ev = newSharedEvent(e.ev, 2) // shared from now on
		}
		to.evs = append(to.evs, *e) // both its and h's: waited for whole
	}
	c.async.join(c)
}

// branched gives c the streams recorded on h and the rows kernels may
// still write: c holds h's blocks, so work on those streams uses them
// (the prefix cache and c's tables wait for it too).
func (ap *asyncPart) branched(h, c *Head) {
	if list := ap.streams.get(); len(list) > 0 {
		c.async.streams.list = list
		c.async.join(c)
	}
	ap.shareKernels(c)
}

// merged gives h, fast-forwarded to child, the rows kernels may still
// write in child's blocks, which h now holds.
func (ap *asyncPart) merged(h, child *Head) { child.async.shareKernels(h) }

// awaitKernel waits, before a write copies the rows its operations ops
// keep of their old blocks (writeTx.fillNewBlocks), for the kernels that
// may still be writing those rows. A kernel writes in stream order and
// the copy does not: the copy would keep what the rows held before the
// kernel, and the new version would lose the kernel's rows. It waits for
// the events after the kernels (kernelRows.queued), not for work queued
// on their streams since; a write that keeps none of the rows h handed to
// kernels never waits. Before such a copy it also lands the copies in
// flight; its error is one of theirs. h.mu is held.
func (ap *asyncPart) awaitKernel(h *Head, ops []blockOp) error {
	if len(ap.inflight) > 0 && keepsRows(ops) {
		// Only an AppendAsync runs with copies in flight, and it copies
		// a block on write only where its fill is past the head's rows:
		// an AppendAsync before it failed after claiming the bytes. The
		// copy must not read the block before the earlier copies land.
		// (A block back from the host tier has its fill set for an
		// append in place, ordered after the tier's copies: orderTier.)
		if err := ap.land(); err != nil {
			return fmt.Errorf("rows appended on a stream: %w", err)
		}
	}
	k := ap.kern
	if k == nil || k.rows == (rowRange{}) {
		return nil
	}
	for i := range ops {
		o := &ops[i]
		if o.nb == nil || o.keep <= 0 {
			continue
		}
		if per := h.perBlock[o.col]; k.rows.overlaps(o.idx*per, (o.idx+1)*per) { // the rows it keeps are in its block
			k.wait()
			return nil
		}
	}
	return nil
}

// keepsRows reports whether one of ops copies rows of its old block.
func keepsRows(ops []blockOp) bool {
	for i := range ops {
		if ops[i].nb != nil && ops[i].keep > 0 {
			return true
		}
	}
	return false
}

// wait waits until no kernel writes the rows. h.mu is held.
func (k *kernelRows) wait() {
	for _, e := range k.evs {
		e.ev.Wait() // a failed stream's kernel is over too
		e.ev.Close()
	}
	clear(k.evs)
	k.evs = k.evs[:0]
	k.rows = rowRange{}
}

// release closes the events of the copies in flight: their blocks wait as
// pending, recorded on their stream.
func (ap *asyncPart) release(_ *Head, freed []*block) []*block {
	ap.closeEvents()
	return freed
}

// closeEvents closes the events ap holds: of the copies in flight and
// after the kernels. h.mu is held, or no call on h runs (Pool.Close).
func (ap *asyncPart) closeEvents() {
	for _, f := range ap.inflight {
		f.ev.Close()
	}
	ap.inflight = nil
	if k := ap.kern; k != nil {
		for _, e := range k.evs {
			e.ev.Close()
		}
		ap.kern = nil
	}
}

// onlyTier reports whether every copy in flight is a return from the host
// tier: the tier's own, which a move out may wait for. h.mu is held.
func (ap *asyncPart) onlyTier() bool {
	for _, f := range ap.inflight {
		if !f.tier {
			return false
		}
	}
	return true
}

// orderTier makes the work queued on st from now on wait for the copies
// of a return from the host tier still in flight: they write whole
// blocks, the free rows of the last one included, which an AppendAsync
// on st fills. It queues waits, never waits. h.mu is held.
func (ap *asyncPart) orderTier(sb device.Streams, st device.Stream) error {
	for _, f := range ap.inflight {
		if !f.tier || f.st == st || st == nil {
			continue
		}
		if err := sb.WaitEvent(st, f.ev); err != nil {
			return err
		}
	}
	return nil
}
