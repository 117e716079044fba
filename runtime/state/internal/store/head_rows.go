package store

import "github.com/gpustate/gpustate/runtime/device"

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
	if err := h.checkAppend("Append", h.r.rows, n); err != nil {
		return err
	}
	from := h.r.rows
	if short, err := h.appendRows("Append", cols, n, nil); err != nil {
		return err
	} else if !short {
		if _, err := h.applyThen("Append", hostAppend, from, from+n, from+n, cols, nil); err != nil {
			return err
		}
	}
	w := written{from: from, to: from + n, host: true}
	if h.share != nil {
		w.key = cols[h.share.key]
	}
	h.committed(w) // a shared group registers here (group_pending.go)
	return nil
}

// Write writes the rows of a batch over rows [at, at+n) of a mutable
// state, as a new version. It needs 0 <= at and at+n <= Bound, else
// ErrRange. Blocks shared with snapshots or branches are copied first;
// blocks the write covers whole are replaced by new ones.
//
//state:mutates
func (h *Head) Write(at int, cols [][]byte) error {
	if err := h.begin("Write"); err != nil {
		return err
	}
	defer h.end()
	n, err := h.batchRows("Write", cols)
	if err != nil {
		return err
	}
	if err := h.checkWrite("Write", at, at+n, h.r.rows); err != nil {
		return err
	}
	if _, err := h.applyThen("Write", hostWrite, at, at+n, h.r.rows, cols, nil); err != nil {
		return err
	}
	h.committed(written{from: at, to: at + n})
	return nil
}

// AppendDevice reserves n rows past the end as a new version and returns,
// per column, the spans where they lie, for a kernel to fill. The spans are
// the caller's to write until the next call on h. Past the bound it returns
// ErrBound and reserves nothing.
//
//state:appends
func (h *Head) AppendDevice(n int) ([][]device.Span, error) {
	if err := h.begin("AppendDevice"); err != nil {
		return nil, err
	}
	defer h.end()
	if err := h.checkAppend("AppendDevice", h.r.rows, n); err != nil {
		return nil, err
	}
	from := h.r.rows
	short, err := h.appendRows("AppendDevice", nil, n, nil)
	var spans [][]device.Span
	switch {
	case err != nil:
		return nil, err
	case short:
		spans, _ = h.spans("AppendDevice", h.r, from, from+n) // in range by construction
	default:
		if spans, err = h.applyThen("AppendDevice", deviceAppend, from, from+n, from+n, nil, nil); err != nil {
			return nil, err
		}
	}
	h.committed(written{from: from, to: from + n, device: true})
	return spans, nil
}

// WriteDevice makes rows [from, to) of a mutable state writable as a new
// version (copying the blocks it shares with snapshots and branches) and
// returns, per column, the spans where they lie, for a kernel to write. The
// spans are the caller's to write until the next call on h.
//
//state:mutates
func (h *Head) WriteDevice(from, to int) ([][]device.Span, error) {
	if err := h.begin("WriteDevice"); err != nil {
		return nil, err
	}
	defer h.end()
	if err := h.checkWrite("WriteDevice", from, to, h.r.rows); err != nil {
		return nil, err
	}
	spans, err := h.applyThen("WriteDevice", deviceWrite, from, to, h.r.rows, nil, nil)
	if err != nil {
		return nil, err
	}
	h.committed(written{from: from, to: to, device: true})
	return spans, nil
}

// Read copies rows [from, to) into dst: per column, (to-from) rows' bytes.
func (h *Head) Read(from, to int, dst [][]byte) error {
	if err := h.begin("Read"); err != nil {
		return err
	}
	defer h.end()
	return h.read("Read", h.r, from, to, dst, false)
}

// ReadColumns copies rows [from, to) into the columns of dst that are not
// nil, as Read does, and reads nothing of the columns dst holds nil for:
// a read of one field copies none of the others. dst has one entry per
// column; each that is not nil holds (to-from) rows' bytes.
func (h *Head) ReadColumns(from, to int, dst [][]byte) error {
	if err := h.begin("ReadColumns"); err != nil {
		return err
	}
	defer h.end()
	return h.read("ReadColumns", h.r, from, to, dst, true)
}

// Spans locates rows [from, to) in device memory: per column, one span per
// block. They are for reading: the blocks may be shared with snapshots and
// branches, so kernels that write use WriteDevice.
//
//state:view
func (h *Head) Spans(from, to int) ([][]device.Span, error) {
	if err := h.begin("Spans"); err != nil {
		return nil, err
	}
	defer h.end()
	return h.spans("Spans", h.r, from, to)
}

// ReadRows copies the rows at indices idx, in that order, into dst: per
// column, len(idx) rows' bytes. Indices may repeat and come in any order
// (a sampled minibatch); each must be a readable row, else ErrRange, or
// ErrExpired below a window's floor, and dst is left unwritten. Runs of
// consecutive indices in one block come in one copy.
func (h *Head) ReadRows(idx []int, dst [][]byte) error {
	if h == nil {
		return errNil("Head", "ReadRows")
	}
	if err := h.begin("ReadRows"); err != nil {
		return err
	}
	defer h.end()
	return h.gather("ReadRows", h.r, idx, dst)
}

// applyThen plans and performs a write of rows [from, to) and commits it
// as a new version with newRows rows. On failure it changes nothing and
// gives back the blocks it took. last, when not nil, is one more step
// before the commit: it gets the runs of device memory where rows [from,
// to) lie in the new version (the async path queues its copies there),
// and its failure aborts the write; the spans are left to the caller then.
func (h *Head) applyThen(op string, kind writeKind, from, to, newRows int, cols [][]byte, last func([]copyRun) error) ([][]device.Span, error) {
	tx := writeTx{h: h, op: op, kind: kind, from: from, to: to}
	if err := tx.admit(); err != nil {
		return nil, err
	}
	tx.ops = tx.plan(cols)
	defer tx.doneOps()
	if err := tx.take(); err != nil {
		return nil, err
	}
	// New blocks and rows past the version's end first, then rows a
	// reader may see: each step changes nothing the steps before it could
	// not undo.
	if err := tx.fillNewBlocks(); err != nil {
		return nil, tx.abort(err)
	}
	if err := tx.writeVisible(); err != nil {
		return nil, tx.abort(err)
	}
	tx.touchOld() // for the cost model (estimate.go)
	if last != nil {
		if err := last(tx.runs()); err != nil {
			return nil, tx.abort(err)
		}
	}
	r := tx.commit(newRows)
	if last == nil && (kind == deviceAppend || kind == deviceWrite) {
		spans, _ := h.spans(op, r, from, to) // in range by construction
		return spans, nil
	}
	return nil, nil
}

// appendRows appends rows [from, from+n) of the batch cols on the short
// path: copied from cols, or, when q is not nil, queued from q's staging
// buffer (AppendAsync), or, with neither, left for a kernel to write
// (AppendDevice). It reports false, having done nothing, when the
// append does not have its shape; on failure it changes nothing and gives
// back the blocks it took.
func (h *Head) appendRows(op string, cols [][]byte, n int, q *rowQueue) (bool, error) {
	r := h.r
	if n <= 0 || len(h.rowBytes) > maxRowCols || !r.unique() {
		return false, nil
	}
	tx := writeTx{h: h, op: op, kind: hostAppend, from: r.rows, to: r.rows + n}
	return tx.appendShort(cols, q)
}
