package store

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"time"
	"unsafe"

	"github.com/gpustate/gpustate/runtime/device"
)

// Replay: history as inputs. A recurrent state rewrites all of its rows
// every step from the rows before and a small input; Step keeps such a
// version's delta as the input and the step function instead of the rows
// it wrote, and At rebuilds a version by seeding from a checkpoint and
// running the recorded steps again, in order (docs/INTERNALS.md). History
// memory is then the checkpoints plus the inputs.

// replaySeed seeds the row hashes of verify: fixed for the process, so a
// hash recorded by Step compares with one computed by At.
var replaySeed = maphash.MakeSeed()

// run runs f on h's rows the spans locate, with input in. It sets
// *touched before anything may write the rows: a device step writes
// them, a host step where they are handed to it in place or copied back.
// Until then, however the call ends (an error, a panic, the goroutine's
// end), the rows are as they were.
func (f stepFunc) run(h *Head, spans [][]device.Span, in [][]byte, touched *bool) error {
	if f.host != nil {
		return h.hist.runHost(h, f.host, spans, in, touched)
	}
	*touched = true
	return f.dev.Step(spans, in)
}

// runHost runs f, a host step, on the rows the spans locate: per column,
// the bytes in place where the backend gives them (one run of host
// memory), else a copy out before f and back after it. The slices handed
// to f are x's, kept for the next step (so that a step allocates
// nothing on the host backend); the copies are the call's own. x's head's
// lock guards them, as it does the rest of x. It sets *touched as
// stepFunc.run says.
func (x *history) runHost(h *Head, f HostStepper, spans [][]device.Span, in [][]byte, touched *bool) error {
	b, rowBytes, n := h.pool.b, h.rowBytes, len(spans)
	cols := slices.Grow(x.hostCols[:0], 2*n)[:2*n]
	x.hostCols = cols
	defer clear(cols) // neither the rows nor the step's own slices are kept
	dst, rows := cols[:n:n], cols[n:]
	copied := slices.Grow(x.hostCopied[:0], n)[:n] // column c's rows are a copy
	x.hostCopied = copied
	clear(copied)
	for c, ss := range spans {
		k := 0
		for _, sp := range ss {
			k += sp.Rows * rowBytes[c]
		}
		if mem, ok := inPlace(b, ss, rowBytes[c], k); ok {
			dst[c], rows[c] = mem, mem
			continue
		}
		buf := make([]byte, k)
		if err := eachSpan(ss, rowBytes[c], buf, func(p device.Ptr, part []byte) error { return b.CopyDtoH(part, p) }); err != nil {
			return err // the step has not run
		}
		dst[c], rows[c], copied[c] = buf, buf, true
	}
	// Until the copies back, the state's rows are as they were, unless
	// the step is handed some in place.
	*touched = slices.Contains(copied, false)
	if err := f.StepHost(rows, in); err != nil {
		return err
	}
	for c := range spans {
		if len(rows[c]) != len(dst[c]) {
			return fmt.Errorf("the step left %d bytes of column %d, the state holds %d: %w", len(rows[c]), c, len(dst[c]), ErrShape)
		}
		if len(dst[c]) == 0 || &rows[c][0] == &dst[c][0] {
			continue
		}
		for j := range dst {
			if j != c && overlap(rows[c], dst[j]) {
				// Another column's rows (two columns swapped): copied
				// aside first, as the column before may overwrite them.
				rows[c] = bytes.Clone(rows[c])
				break
			}
		}
	}
	*touched = true
	for c, ss := range spans {
		if len(dst[c]) > 0 && &rows[c][0] != &dst[c][0] {
			copy(dst[c], rows[c])
		}
		if !copied[c] {
			continue
		}
		if err := eachSpan(ss, rowBytes[c], dst[c], func(p device.Ptr, part []byte) error { return b.CopyHtoD(p, part) }); err != nil {
			return err
		}
	}
	return nil
}

// overlap reports whether a and b share a byte.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

// eachSpan calls do with each span of ss and its part of buf, which
// holds the spans' rows one after another.
func eachSpan(ss []device.Span, rowBytes int, buf []byte, do func(device.Ptr, []byte) error) error {
	off := 0
	for _, sp := range ss {
		k := sp.Rows * rowBytes
		if err := do(sp.Ptr, buf[off:off+k]); err != nil {
			return err
		}
		off += k
	}
	return nil
}

// inPlace returns the n bytes of the spans ss as one slice of host memory
// where the backend's memory is the host's and the spans follow one
// another in it.
func inPlace(b device.Backend, ss []device.Span, rowBytes, n int) ([]byte, bool) {
	if len(ss) == 0 {
		return nil, false
	}
	for i := 1; i < len(ss); i++ {
		if ss[i].Ptr != ss[i-1].Ptr+device.Ptr(ss[i-1].Rows*rowBytes) {
			return nil, false
		}
	}
	return device.HostBytes(b, ss[0].Ptr, n)
}

// step is StepWith once its call is begun and the head checked: h
// keeps this history, and f is not nil.
func (x *history) step(h *Head, in [][]byte, verify bool, f stepFunc) error {
	if err := x.checkInput(h, in); err != nil {
		return err
	}
	d := x.newStep(in)
	rec := d.step
	rec.f, rec.verify, rec.state = f, verify, h.rowSum*int64(h.r.rows)
	kept := false
	defer func() {
		if !kept {
			x.dropStep(d) // no entry holds it: the record is free again
		}
	}()
	var guard *root // holds the version before when no replay can rebuild it
	if _, _, ok := h.lru.rebuildPath(h); !ok {
		guard = h.r.retain()
	}
	defer func() {
		if guard != nil {
			var freed []*block
			guard.release(&freed)
			h.pool.free(freed)
		}
	}()
	rows := h.r.rows
	tx := writeTx{h: h, op: "Step", kind: stepWrite, from: 0, to: rows}
	tx.ops = tx.plan(nil)
	defer tx.doneOps()
	if err := tx.take(); err != nil {
		return err
	}
	if err := tx.fillNewBlocks(); err != nil {
		return tx.abortStep(err, false) // the step has not run
	}
	spans := tx.spans()
	start := monotonic()
	ran, touched := false, false
	defer func() {
		if !ran {
			// The step function ended the goroutine (runtime.Goexit, as
			// t.FailNow does): neither a return nor a panic, and what
			// it wrote in place must not stay.
			tx.abortStep(errStepExited, touched)
		}
	}()
	ferr, panicked := runStep(h, f, spans, rec.in, &touched)
	ran = true
	rec.took = monotonic() - start
	if panicked != nil {
		tx.abortStep(ferr, touched)
		panic(panicked.v) // the head is as before; the panic is the caller's
	}
	if ferr != nil {
		ferr = fmt.Errorf("the step function failed: %w", ferr)
	} else if verify {
		if rec.hash, ferr = h.hist.hashRows(h, spans); ferr != nil {
			ferr = fmt.Errorf("hashing the rows the step produced: %w", ferr)
		}
	}
	if ferr != nil {
		return tx.abortStep(ferr, touched)
	}
	tx.commit(rows)
	d.to = rows
	kept = true
	h.hist.addEntry(h, entry{pos: h.pos, rows: rows, d: d, seq: commitSeqs.Add(1)})
	return nil
}

// checkInput answers ErrShape for a step input that is not of the input
// columns of h's layout.
func (x *history) checkInput(h *Head, in [][]byte) error {
	cols := h.l.Input
	if cols == nil {
		return nil
	}
	if len(in) != len(cols) {
		return h.errorf("Step", "an input of %d columns, not %d: %w", len(in), len(cols), ErrShape)
	}
	for i, c := range cols {
		if rb := c.ElemSize * c.Width; len(in[i])%rb != 0 { // rb > 0: Layout.check
			return h.errorf("Step", "input column %s has %d bytes, not a multiple of its %d-byte row: %w", c.Name, len(in[i]), rb, ErrShape)
		}
	}
	return nil
}

// errStepExited is what a step call is undone for when its step function
// ends the goroutine (runtime.Goexit) instead of returning; no caller
// sees it.
var errStepExited = errors.New("the step function ended its goroutine")

// stepPanic carries the value a step function panicked with.
type stepPanic struct{ v any }

// runStep runs f on h's rows, turning a panic into an error (and the
// value to panic on with once the write is undone).
func runStep(h *Head, f stepFunc, spans [][]device.Span, in [][]byte, touched *bool) (err error, p *stepPanic) {
	defer func() {
		if v := recover(); v != nil {
			p = &stepPanic{v}
			err = fmt.Errorf("the step function panicked: %v", v)
		}
	}()
	return f.run(h, spans, in, touched), nil
}

// abortStep is writeTx.abort for a step: the write's blocks given back
// (undo), and the version before rebuilt where the step function may
// have written rows in place (touched: stepFunc.run; restoreInPlace).
func (tx *writeTx) abortStep(err error, touched bool) error {
	back := tx.undo(nil)
	if touched {
		var rerr error
		if back, rerr = restoreInPlace(tx, back); rerr != nil {
			err = fmt.Errorf("%w; rebuilding the version before it: %w", err, rerr)
		}
	}
	tx.h.pool.free(back)
	return tx.h.errorf(tx.op, "%w", err)
}

// restoreInPlace gives h back the rows of its version after a write
// whose caller wrote rows in place (a step function) failed: it rebuilds
// the version from its checkpoint by replay, into the blocks the caller
// wrote and those the write took, so that the rebuild needs no memory the
// head did not hold (a full pool, or freed blocks waiting behind a
// recorded kernel, cannot fail it). When nothing was written in place it
// does nothing. When the rebuild fails all the same (a backend fault) the
// head keeps its history and is rebuilt, whatever its retention, at the
// start of its next call, which answers the error while it fails: the
// version is never lost.
func restoreInPlace(tx *writeTx, spare []*block) ([]*block, error) {
	h := tx.h
	inPlace := false
	for i := range tx.ops {
		if tx.ops[i].nb == nil {
			inPlace = true
			break
		}
	}
	if !inPlace {
		return spare, nil
	}
	// The blocks the write copied instead of writing in place hold the
	// version's rows still: the rebuilt version takes them back rather
	// than its own copies of them, which would cost the blocks it
	// shared with the holders that made the write copy them.
	intact := func(keep func(o *blockOp)) {
		for i := range tx.ops {
			if o := &tx.ops[i]; o.nb != nil && o.old != nil {
				keep(o)
			}
		}
	}
	intact(func(o *blockOp) { o.old.Retain() })
	h.r.release(&spare) // the blocks only h held: those the caller wrote
	h.r = nil
	lost := func(freed *[]*block) {
		intact(func(o *blockOp) { releaseBlock(o.old, freed) })
		h.r, h.evicted, h.lost = nil, true, true
		awayLogical(h)
	}
	rebuilt := false
	defer func() {
		if !rebuilt {
			// A replayed step function ended the goroutine
			// (runtime.Goexit); the reconstruction gave back the
			// spares.
			var freed []*block
			lost(&freed)
			h.pool.free(freed)
		}
	}()
	q, t, _ := h.lru.rebuildPath(h) // Step took a guard where there is none
	r, spare, err := h.hist.reconstructInto(h, q, t, spare)
	rebuilt = true
	if err != nil {
		lost(&spare)
		return spare, err
	}
	intact(func(o *blockOp) {
		if r.cols[o.col].get(o.idx) == o.old {
			releaseBlock(o.old, &spare)
		} else {
			r.cols[o.col].set(o.idx, o.old, &spare) // takes the reference taken above
		}
	})
	h.r = r
	h.setLogical() // brings block tables up to date
	return spare, nil
}

// replayStep runs the step of d again on r, a root the caller holds and
// nobody else changes, after copying the blocks r shares (apply with a
// step delta copies and writes nothing). With verify it checks the rows
// against the hash Step recorded. On failure the caller still holds a
// root to release.
func (rc *reconstruction) replayStep(rp **root, d *delta, rows int) error {
	h := rc.h
	r, err := rc.apply(*rp, d, rows, rc.take)
	*rp = r // the root to give back, whatever happens next
	if err != nil {
		return err
	}
	x := h.hist
	spans, all, err := h.spansInto("At", r, 0, rows, x.replayCols, x.replaySpans)
	x.replayCols, x.replaySpans = spans, all
	if err != nil {
		return err
	}
	rec := d.step
	start := monotonic()
	// A panic of the step function is the error of the call that
	// replays it (At, a rollback's or a rebuild's replay, a failed
	// step's restore): unwound, it would leave that call's locks held
	// and what the replay took unreturned.
	var touched bool // a failed replay gives its root back whole
	err, panicked := runStep(h, rec.f, spans, rec.in, &touched)
	h.hist.replayed += monotonic() - start
	switch {
	case panicked != nil:
		return fmt.Errorf("replaying a step: %w", err)
	case err != nil:
		return fmt.Errorf("replaying a step: the step function failed: %w", err)
	}
	if rec.verify {
		sum, err := h.hist.hashRows(h, spans)
		if err != nil {
			return fmt.Errorf("replaying a step: hashing its rows: %w", err)
		}
		if sum != rec.hash {
			return fmt.Errorf("replaying a step: its rows hash to %#016x, the step recorded %#016x (a step function that is not deterministic): %w",
				sum, rec.hash, ErrReplayDiverged)
		}
	}
	return nil
}

// hashRows returns the 64-bit hash of the rows of h spans locate, column
// by column in row order, read back from the device.
func (x *history) hashRows(h *Head, spans [][]device.Span) (uint64, error) {
	var m maphash.Hash
	m.SetSeed(replaySeed)
	buf := x.stock.takeHashBuf()
	for c, col := range spans {
		rb := h.rowBytes[c]
		for _, sp := range col {
			n := sp.Rows * rb
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			if err := h.pool.b.CopyDtoH(buf[:n], sp.Ptr); err != nil {
				return 0, err
			}
			m.Write(buf[:n])
		}
	}
	x.stock.putHashBuf(buf)
	return m.Sum64(), nil
}

// reconstruct returns a new root for entry t of x, h's history: entry q's
// checkpoint with the deltas of entries q+1..t applied. Under memory
// pressure it takes every block the deltas still need in one allocation
// (reconstruction.reserve), so that pressure fails it, or evicts for it,
// once: block by block, a later delta could fail after an earlier one's
// allocation had evicted others' state. On failure it gives back every
// block it took.
func (x *history) reconstruct(h *Head, q, t int) (*root, error) {
	r, spare, err := x.reconstructInto(h, q, t, nil)
	h.pool.free(spare)
	return r, err
}

// reconstructInto is reconstruct taking its blocks from spare first (the
// head's own blocks, which it writes without zeroing), and returns the
// spares it did not use, with those of a failed rebuild, for the caller
// to keep or free.
func (x *history) reconstructInto(h *Head, q, t int, spare []*block) (*root, []*block, error) {
	if k := h.async.kern; k != nil && k.rows != (rowRange{}) {
		// A checkpoint may share the blocks of rows a kernel is still
		// writing, which the copies below would read before it.
		k.wait()
	}
	rc := &reconstruction{h: h, q: q, t: t, spare: spare}
	rc.taken = rc.inline[:0]
	defer rc.giveBack()
	r := x.entries[q].cp.retain()
	done := false
	defer func() {
		if !done {
			// A replayed step function ended the goroutine
			// (runtime.Goexit): no caller takes the root or the spares.
			r.release(&rc.spare)
			h.pool.free(rc.spare)
		}
	}()
	for j := q + 1; j <= t; j++ {
		var err error
		d := x.entries[j].d
		if d.step != nil {
			err = rc.replayStep(&r, d, x.entries[j].rows)
		} else {
			r, err = rc.apply(r, d, x.entries[j].rows, rc.take)
		}
		if err != nil {
			r.release(&rc.spare)
			done = true
			return nil, rc.spare, err
		}
	}
	done = true
	return r, rc.spare, nil
}

// rebuild gives h, an evicted reconstructable head, its version back from
// x, its checkpoints and deltas. x is nil for a head that keeps no
// history: it answers ErrEvicted. h.mu is held.
func (x *history) rebuild(h *Head, op string) error {
	if h.evictedForGood() {
		return h.errorf(op, "%w", ErrEvicted)
	}
	q, t, ok := h.lru.rebuildPath(h)
	if !ok {
		return h.errorf(op, "rebuilding evicted version %d: %w", h.pos.v, ErrNotRetained)
	}
	r, err := x.reconstruct(h, q, t)
	if err != nil {
		return h.errorf(op, "rebuilding evicted version %d: %w", h.pos.v, err)
	}
	h.r, h.evicted, h.lost = r, false, false
	h.pool.rebuiltBytes.Add(exclusiveBytes(r))
	h.moved()
	return nil
}

// monotonicBase is the instant monotonic counts from.
var monotonicBase = time.Now()

// monotonic returns the time since monotonicBase by the monotonic clock
// alone: a step times its function on every call, and time.Now reads the
// wall clock too, half again the cost of a reading.
func monotonic() time.Duration { return time.Since(monotonicBase) }
