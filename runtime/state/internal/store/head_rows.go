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
	tx := writeTx{h: h, op: "Append", kind: hostAppend, from: from, to: from + n}
	if short, err := tx.appendRows(cols, nil); err != nil {
		return err
	} else if !short {
		if _, err := tx.apply(from+n, cols, nil); err != nil {
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
// blocks the write covers whole are replaced by new ones, but on host
// memory, where the head's own are written in place.
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
	tx := writeTx{h: h, op: "Write", kind: hostWrite, from: at, to: at + n}
	if _, err := tx.apply(h.r.rows, cols, nil); err != nil {
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
	tx := writeTx{h: h, op: "AppendDevice", kind: deviceAppend, from: from, to: from + n}
	short, err := tx.appendRows(nil, nil)
	var spans [][]device.Span
	switch {
	case err != nil:
		return nil, err
	case short:
		spans, _ = h.spans("AppendDevice", h.r, from, from+n) // in range by construction
	default:
		if spans, err = tx.apply(from+n, nil, nil); err != nil {
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
	tx := writeTx{h: h, op: "WriteDevice", kind: deviceWrite, from: from, to: to}
	spans, err := tx.apply(h.r.rows, nil, nil)
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
	return h.read("Read", h.r, from, to, dst, false, &h.reads)
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
	return h.read("ReadColumns", h.r, from, to, dst, true, &h.reads)
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
	return h.gather("ReadRows", h.r, idx, dst, &h.reads)
}

// AppendAsync appends the rows of a batch as a new version, as Append
// does, but copies them to the device on st: the batch is copied to
// page-locked staging memory (so the caller may reuse it at once), the
// copies are queued on st, one per run of blocks that follow one another
// in memory, then one event, and the blocks they fill are recorded on st.
// Work queued on st after the call sees the rows; work on another stream
// must wait for an event recorded on st. Every later call on h other than
// AppendAsync and ReadAsync (Read, Spans, Snapshot, Branch, writes) first
// waits for the copies to land, so it sees the rows. It needs a backend
// with device.Streams; a stream that is closed or foreign is an error and
// appends nothing. A call that fails changes nothing, so it may be retried:
// the copies and their event are queued before the version is committed,
// and when one of them fails the call waits for st (the failure path
// alone blocks) and gives back the blocks it took.
//
//state:appends
func (h *Head) AppendAsync(st device.Stream, cols [][]byte) error {
	if err := h.open(call{op: "AppendAsync", share: true}); err != nil { // not land: the stream orders earlier copies
		return err
	}
	defer h.end()
	return h.async.appendAsync(h, st, cols)
}

// ReadAsync queues on st copies of rows [from, to) into dst (per column,
// (to-from) rows' bytes) and records the blocks they come from on st. dst
// must stay untouched until an event recorded on st after the call
// completes; memory from the backend's HostAlloc makes the copies truly
// asynchronous.
//
// Rows an earlier AppendAsync queued on another stream are read in stream
// order too: the call makes st wait for those copies' events
// (device.Streams.WaitEvent) before its own, and never blocks the caller.
func (h *Head) ReadAsync(st device.Stream, from, to int, dst [][]byte) error {
	if err := h.open(call{op: "ReadAsync", share: true}); err != nil { // not land: the streams order earlier copies
		return err
	}
	defer h.end()
	if err := h.async.order(h.pool.b, st); err != nil {
		return h.errorf("ReadAsync", "%w", err)
	}
	return h.queueReads("ReadAsync", h.r, st, from, to, dst)
}

// BlockTable returns a device-resident table of the head's blocks, kept
// current by the head's writes, rollbacks and merges until it or the head
// is released. A kernel queued with it reads the blocks of the version it
// was queued at (see BlockTable): record its stream on the head.
//
//state:acquire
func (h *Head) BlockTable() (*BlockTable, error) {
	if err := h.begin("BlockTable"); err != nil {
		return nil, err
	}
	defer h.end()
	t, err := h.tables.add(h)
	if err != nil {
		return nil, h.errorf("BlockTable", "%w", err)
	}
	return t, nil
}

// RecordStream says that work queued on st uses the rows h holds now: the
// blocks that hold them are not reused, zeroed for another owner or freed
// until that work has completed, whatever happens to h meanwhile. It needs
// a backend with device.Streams; it never waits. One that fails records
// nothing, as a failed call changes nothing: its caller waits for the work
// on st before the next call on h.
func (h *Head) RecordStream(st device.Stream) error {
	// No registration of kernel-written blocks at the start of this call:
	// the kernel st runs may be the one writing them (docs/INTERNALS.md).
	// The stream is checked before the opening, which may take the
	// history's copy of a kernel's rows: a call that fails changes nothing.
	// A released or invalidated head says so first, as every call does.
	// The check's event, after the work queued on st so far, marks where
	// the kernels of a device write just before end (kernelRows.queued).
	var ev device.Event
	if h != nil && h.pool != nil {
		if err := h.usable("RecordStream"); err != nil {
			return err
		}
		var err error
		if ev, err = recordOn(h.pool.b, st); err != nil {
			return h.errorf("RecordStream", "%w", err)
		}
	}
	if err := h.open(call{op: "RecordStream", land: true, st: st}); err != nil {
		if ev != nil {
			ev.Close()
		}
		return err
	}
	defer h.end()
	if k := h.async.kern; k != nil && k.fresh != (rowRange{}) {
		k.queued(h, st, ev) // keeps ev
	} else {
		ev.Close()
	}
	// A decode step records its stream once a step: only the blocks the
	// head took since the last time are walked (streamMark), not the
	// whole state.
	h.pool.rec.addFrom(h.r, st, h.async.mark(st, len(h.r.cols)))
	h.async.join(h)
	h.async.streams.add(st)
	if h.share != nil && h.share.tab != nil && !h.share.broken {
		h.share.markWritten(h, h.async.streams.get()) // rows a kernel queued before this call writes
	}
	if h.gshare != nil && len(h.gshare.pending) > 0 {
		h.gshare.settle(h, true) // a group's, likewise
	}
	return nil
}

// Prefetch starts bringing the head's version back from the host tier,
// where the pool moved it under memory pressure, before a call needs it:
// the copies are queued on the tier's stream and the call returns without
// waiting for them (where the backend has streams); the next call that
// needs the rows waits for them, if they have not landed by then. A head
// in device memory answers nil at once; a released head ErrReleased; with
// no room in device memory it answers the error and stays in the tier.
func (h *Head) Prefetch() error {
	if err := h.open(call{op: "Prefetch"}); err != nil {
		return err
	}
	h.end()
	return nil
}
