package state

import (
	"errors"

	"github.com/gpustate/gpustate/runtime/device"
)

// The short path of Append and AppendAsync, for a decode step: a few rows
// that, in every column, either go on in the column's tail block (held by
// the head alone) or start one new block past the column's end. It skips
// the plan of write.go and makes the same version the general path would:
// the rows copied in one backend batch (or queued on a stream, with their
// event, in one), the new blocks set, the window expired, the version
// committed (commitVersion: the lineage, the pool's logical bytes and the
// parts' changed hooks). Both calls run the parts' committed hooks after
// either path (docs/INTERNALS.md, "The store's map").

// appendRows appends rows [from, from+n) of the batch cols on the short
// path: copied from cols, or, when q is not nil, queued from q's staging
// buffer (AppendAsync). It reports false, having done nothing, when the
// append does not have its shape; on failure it changes nothing and gives
// back the blocks it took.
func (h *Head) appendRows(op string, cols [][]byte, n int, q *rowQueue) (bool, error) {
	r := h.r
	if n <= 0 || len(h.rowBytes) > maxRowCols || !r.unique() {
		return false, nil
	}
	from, to := r.rows, r.rows+n
	var tails [maxRowCols]*block // per column: the tail block written in place, or nil for a new one
	counts := h.countBuf[:0]
	need := 0
	for c, per := range h.perBlock {
		bi, t, k := from/per, &r.cols[c], 0
		switch {
		case (to-1)/per != bi:
			return false, nil
		case from%per == 0 && bi == t.n:
			k = 1
		case from%per != 0 && bi < t.n && t.uniquePath(bi):
			tails[c] = t.get(bi)
		default:
			return false, nil
		}
		counts = append(counts, k)
		need += k
	}
	h.countBuf = counts
	tx := writeTx{h: h, op: op, kind: hostAppend, from: from, to: to}
	if err := tx.admit(); err != nil {
		return true, err
	}
	var blks []*block
	if need > 0 {
		var err error
		if blks, err = h.allocCols(h.scratch, counts, false); err != nil {
			return true, h.errorf(op, "%w", err)
		}
		h.scratch = blks[:0]
		tx.taken = blks
	}
	for c, b := range tails[:len(counts)] {
		if b == nil {
			tails[c], blks = blks[0], blks[1:]
		}
	}
	var err error
	if q != nil {
		var runs [maxRowCols]copyRun
		q.landed, err = h.queueCopies(q.sb, q.st, h.rowRuns(runs[:0], tails[:len(counts)], from, n), q.buf)
	} else {
		cs := h.copies[:0]
		for c, b := range tails[:len(counts)] {
			rb := h.rowBytes[c]
			cs = append(cs, device.HostCopy{Dst: b.Ptr() + device.Ptr(from%h.perBlock[c]*rb), Src: cols[c][:n*rb]})
		}
		err = copiesHtoD(h.pool.b, cs)
		clear(cs) // the caller's batch is not kept
		h.copies = cs[:0]
	}
	if err != nil {
		return true, tx.abort(err)
	}
	var freed []*block
	for c, k := range counts {
		if k == 1 {
			r.cols[c].set(from/h.perBlock[c], tails[c], &freed)
		}
	}
	r.rows = to
	h.expire(r, &freed)
	h.commitVersion()
	h.pool.free(freed)
	return true, nil
}

// rowRuns appends to runs where rows [from, from+n) go in the blocks of
// each column (dst[c], which holds them whole), column after column, a
// column's rows joined with the column's before when they begin where
// those end, in the block that follows in one allocation: the staging
// buffer holds the columns one after another, so one copy fills both (a
// key block and its value block, taken side by side).
func (h *Head) rowRuns(runs []copyRun, dst []*block, from, n int) []copyRun {
	for c, b := range dst {
		rb := h.rowBytes[c]
		ptr := b.Ptr() + device.Ptr(from%h.perBlock[c]*rb)
		if k := len(runs) - 1; c > 0 && k >= 0 && b.Follows(dst[c-1]) && runs[k].ptr+device.Ptr(runs[k].bytes) == ptr {
			runs[k].bytes += n * rb
			continue
		}
		runs = append(runs, copyRun{ptr: ptr, bytes: n * rb})
	}
	return runs
}

// rowQueue is where AppendAsync queues its copies: from buf, the staging
// buffer that holds the rows column after column, on st; landed is the
// event after them.
type rowQueue struct {
	sb     device.Streams
	st     device.Stream
	buf    []byte
	landed device.Event
}

// queueCopies queues on st the copies of buf's rows to runs (buf holds
// the columns one after another, as runs lists them), as one piece of work
// where the backend takes a batch (device.BatchCopier), then the event
// after them, which says both that the rows are on the device and that
// the staging buffer is free again; a backend with device.BatchRecorder
// takes the copies and the event in one call (on the host backend, one
// piece of work: docs/BENCHMARKS.md, "Serving paths"). On failure it
// waits for st (so no copy it queued lands later, in blocks the failed
// write gives back) and returns the error: the write is aborted before
// its commit, and changes nothing.
func (h *Head) queueCopies(sb device.Streams, st device.Stream, runs []copyRun, buf []byte) (device.Event, error) {
	if br, ok := sb.(device.BatchRecorder); ok {
		cs := h.copies[:0]
		off := 0
		for _, r := range runs {
			cs = append(cs, device.HostCopy{Dst: r.ptr, Src: buf[off : off+r.bytes]})
			off += r.bytes
		}
		ev, err := br.CopiesHtoDAsyncRecord(st, cs)
		clear(cs)
		h.copies = cs[:0]
		if err != nil {
			return nil, errors.Join(err, st.Sync())
		}
		return ev, nil
	}
	if err := h.queueRuns(sb, st, runs, buf); err != nil {
		return nil, errors.Join(err, st.Sync())
	}
	ev, err := sb.Record(st)
	if err != nil {
		return nil, errors.Join(err, st.Sync())
	}
	return ev, nil
}

// queueRuns queues the copies of queueCopies.
func (h *Head) queueRuns(sb device.Streams, st device.Stream, runs []copyRun, buf []byte) error {
	bc, batch := sb.(device.BatchCopier)
	if !batch || len(runs) == 1 {
		off := 0
		for _, r := range runs {
			if err := sb.CopyHtoDAsync(st, r.ptr, buf[off:off+r.bytes]); err != nil {
				return err
			}
			off += r.bytes
		}
		return nil
	}
	cs := h.copies[:0]
	off := 0
	for _, r := range runs {
		cs = append(cs, device.HostCopy{Dst: r.ptr, Src: buf[off : off+r.bytes]})
		off += r.bytes
	}
	err := bc.CopiesHtoDAsync(st, cs)
	clear(cs)
	h.copies = cs[:0]
	return err
}
