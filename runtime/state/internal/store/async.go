package store

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gpustate/gpustate/runtime/device"
)

// Async paths: rows go to and from the device on the caller's stream,
// staged through page-locked memory, so a decode step never synchronizes
// the device. The blocks such a copy touches are recorded on the stream
// (RecordStream), so releasing the handle right after is safe.

// stagingMin is the smallest page-locked staging buffer the pool takes.
const stagingMin = 64 << 10

// streamsOf returns backend b's streams, or an error for one without.
func streamsOf(b device.Backend, op string) (device.Streams, error) {
	sb, ok := b.(device.Streams)
	if !ok {
		return nil, fmt.Errorf("%s: the %s backend has no streams: %w", op, b.Name(), errors.ErrUnsupported)
	}
	return sb, nil
}

// get returns a page-locked buffer of at least n bytes, reused when one
// is free: buffers whose copies have landed are free again (reapLocked),
// polled only when no free buffer fits, so a run of calls polls the
// events of the calls before it once.
func (sg *staging) get(sb device.Streams, n int) ([]byte, error) {
	sg.mu.Lock()
	buf, ok := sg.fitLocked(n)
	if !ok && len(sg.busy) > 0 {
		sg.reapLocked()
		buf, ok = sg.fitLocked(n)
	}
	sg.mu.Unlock()
	if ok {
		return buf, nil
	}
	size := stagingMin
	for size < n {
		size *= 2
	}
	buf, err := sb.HostAlloc(size)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// fitLocked takes a free staging buffer of at least n bytes out of the
// list, if one is there. sg.mu is held.
func (sg *staging) fitLocked(n int) ([]byte, bool) {
	for i, buf := range sg.free {
		if cap(buf) >= n {
			last := len(sg.free) - 1
			sg.free[i] = sg.free[last]
			sg.free[last] = nil
			sg.free = sg.free[:last]
			return buf[:n], true
		}
	}
	return nil, false
}

// reapLocked frees the staging buffers whose copies have landed: each
// call polls the events of those in use, without waiting, instead of a
// goroutine per call waiting for one. A stream runs its work in order, so
// once one of its events is not done, its later ones are not polled: a
// reap polls the buffers that landed and one more a stream, not every
// buffer in use. sg.mu is held.
func (sg *staging) reapLocked() {
	var waiting [4]device.Stream // streams met with an event not done
	nw := 0
	keep := sg.busy[:0]
	for _, u := range sg.busy {
		if !slices.Contains(waiting[:nw], u.st) {
			if done, _ := u.ev.Done(); done { // a failed copy is over too
				u.ev.Close()
				sg.free = append(sg.free, u.buf[:cap(u.buf)])
				continue
			}
			if nw < len(waiting) {
				waiting[nw] = u.st
				nw++
			}
		}
		keep = append(keep, u)
	}
	clear(sg.busy[len(keep):])
	sg.busy = keep
}

// inUse leaves buf, the staging buffer of an AppendAsync call, in use
// until ev, recorded on st after its copies, completes.
func (sg *staging) inUse(buf []byte, st device.Stream, ev device.Event) {
	sg.mu.Lock()
	sg.busy = append(sg.busy, stagingUse{buf: buf, st: st, ev: ev})
	sg.mu.Unlock()
}

// put gives back a buffer nothing uses.
func (sg *staging) put(buf []byte) {
	sg.mu.Lock()
	sg.free = append(sg.free, buf[:cap(buf)])
	sg.mu.Unlock()
}

// close gives every staging buffer back to backend b; Pool.Close calls it
// once nothing is pending.
func (sg *staging) close(b device.Backend) error {
	sb, ok := b.(device.Streams)
	if !ok {
		return nil
	}
	sg.mu.Lock()
	defer sg.mu.Unlock()
	var errs []error
	for _, u := range sg.busy {
		u.ev.Wait() // no handle call runs: the copies only have to land
		u.ev.Close()
		sg.free = append(sg.free, u.buf[:cap(u.buf)])
	}
	sg.busy = nil
	for _, buf := range sg.free {
		errs = append(errs, sb.HostFree(buf))
	}
	sg.free = nil
	return errors.Join(errs...)
}

// appendAsync is AppendAsync's work on h, whose mu is held: the staging,
// the write and its copies on st, the blocks recorded on st and the event
// the head keeps in flight.
func (ap *asyncPart) appendAsync(h *Head, st device.Stream, cols [][]byte) error {
	sb, err := streamsOf(h.pool.b, "AppendAsync")
	if err != nil {
		return h.errorf("AppendAsync", "%w", err)
	}
	if err := ap.orderTier(sb, st); err != nil {
		return h.errorf("AppendAsync", "%w", err)
	}
	n, err := h.batchRows("AppendAsync", cols)
	if err != nil {
		return err
	}
	if err := h.checkAppend("AppendAsync", h.r.rows, n); err != nil {
		return err
	}
	if n == 0 || st == nil {
		// Rows to copy check the stream by queueing on it.
		if err := checkStream(sb, st); err != nil {
			return h.errorf("AppendAsync", "%w", err)
		}
		return nil
	}
	total := 0
	for _, c := range cols {
		total += len(c)
	}
	buf, err := h.pool.staging.get(sb, total)
	if err != nil {
		return h.errorf("AppendAsync", "staging: %w", err)
	}
	off := 0
	for _, c := range cols {
		off += copy(buf[off:], c)
	}
	from := h.r.rows
	q := rowQueue{sb: sb, st: st, buf: buf}
	tx := writeTx{h: h, op: "AppendAsync", kind: deviceAppend, from: from, to: from + n}
	short, err := tx.appendRows(cols, &q)
	if err == nil && !short {
		_, err = tx.apply(from+n, nil, q.queue(h))
	}
	if err != nil {
		h.pool.staging.put(buf)
		return err
	}
	h.committed(written{from: from, to: from + n, device: true, async: st})
	ev := newSharedEvent(q.landed, 2)
	if !q.recorded { // the short path records its blocks itself
		h.pool.rec.addRows(&h.shape, h.r, from, from+n, st)
	}
	h.pool.staging.inUse(buf, st, ev)
	ap.join(h)
	ap.inFlight(st, ev)
	return nil
}

// inFlight adds ev, the event after an AppendAsync call's copies on st,
// to those a landing waits for, in place of the earlier one on st
// (latestOn): a head that appends on one stream holds one event, however
// many calls it makes before a read waits for them.
func (ap *asyncPart) inFlight(st device.Stream, ev device.Event) {
	ap.inflight = latestOn(ap.inflight, st, ev)
}

// queue returns writeTx.apply's last step for the general path: q's copies to
// the runs it gets.
func (q *rowQueue) queue(h *Head) func([]copyRun) error {
	return func(runs []copyRun) error {
		var err error
		q.landed, err = h.queueCopies(q.sb, q.st, runs, q.buf)
		return err
	}
}

// order makes work queued on st from now on wait for the copies of
// earlier AppendAsync calls on other streams; copies on st itself are
// ordered by the stream. It queues waits, never waits. h.mu is held.
func (ap *asyncPart) order(b device.Backend, st device.Stream) error {
	for _, f := range ap.inflight {
		if f.st == st {
			continue
		}
		sb, ok := b.(device.Streams)
		if !ok || st == nil {
			return nil // queueReads reports it
		}
		ev := f.ev
		if s, ok := ev.(*sharedEvent); ok {
			ev = s.Event // the backend's own event, which WaitEvent takes
		}
		if err := sb.WaitEvent(st, ev); err != nil {
			return err
		}
	}
	return nil
}

// queueReads queues the copies of ReadAsync, of rows [from, to) of r.
func (sh *shape) queueReads(op string, r *root, st device.Stream, from, to int, dst [][]byte) error {
	sb, err := streamsOf(sh.pool.b, op)
	if err != nil {
		return sh.errorf(op, "%w", err)
	}
	if err := sh.checkReadable(op, from, to, r.rows); err != nil { // first, as Read: rows out of range are ErrRange
		return err
	}
	if err := sh.checkDst(op, to-from, dst); err != nil {
		return err
	}
	if err := checkStream(sb, st); err != nil {
		return sh.errorf(op, "%w", err)
	}
	sh.pool.rec.addRows(sh, r, from, to, st)
	br, batch := sb.(device.BatchReader)
	var reads []device.HostRead // with batch: every run of every column, queued in one call
	if batch && from < to {
		n := 0 // at most a run a block
		for _, per := range sh.perBlock {
			n += (to-1)/per - from/per + 1
		}
		reads = make([]device.HostRead, 0, n)
	}
	for i, d := range dst {
		err := sh.columnRuns(r, i, from, to, func(at int, blk *block, off, n int) error {
			src := blk.Ptr() + device.Ptr(off)
			if batch {
				reads = append(reads, device.HostRead{Dst: d[at : at+n], Src: src})
				return nil
			}
			return sb.CopyDtoHAsync(st, d[at:at+n], src)
		})
		if err != nil {
			return sh.errorf(op, "%w", err)
		}
	}
	if batch && len(reads) > 0 {
		if err := br.CopiesDtoHAsync(st, reads); err != nil {
			return sh.errorf(op, "%w", err)
		}
	}
	return nil
}
