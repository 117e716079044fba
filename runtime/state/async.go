package state

import (
	"errors"
	"fmt"

	"github.com/gpustate/gpustate/runtime/device"
)

// Async paths: rows go to and from the device on the caller's stream,
// staged through page-locked memory, so a decode step never synchronizes
// the device. The blocks such a copy touches are recorded on the stream
// (RecordStream), so releasing the handle right after is safe.

// stagingMin is the smallest page-locked staging buffer the pool takes.
const stagingMin = 64 << 10

// streamsOf returns the backend's streams, or an error for one without.
func (p *Pool) streamsOf(op string) (device.Streams, error) {
	sb, ok := p.b.(device.Streams)
	if !ok {
		return nil, fmt.Errorf("%s: the %s backend has no streams: %w", op, p.b.Name(), errors.ErrUnsupported)
	}
	return sb, nil
}

// stagingGet returns a page-locked buffer of at least n bytes, reused when
// one is free.
func (p *Pool) stagingGet(sb device.Streams, n int) ([]byte, error) {
	p.mu.Lock()
	for i, buf := range p.staging {
		if cap(buf) >= n {
			p.staging = append(p.staging[:i], p.staging[i+1:]...)
			p.mu.Unlock()
			return buf[:n], nil
		}
	}
	p.mu.Unlock()
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

// stagingPutAfter gives buf back once ev completes, without waiting.
func (p *Pool) stagingPutAfter(buf []byte, ev device.Event) {
	p.mem.Later(func() {
		ev.Wait() // a failed copy is over too
		ev.Close()
	}, func() { p.stagingPut(buf) })
}

// freeStaging gives every staging buffer back to the backend; Close calls
// it once nothing is pending.
func (p *Pool) freeStagingLocked() error {
	sb, ok := p.b.(device.Streams)
	if !ok {
		return nil
	}
	var errs []error
	for _, buf := range p.staging {
		errs = append(errs, sb.HostFree(buf))
	}
	p.staging = nil
	return errors.Join(errs...)
}

// recordRows marks the blocks holding rows [from, to) of r as used by st.
func (p *Pool) recordRows(sh *shape, r *root, from, to int, st device.Stream) {
	p.rec.mu.Lock()
	defer p.rec.mu.Unlock()
	for ci := range r.cols {
		per := sh.perBlock[ci]
		t := &r.cols[ci]
		for bi := from / per; bi*per < to && bi < t.n; bi++ {
			if b := t.get(bi); b != nil {
				p.rec.addLocked(b, st)
			}
		}
	}
}

// AppendAsync appends the rows of a batch as a new version, as Append
// does, but copies them to the device on st: the batch is copied to
// page-locked staging memory (so the caller may reuse it at once), the
// copies are queued on st, and the blocks they fill are recorded on st.
// Work queued on st after the call sees the rows; work on another stream
// must wait for an event recorded on st. Every later call on h other than
// AppendAsync and ReadAsync (Read, Spans, Snapshot, Branch, writes) first
// waits for the copies to land, so it sees the rows. It needs a backend
// with device.Streams; a stream that is closed or foreign is an error and
// appends nothing. A call that fails changes nothing, so it may be retried:
// the copies and their events are queued before the version is committed,
// and when one of them fails the call waits for st (the failure path
// alone blocks) and gives back the blocks it took.
//
//state:appends
func (h *Head) AppendAsync(st device.Stream, cols [][]byte) error {
	unlock, err := h.lockAsync("AppendAsync")
	if err != nil {
		return err
	}
	defer unlock()
	sb, err := h.pool.streamsOf("AppendAsync")
	if err != nil {
		return h.errorf("AppendAsync", "%w", err)
	}
	n, err := h.batchRows("AppendAsync", cols)
	if err != nil {
		return err
	}
	if err := h.checkAppend("AppendAsync", n); err != nil {
		return err
	}
	if err := checkStream(sb, st); err != nil {
		return h.errorf("AppendAsync", "%w", err)
	}
	if n == 0 {
		return nil
	}
	total := 0
	for _, c := range cols {
		total += len(c)
	}
	buf, err := h.pool.stagingGet(sb, total)
	if err != nil {
		return h.errorf("AppendAsync", "staging: %w", err)
	}
	off := 0
	for _, c := range cols {
		off += copy(buf[off:], c)
	}
	from := h.r.rows
	var staged, landed device.Event
	queue := func(spans [][]device.Span) error {
		var err error
		staged, landed, err = h.queueCopies(sb, st, spans, buf)
		return err
	}
	if _, err := h.applyThen("AppendAsync", deviceAppend, from, from+n, from+n, nil, queue); err != nil {
		h.pool.stagingPut(buf)
		return err
	}
	h.committed(written{from: from, to: from + n, device: true})
	h.pool.recordRows(&h.shape, h.r, from, from+n, st)
	h.pool.stagingPutAfter(buf, staged)
	h.async.join(h)
	h.async.inflight = append(h.async.inflight, landed)
	return nil
}

// queueCopies queues on st the copies of buf's rows to spans, then the
// events after them: staged (the staging buffer is free again) and landed
// (the rows are on the device). On failure it waits for st (so no copy it
// queued lands later, in blocks the failed write gives back) and returns
// the error: the write is aborted before its commit, and changes nothing.
func (h *Head) queueCopies(sb device.Streams, st device.Stream, spans [][]device.Span, buf []byte) (staged, landed device.Event, err error) {
	fail := func(err error) (device.Event, device.Event, error) {
		for _, ev := range []device.Event{staged, landed} {
			if ev != nil {
				ev.Close()
			}
		}
		return nil, nil, errors.Join(err, st.Sync())
	}
	off := 0
	for i, col := range spans {
		rb := h.rowBytes[i]
		for _, sp := range col {
			k := sp.Rows * rb
			if err := sb.CopyHtoDAsync(st, sp.Ptr, buf[off:off+k]); err != nil {
				return fail(err)
			}
			off += k
		}
	}
	if staged, err = sb.Record(st); err != nil {
		return fail(err)
	}
	if landed, err = sb.Record(st); err != nil {
		return fail(err)
	}
	return staged, landed, nil
}

// stagingPut gives back a buffer nothing uses.
func (p *Pool) stagingPut(buf []byte) {
	p.mu.Lock()
	p.staging = append(p.staging, buf[:cap(buf)])
	p.mu.Unlock()
}

// ReadAsync queues on st copies of rows [from, to) into dst (per column,
// (to-from) rows' bytes) and records the blocks they come from on st. dst
// must stay untouched until an event recorded on st after the call
// completes; memory from the backend's HostAlloc makes the copies truly
// asynchronous.
func (h *Head) ReadAsync(st device.Stream, from, to int, dst [][]byte) error {
	unlock, err := h.lockAsync("ReadAsync")
	if err != nil {
		return err
	}
	defer unlock()
	return h.readAsync("ReadAsync", h.r, st, from, to, dst)
}

// ReadAsync is Head.ReadAsync for a snapshot.
func (s *Snap) ReadAsync(st device.Stream, from, to int, dst [][]byte) error {
	unlock, err := s.rlock("ReadAsync")
	if err != nil {
		return err
	}
	defer unlock()
	return s.readAsync("ReadAsync", s.r, st, from, to, dst)
}

func (sh *shape) readAsync(op string, r *root, st device.Stream, from, to int, dst [][]byte) error {
	sb, err := sh.pool.streamsOf(op)
	if err != nil {
		return sh.errorf(op, "%w", err)
	}
	if err := sh.checkDst(op, to-from, dst); err != nil {
		return err
	}
	spans, err := sh.spans(op, r, from, to)
	if err != nil {
		return err
	}
	if err := checkStream(sb, st); err != nil {
		return sh.errorf(op, "%w", err)
	}
	sh.pool.recordRows(sh, r, from, to, st)
	for i, col := range spans {
		d := dst[i]
		for _, sp := range col {
			k := sp.Rows * sh.rowBytes[i]
			if err := sb.CopyDtoHAsync(st, d[:k], sp.Ptr); err != nil {
				return sh.errorf(op, "%w", err)
			}
			d = d[k:]
		}
	}
	return nil
}
