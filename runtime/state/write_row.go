package state

import "github.com/gpustate/gpustate/runtime/device"

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
// each column (dst[c], which holds them whole), column after column.
func (h *Head) rowRuns(runs []copyRun, dst []*block, from, n int) []copyRun {
	for c, b := range dst {
		rb := h.rowBytes[c]
		runs = append(runs, copyRun{ptr: b.Ptr() + device.Ptr(from%h.perBlock[c]*rb), bytes: n * rb})
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
