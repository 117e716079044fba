package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// A kernel writes rows a device write handed it while other features act
// on the state: a checkpoint shares its block (At, the rebuild of an
// evicted head), a host write, a rollback, a release or a move to the
// host tier follows. Each holds the kernel's stream back until the call
// under test has begun.

// recordedHead returns a head of p of layout l and a new stream recorded
// on it while it holds no row; both go when t ends.
func recordedHead(t *testing.T, r *statetest.StreamRig, p *Pool, l *Layout) (*Head, device.Stream) {
	h := must[*Head](t)(p.NewHead(l, "s"))
	st := must[device.Stream](t)(r.Streams().NewStream())
	t.Cleanup(func() {
		st.Close()
		h.Release()
	})
	check(t, h.RecordStream(st))
	return h, st
}

// fillOn launches the fill kernel over spans on st.
func fillOn(t *testing.T, r *statetest.StreamRig, st device.Stream, spans [][]device.Span, v byte) {
	t.Helper()
	for _, sp := range spans[0] {
		check(t, r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, sp.Ptr, uint32(v), uint64(sp.Rows*keepRowBytes)))
	}
}

// oneRow is a batch of one row of bytes v.
func oneRow(v byte) [][]byte { return [][]byte{bytes.Repeat([]byte{v}, keepRowBytes)} }

// TestKernelRowsAtSeedsFromCheckpointBeforeKernel: a checkpoint taken at
// the call after an AppendDevice shares the block whose rows the kernel is
// still writing. An append in place (claim) makes a later version whose
// delta touches that block; At of it copies the checkpoint's block on
// write, which waits for the kernel: the snapshot At returns holds the
// kernel's rows. (Its first At calibrates the cost model, which on the
// host backend waits for no stream.)
func TestKernelRowsAtSeedsFromCheckpointBeforeKernel(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
	defer p.Close()
	l := keepLayout(false, Append)
	l.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 1}
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	check(t, h.Append(oneRow(0x11)))
	check(t, h.Append(oneRow(0x12)))
	st := must[device.Stream](t)(r.Streams().NewStream())
	defer st.Close()
	release := holdFor(t, r, st, 50*time.Millisecond) // At waits for the kernel
	fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(2)), 0x5a)
	check(t, h.RecordStream(st))
	check(t, h.Append(oneRow(0x33)))
	v3 := h.Version()
	check(t, h.Append(oneRow(0x44)))
	if plan := must[Plan](t)(h.Plan(v3)); plan.Candidate.Checkpoint != v3-1 {
		t.Fatalf("plan seeds from %d, want the checkpoint at %d", plan.Candidate.Checkpoint, v3-1)
	}
	s := must[*Snap](t)(h.At(v3))
	defer s.Release()
	release()
	check(t, st.Sync())
	keptRows(t, h, 0x11, 0x12, 0x5a, 0x5a, 0x33, 0x44)
	keptRows(t, s, 0x11, 0x12, 0x5a, 0x5a, 0x33)
}

// TestKernelRowsRebuildSeedsFromCheckpointBeforeKernel: as At above, for the
// head itself: a reconstructable head evicted under memory pressure while
// the kernel of its device append has not run is rebuilt, at its next
// call, from the checkpoint that shares the kernel's block and the delta
// of an append in place after it, after the kernel: the rebuilt head reads
// the kernel's rows.
func TestKernelRowsRebuildSeedsFromCheckpointBeforeKernel(t *testing.T) {
	r := statetest.HostStreamRig(t)
	const bb = keepRows * keepRowBytes
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: bb, MaxBytes: 16 * bb}))
	defer p.Close()
	l := keepLayout(false, Append)
	l.Bound = 2 * keepRows
	l.Retention = Reconstructable
	l.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 1}
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	check(t, h.Append(oneRow(0x11)))
	check(t, h.Append(oneRow(0x12)))
	st := must[device.Stream](t)(r.Streams().NewStream())
	defer st.Close()
	release := holdFor(t, r, st, 5*time.Second)
	fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(2)), 0x5a)
	check(t, h.RecordStream(st)) // the checkpoint of the device append's version
	// Rows 4..7 claimed in the checkpoint's tail block, row 8 in a block
	// of the head's alone.
	check(t, h.Append([][]byte{bytes.Repeat([]byte{0x33}, 5*keepRowBytes)}))
	// Memory pressure: another state takes every block but one.
	ol := keepLayout(false, Append)
	ol.Bound = 64 * keepRows
	o := must[*Head](t)(p.NewHead(ol, "o"))
	defer o.Release()
	for i := 0; !h.evicted && i < 64*keepRows; i++ {
		check(t, o.Append(oneRow(0x77)))
	}
	if !h.evicted {
		t.Fatal("the head was not evicted")
	}
	check(t, o.Release())
	time.AfterFunc(50*time.Millisecond, release)                 // the rebuild waits for the kernel
	check(t, h.Read(0, 1, [][]byte{make([]byte, keepRowBytes)})) // rebuilt
	release()
	check(t, st.Sync())
	keptRows(t, h, 0x11, 0x12, 0x5a, 0x5a, 0x33, 0x33, 0x33, 0x33, 0x33)
}

// TestKernelRowsHostWriteInPlaceUnderKernel: the kernel's stream was
// recorded on the head before WriteDevice copied the block a snapshot
// shared, into a new block. The call after the device write records the
// stream on that block too (kernelRows.queued), so a host write of one of the
// kernel's rows, a later version, is not made in place, where the queued
// kernel would write over it: it copies the block after the kernel, and
// the head reads the host write's row.
func TestKernelRowsHostWriteInPlaceUnderKernel(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		defer p.Close()
		h := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
		defer h.Release()
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
		check(t, h.RecordStream(st))
		// WriteDevice copies the block a snapshot shares: its new block
		// carries no stream; then the snapshot goes.
		s := must[*Snap](t)(h.Snapshot())
		release := holdFor(t, r, st, 100*time.Millisecond)
		fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(0, 3)), 0x5a)
		check(t, s.Release())
		check(t, h.Write(1, oneRow(0x22)))
		release()
		check(t, st.Sync())
		keptRows(t, h, 0x5a, 0x22, 0x5a, 0x11, 0x11, 0x11, 0x11, 0x11)
	})
}

// TestKernelRowsReleaseFreesBlockUnderKernel: the kernel of an
// AppendDevice is on a stream recorded on the head before the block was
// taken. The head is released while the kernel has not run: its block
// goes to no other head (of the same owner: no zeroing) until the kernel
// ran, else the kernel would write that head's rows.
func TestKernelRowsReleaseFreesBlockUnderKernel(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		t.Cleanup(func() { check(t, p.Close()) })
		h, st := recordedHead(t, r, p, keepLayout(false, Append))
		release := holdFor(t, r, st, 5*time.Second)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.Read(0, 1, [][]byte{make([]byte, keepRowBytes)})) // the next call
		check(t, h.Release())
		o := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		defer o.Release()
		check(t, o.Append([][]byte{bytes.Repeat([]byte{0x77}, keepRows*keepRowBytes)}))
		release()
		check(t, st.Sync())
		keptRows(t, o, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77)
	})
}

// TestKernelRowsRollbackLowersTailUnderKernel: an AppendDevice claims rows
// past a snapshot's in the tail block, on a stream recorded on the head
// before the block was taken. A rollback to the snapshot, the call after,
// keeps the block's fill (lowerTails lowers none a stream may use) while
// the kernel has not run, so the next append copies the block rather than
// write its row where the kernel then writes: the head reads the append's
// row.
func TestKernelRowsRollbackLowersTailUnderKernel(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		t.Cleanup(func() { check(t, p.Close()) })
		h, st := recordedHead(t, r, p, keepLayout(false, Append))
		check(t, h.Append(oneRow(0x11)))
		s := must[*Snap](t)(h.Snapshot())
		defer s.Release()
		release := holdFor(t, r, st, 100*time.Millisecond)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(2)), 0x5a)
		check(t, h.Rollback(s))
		check(t, h.Append(oneRow(0x33)))
		release()
		check(t, st.Sync())
		keptRows(t, h, 0x11, 0x33)
		keptRows(t, s, 0x11)
	})
}

// TestKernelRowsTierMoveOut: the kernel's stream was recorded
// on the head before AppendDevice (before it held any block); the call
// after (Prefetch here) records it on the kernel's block. A move to the
// host tier under memory pressure then copies the head's blocks after the
// kernel and frees them only after it, so another owner's rows never meet
// the kernel's writes, and the head, brought back, reads the kernel's
// rows.
func TestKernelRowsTierMoveOut(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes, MaxBytes: 2 * keepRows * keepRowBytes, HostTier: 64 << 10}))
	t.Cleanup(func() { check(t, p.Close()) })
	l := keepLayout(false, Append)
	l.Retention = Optional
	h, st := recordedHead(t, r, p, l)
	release := holdFor(t, r, st, 100*time.Millisecond) // the move out waits for the kernel
	fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
	check(t, h.Prefetch()) // the call after: the kernel is queued
	if k := h.async.kern; k == nil || !k.rows.overlaps(0, 3) {
		t.Fatalf("the head keeps kernel rows %+v, want [0, 3)", k)
	}
	// Memory pressure: another state takes the pool's every block.
	ol := keepLayout(false, Append)
	ol.Bound = 2 * keepRows
	o := must[*Head](t)(p.NewHead(ol, "o"))
	defer o.Release()
	for i := 0; i < 2*keepRows; i++ {
		check(t, o.Append(oneRow(0x77)))
	}
	st0 := p.Stats()
	t.Logf("tier out %d bytes, evictions %d", st0.TierOut, st0.Evictions)
	if st0.TierOut == 0 {
		t.Fatal("the head did not move to the tier")
	}
	release()
	check(t, st.Sync())
	ow := bytes.Repeat([]byte{0x77}, o.Len())
	ow2 := make([]byte, o.Len())
	got := make([]byte, o.Len()*keepRowBytes)
	check(t, o.Read(0, o.Len(), [][]byte{got}))
	for i := range ow2 {
		ow2[i] = got[i*keepRowBytes]
	}
	if !bytes.Equal(ow, ow2) {
		t.Errorf("another owner's rows read %x: the kernel wrote the blocks the move freed", ow2)
	}
	check(t, o.Release())
	keptRows(t, h, 0x5a, 0x5a, 0x5a)
}
