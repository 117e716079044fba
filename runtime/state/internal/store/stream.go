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
	if st == nil {
		return errors.New("RecordStream of a nil stream")
	}
	sb, ok := b.(device.Streams)
	if !ok {
		return fmt.Errorf("RecordStream: the %s backend has no streams: %w", b.Name(), errors.ErrUnsupported)
	}
	// A stream of another backend (or a closed one) would never order
	// this backend's frees: the event the check records fails on it.
	if err := checkStream(sb, st); err != nil {
		return fmt.Errorf("RecordStream: %w", err)
	}
	return nil
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

// checkStream fails unless st is a live stream of the backend: it records
// an event on it and frees the event.
func checkStream(sb device.Streams, st device.Stream) error {
	if st == nil {
		return errors.New("nil stream")
	}
	ev, err := sb.Record(st)
	if err != nil {
		return err
	}
	return ev.Close()
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

// prepare waits, with c.land, until the copies of earlier AppendAsync
// calls have landed, so that host-side reads, snapshots, branches and
// copy-on-write see their rows.
func (ap *asyncPart) prepare(h *Head, c call) error {
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

// branched gives c the streams recorded on h: c holds h's blocks, so work
// on those streams uses them (the prefix cache and c's tables wait for it
// too).
func (ap *asyncPart) branched(h, c *Head) {
	if list := ap.streams.get(); len(list) > 0 {
		c.async.streams.list = list
		c.async.join(c)
	}
}

// release closes the events of the copies in flight: their blocks wait as
// pending, recorded on their stream.
func (ap *asyncPart) release(_ *Head, freed []*block) []*block {
	for _, f := range ap.inflight {
		f.ev.Close()
	}
	ap.inflight = nil
	return freed
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
