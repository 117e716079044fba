package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
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

// pressedIntact has another owner append up to three blocks of 0x77
// rows into p, pressing its memory (moves to the host tier, evictions),
// then lets the held kernel run (release, then st's Sync), and fails
// unless that owner reads its own rows: the kernel wrote no block the
// pool handed it.
func pressedIntact(t *testing.T, p *Pool, release func(), st device.Stream) {
	t.Helper()
	ol := keepLayout(false, Append)
	ol.Bound = 3 * keepRows
	o := must[*Head](t)(p.NewHead(ol, "o"))
	defer o.Release()
	for i := 0; i < 3*keepRows; i++ {
		if err := o.Append(oneRow(0x77)); err != nil {
			t.Logf("append %d: %v", i, err)
			break
		}
	}
	t.Logf("tier out %d", p.Stats().TierOut)
	release()
	check(t, st.Sync())
	got := make([]byte, o.Len()*keepRowBytes)
	check(t, o.Read(0, o.Len(), [][]byte{got}))
	if !bytes.Equal(got, bytes.Repeat([]byte{0x77}, len(got))) {
		t.Errorf("another owner's rows overwritten")
	}
}

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
	p := keepPool(t, r)
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

// TestKernelRowsHostWriteInPlaceUnderKernel: the kernel's stream (of one
// or two) was recorded on the head before WriteDevice copied the block a
// snapshot shared, into a new block. The device write records the head's
// streams on that block too, so a host write of one of the kernel's rows,
// a later version, is not made in place, where the queued kernel would
// write over it: it copies the block after the kernel, and the head reads
// the host write's row.
func TestKernelRowsHostWriteInPlaceUnderKernel(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		for _, n := range []int{1, 2} { // with two, the kernel is on the second
			t.Run(fmt.Sprint("streams=", n), func(t *testing.T) {
				h, _ := keepHead(t, r, keepPool(t, r), false, Mutable)
				var st device.Stream
				for range n {
					st = must[device.Stream](t)(r.Streams().NewStream())
					t.Cleanup(func() { st.Close() })
					check(t, h.RecordStream(st))
				}
				// WriteDevice copies the block a snapshot shares into a
				// new one; then the snapshot goes.
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
	})
}

// TestKernelRowsReleaseFreesBlockUnderKernel: the kernel of an
// AppendDevice is on a stream recorded on the head before the block was
// taken. The head is released while the kernel has not run: its block
// goes to no other head (of the same owner: no zeroing) until the kernel
// ran, else the kernel would write that head's rows.
func TestKernelRowsReleaseFreesBlockUnderKernel(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		h, st := recordedHead(t, r, p, keepLayout(false, Append))
		release := holdFor(t, r, st, 5*time.Second)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.Read(0, 1, [][]byte{make([]byte, keepRowBytes)})) // the next call
		check(t, h.Release())
		reusedIntact(t, p, release, st)
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
		p := keepPool(t, r)
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

// TestKernelRowsTierMoveOut: the kernel's stream was recorded on the
// head before AppendDevice (before it held any block); the device write
// records it on the kernel's block. A move to the
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

// TestKernelReleaseRightAfterAppendDevice: the stream is recorded on the
// head before it holds a block; AppendDevice takes a new block for the
// kernel, and Release is the next call on the head (the spans are the
// caller's "until the next call"). The kernel is queued by then, so the
// block must not go to another head until it ran.
func TestKernelReleaseRightAfterAppendDevice(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		h, st := recordedHead(t, r, p, keepLayout(false, Append))
		release := holdFor(t, r, st, 5*time.Second)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.Release()) // the next call
		reusedIntact(t, p, release, st)
	})
}

// TestKernelReleaseRightAfterWriteDeviceCopy: as above for WriteDevice that
// copies a block a snapshot shares; the snapshot and then the head are
// released, the head's release being the call after the device write.
func TestKernelReleaseRightAfterWriteDeviceCopy(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		h, st := keepHead(t, r, p, false, Mutable)
		check(t, h.RecordStream(st))
		s := must[*Snap](t)(h.Snapshot())
		release := holdFor(t, r, st, 5*time.Second)
		fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(0, 3)), 0x5a)
		check(t, h.Release())
		check(t, s.Release())
		o := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
		defer o.Release()
		check(t, o.Write(0, [][]byte{bytes.Repeat([]byte{0x77}, keepRows*keepRowBytes)}))
		o2 := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
		defer o2.Release()
		check(t, o2.Write(0, [][]byte{bytes.Repeat([]byte{0x78}, keepRows*keepRowBytes)}))
		release()
		check(t, st.Sync())
		keptRows(t, o, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77)
		keptRows(t, o2, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78)
	})
}

// TestKernelGroupReleaseRightAfterAppendDevice: as above for a group whose
// member appends on a device: Group.Release is the member's next call.
func TestKernelGroupReleaseRightAfterAppendDevice(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		g := must[*Group](t)(NewGroup(p, "s", keepLayout(false, Append), keepLayout(false, Append)))
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		check(t, g.Head(0).RecordStream(st))
		release := holdFor(t, r, st, 5*time.Second)
		fillOn(t, r, st, must[[][]device.Span](t)(g.Head(0).AppendDevice(3)), 0x5a)
		check(t, g.Release())
		reusedIntact(t, p, release, st)
	})
}

// TestKernelInvalidatedBranchReleaseUnderKernel: a branch, its stream
// recorded (inherited from its head), appends on a device; the head's
// rollback invalidates it before any next call, so every later call on
// it fails before it is prepared. Its release must still keep the
// kernel's block from another head until the kernel ran.
func TestKernelInvalidatedBranchReleaseUnderKernel(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		l := keepLayout(false, Append)
		l.Bound = 2 * keepRows
		h, st := recordedHead(t, r, p, l)
		s0 := must[*Snap](t)(h.Snapshot())
		defer s0.Release()
		check(t, h.Append(oneRow(0x11)))
		c := must[*Head](t)(h.Branch())
		defer c.Release()
		release := holdFor(t, r, st, 5*time.Second)
		fillOn(t, r, st, must[[][]device.Span](t)(c.AppendDevice(keepRows)), 0x5a) // a block of its own
		check(t, h.Rollback(s0))
		if err := c.Read(0, 1, [][]byte{make([]byte, keepRowBytes)}); err == nil {
			t.Fatal("the branch is not invalidated")
		}
		check(t, c.Release())
		o := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		defer o.Release()
		check(t, o.Append([][]byte{bytes.Repeat([]byte{0x77}, keepRows*keepRowBytes)}))
		o2 := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		defer o2.Release()
		check(t, o2.Append([][]byte{bytes.Repeat([]byte{0x78}, keepRows*keepRowBytes)}))
		release()
		check(t, st.Sync())
		keptRows(t, o, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77)
		keptRows(t, o2, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78)
	})
}

// TestKernelEvictOptionalUnderKernel: an optional head, its stream recorded
// before it held a block, hands AppendDevice's spans to a kernel held on
// the stream. Before any next call on the head, another owner's appends
// press memory: eviction must not give the kernel's block to that owner
// while the kernel has not run.
func TestKernelEvictOptionalUnderKernel(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		const bb = keepRows * keepRowBytes
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: bb, MaxBytes: 2 * bb}))
		t.Cleanup(func() { check(t, p.Close()) })
		l := keepLayout(false, Append)
		l.Retention = Optional
		h, st := recordedHead(t, r, p, l)
		release := holdFor(t, r, st, 5*time.Second)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		ol := keepLayout(false, Append)
		ol.Bound = 2 * keepRows
		o := must[*Head](t)(p.NewHead(ol, "o"))
		defer o.Release()
		done := make(chan error, 1)
		go func() {
			var err error
			for i := 0; i < 2*keepRows && err == nil; i++ {
				err = o.Append(oneRow(0x77))
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Logf("the other owner's appends: %v", err)
			}
		case <-time.After(10 * time.Second):
			release()
			<-done
			t.Fatal("the other owner's appends blocked")
		}
		t.Logf("evicted %v, stats %+v", h.evicted, p.Stats())
		release()
		check(t, st.Sync())
		got := make([]byte, o.Len()*keepRowBytes)
		check(t, o.Read(0, o.Len(), [][]byte{got}))
		for i := 0; i < o.Len(); i++ {
			if got[i*keepRowBytes] != 0x77 {
				t.Fatalf("the other owner's row %d reads %x: the kernel wrote a block eviction gave it", i, got[i*keepRowBytes])
			}
		}
	})
}

// TestKernelWindowDeviceAppendPastWindow: an AppendDevice of more rows
// than the window holds, on a stream recorded before: the spans it
// hands out must lie in blocks no other head gets while the kernel has
// not run (or the call refuses).
func TestKernelWindowDeviceAppendPastWindow(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		l := keepLayout(false, Append)
		l.Bound = 0
		l.Window = keepRows
		h, st := recordedHead(t, r, p, l)
		for i := 0; i < 3; i++ {
			check(t, h.Append(oneRow(0x11)))
		}
		release := holdFor(t, r, st, 5*time.Second)
		spans, err := h.AppendDevice(2 * keepRows)
		if err != nil {
			t.Logf("AppendDevice past the window: %v", err)
			return
		}
		n := 0
		for _, sp := range spans[0] {
			n += sp.Rows
		}
		t.Logf("spans cover %d rows, Len %d Oldest %d", n, h.Len(), h.Oldest())
		fillOn(t, r, st, spans, 0x5a)
		check(t, h.Read(h.Len()-1, h.Len(), [][]byte{make([]byte, keepRowBytes)}))
		o := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		defer o.Release()
		for i := 0; i < keepRows; i++ {
			check(t, o.Append(oneRow(0x77)))
		}
		release()
		check(t, st.Sync())
		keptRows(t, o, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77)
	})
}

// TestKernelTwoColumnsKernelRowsKept: columns of different row sizes hold
// different rows a block; a kernel writes both columns' spans of a
// WriteDevice, a snapshot shares the blocks, a host write of another row
// copies them: both columns keep the kernel's rows.
func TestKernelTwoColumnsKernelRowsKept(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		const bb = 2048
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: bb}))
		t.Cleanup(func() { check(t, p.Close()) })
		const rows = 64
		widths := []int{256, 16}
		l := &Layout{Type: "Two", Columns: []Column{{Name: "A", ElemSize: 1, Width: widths[0]}, {Name: "B", ElemSize: 1, Width: widths[1]}}, Growth: Mutable, Bound: rows}
		h := must[*Head](t)(p.NewHead(l, "s"))
		defer h.Release()
		check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, rows*widths[0]), bytes.Repeat([]byte{0x11}, rows*widths[1])}))
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		s := must[*Snap](t)(h.Snapshot())
		defer s.Release()
		release := holdFor(t, r, st, 100*time.Millisecond)
		spans := must[[][]device.Span](t)(h.WriteDevice(40, 44))
		for c, col := range spans {
			for _, sp := range col {
				check(t, r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, sp.Ptr, uint32(0x5a), uint64(sp.Rows*widths[c])))
			}
		}
		check(t, h.RecordStream(st))
		s2 := must[*Snap](t)(h.Snapshot())
		defer s2.Release()
		check(t, h.Write(41, [][]byte{bytes.Repeat([]byte{0x22}, widths[0]), bytes.Repeat([]byte{0x22}, widths[1])}))
		check(t, h.Write(43, [][]byte{bytes.Repeat([]byte{0x33}, widths[0]), bytes.Repeat([]byte{0x33}, widths[1])}))
		release()
		check(t, st.Sync())
		for _, x := range []reader{h, s2} {
			a := make([]byte, 4*widths[0])
			b := make([]byte, 4*widths[1])
			check(t, x.Read(40, 44, [][]byte{a, b}))
			for c, buf := range [][]byte{a, b} {
				var got []byte
				for i := 0; i < 4; i++ {
					got = append(got, buf[i*widths[c]])
				}
				want := []byte{0x5a, 0x22, 0x5a, 0x33}
				if x == reader(s2) {
					want = []byte{0x5a, 0x5a, 0x5a, 0x5a}
				}
				if !bytes.Equal(got, want) {
					t.Errorf("column %d rows 40..43 read %x, want %x", c, got, want)
				}
			}
		}
	})
}

// TestKernelEventsGroupBranchMergeRelease: a group's member writes on a
// device; the group branches, the branch's member writes on a device too,
// the group merges the branch; the two are released in either order.
// Every event is closed once.
func TestKernelEventsGroupBranchMergeRelease(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		for _, merge := range []bool{false, true} {
			for _, gFirst := range []bool{false, true} {
				t.Run(fmt.Sprintf("merge=%v/groupFirst=%v", merge, gFirst), func(t *testing.T) {
					b, p := countedPool(t, r, PoolOptions{})
					g := must[*Group](t)(NewGroup(p, "s", keepLayout(false, Mutable), keepLayout(false, Append)))
					m := g.Head(0)
					check(t, m.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
					check(t, g.Head(1).Append(oneRow(0x01)))
					fillOn(t, r, st, must[[][]device.Span](t)(m.WriteDevice(2, 4)), 0x5a)
					check(t, m.RecordStream(st))
					fillOn(t, r, st, must[[][]device.Span](t)(g.Head(1).AppendDevice(2)), 0x5b)
					bg := must[*Group](t)(g.Branch()) // the next call on member 1
					check(t, bg.Head(0).Write(0, oneRow(0x22)))
					fillOn(t, r, st, must[[][]device.Span](t)(bg.Head(0).WriteDevice(5, 6)), 0x6b)
					check(t, bg.Head(0).RecordStream(st))
					if merge {
						check(t, g.Merge(bg))
					}
					check(t, st.Sync())
					if gFirst {
						check(t, g.Release())
						check(t, bg.Release())
					} else {
						check(t, bg.Release())
						check(t, g.Release())
					}
					eventsBalanced(t, b, p, "after every release")
					if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.PendingBytes != 0 {
						t.Errorf("after every release: physical %d pending %d", ps.PhysicalBytes, ps.PendingBytes)
					}
					check(t, p.Close())
				})
			}
		}
	})
}

// TestKernelWindowKernelRowsKeptOverCopy: an append state with a window
// has dropped its first blocks; a kernel fills the rows of an
// AppendDevice in the tail block, a snapshot shares the block, and a host
// append copies it: the copy waits for the kernel.
func TestKernelWindowKernelRowsKeptOverCopy(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		l := keepLayout(false, Append)
		l.Bound = 0
		l.Window = 2 * keepRows
		h := must[*Head](t)(p.NewHead(l, "s"))
		defer h.Release()
		for i := 0; i < 3*keepRows+2; i++ {
			check(t, h.Append(oneRow(0x11)))
		}
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		release := holdFor(t, r, st, 50*time.Millisecond)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.RecordStream(st))
		s := must[*Snap](t)(h.Snapshot())
		defer s.Release()
		check(t, h.Append(oneRow(0x33)))
		release()
		check(t, st.Sync())
		n := h.Len()
		got := make([]byte, 5*keepRowBytes)
		check(t, h.Read(n-6, n-1, [][]byte{got}))
		var rows []byte
		for i := 0; i < 5; i++ {
			rows = append(rows, got[i*keepRowBytes])
		}
		if want := []byte{0x11, 0x11, 0x5a, 0x5a, 0x5a}; !bytes.Equal(rows, want) {
			t.Fatalf("rows before the last read %x, want %x", rows, want)
		}
	})
}

// TestKernelClosedRecordedStreamDrains: a stream recorded on the head is
// closed; a device write on another stream, its RecordStream, the
// release: nothing stays pending after the streams synced.
func TestKernelClosedRecordedStreamDrains(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		h := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		st2 := must[device.Stream](t)(r.Streams().NewStream())
		check(t, h.RecordStream(st2))
		check(t, st2.Close())
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.RecordStream(st))
		check(t, h.Append(oneRow(0x11)))
		check(t, h.Release())
		check(t, st.Sync())
		done := make(chan struct{})
		go func() { p.WaitPending(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("WaitPending did not return")
		}
		if ps := p.Stats(); ps.PendingBytes != 0 || ps.PhysicalBytes != 0 {
			t.Errorf("after the release: pending %d physical %d", ps.PendingBytes, ps.PhysicalBytes)
		}
	})
}

// TestKernelTwoStreamsBothMarked: streams a and b were recorded on the head
// before it held a block; AppendDevice; the kernel runs on a; the next
// call is RecordStream(b). The release must keep the block from another
// head until a's kernel ran.
func TestKernelTwoStreamsBothMarked(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		h, a := recordedHead(t, r, p, keepLayout(false, Append))
		b := must[device.Stream](t)(r.Streams().NewStream())
		defer b.Close()
		check(t, h.RecordStream(b))
		release := holdFor(t, r, a, 5*time.Second)
		fillOn(t, r, a, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.RecordStream(b))
		check(t, h.Release())
		reusedIntact(t, p, release, a)
	})
}

// TestKernelTierRightAfterRecordStream: an optional head's device write,
// kernel held, on a stream recorded by RecordStream, the next call (not
// before); memory pressure moves the head to the host tier right after;
// Prefetch brings it back. The head reads the kernel's rows, another
// owner's rows are intact, nothing stays pending.
func TestKernelTierRightAfterRecordStream(t *testing.T) {
	for _, ckpt := range []bool{false, true} {
		for _, dev := range []string{"append", "write"} {
			t.Run(fmt.Sprintf("ckpt=%v/%s", ckpt, dev), func(t *testing.T) {
				r := statetest.HostStreamRig(t)
				const bb = keepRows * keepRowBytes
				p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: bb, MaxBytes: 3 * bb, HostTier: 64 << 10}))
				t.Cleanup(func() { check(t, p.Close()) })
				growth := Append
				if dev == "write" {
					growth = Mutable
				}
				l := keepLayout(ckpt, growth)
				l.Retention = Optional
				h := must[*Head](t)(p.NewHead(l, "s"))
				defer h.Release()
				st := must[device.Stream](t)(r.Streams().NewStream())
				defer st.Close()
				want := []byte{0x5a, 0x5a, 0x5a}
				release := holdFor(t, r, st, 200*time.Millisecond)
				if dev == "write" {
					check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, bb)}))
					fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
					want = []byte{0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11}
				} else {
					fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
				}
				check(t, h.RecordStream(st))
				pressedIntact(t, p, release, st)
				check(t, h.Prefetch())
				keptRows(t, h, want...)
				p.WaitPending()
				if ps := p.Stats(); ps.PendingBytes != 0 {
					t.Errorf("pending %d", ps.PendingBytes)
				}
			})
		}
	}
}

// TestKernelGroupTierKernelRows: a group of optional members; member 0's
// device write (kernel held) on a stream RecordStream names next; memory
// pressure moves the group to the host tier; another owner's rows stay
// intact, and the member brought back reads the kernel's rows.
func TestKernelGroupTierKernelRows(t *testing.T) {
	r := statetest.HostStreamRig(t)
	const bb = keepRows * keepRowBytes
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: bb, MaxBytes: 3 * bb, HostTier: 64 << 10}))
	t.Cleanup(func() { check(t, p.Close()) })
	l0 := keepLayout(false, Append)
	l0.Retention = Optional
	l1 := keepLayout(false, Append)
	l1.Retention = Optional
	g := must[*Group](t)(NewGroup(p, "s", l0, l1))
	defer g.Release()
	check(t, g.Head(1).Append(oneRow(0x01)))
	st := must[device.Stream](t)(r.Streams().NewStream())
	defer st.Close()
	release := holdFor(t, r, st, 200*time.Millisecond)
	fillOn(t, r, st, must[[][]device.Span](t)(g.Head(0).AppendDevice(3)), 0x5a)
	check(t, g.Head(0).RecordStream(st))
	pressedIntact(t, p, release, st)
	keptRows(t, g.Head(0), 0x5a, 0x5a, 0x5a)
	keptRows(t, g.Head(1), 0x01)
}

// TestKernelTableAfterKernelCopy: a head's block table; a device write's
// kernel (held) on a recorded stream, RecordStream next, a snapshot, and
// a host write that copies the block after the kernel. The table, read
// as a kernel on another stream would (Column, then its entries), points
// at a block that holds the write's row and the kernel's rows; a table
// of the snapshot points at the kernel's rows too.
func TestKernelTableAfterKernelCopy(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		h, st := keepHead(t, r, p, false, Mutable)
		tab := must[*BlockTable](t)(h.BlockTable())
		defer tab.Release()
		check(t, h.RecordStream(st))
		release := holdFor(t, r, st, 100*time.Millisecond)
		fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
		check(t, h.RecordStream(st))
		s := must[*Snap](t)(h.Snapshot())
		defer s.Release()
		check(t, h.Write(0, oneRow(0x22)))
		st2 := must[device.Stream](t)(r.Streams().NewStream())
		defer st2.Close()
		check(t, h.RecordStream(st2))
		release()
		check(t, st.Sync())
		readVia := func(tb *BlockTable) []byte {
			col := must[TableColumn](t)(tb.Column(0))
			ent := make([]byte, 8*col.Blocks)
			check(t, r.Backend.CopyDtoH(ent, col.Ptr))
			blk := device.Ptr(binary.LittleEndian.Uint64(ent[8*(0-col.First):]))
			got := make([]byte, keepRows*keepRowBytes)
			check(t, r.Backend.CopyDtoH(got, blk))
			var rows []byte
			for i := 0; i < len(got); i += keepRowBytes {
				rows = append(rows, got[i])
			}
			return rows
		}
		if got, want := readVia(tab), []byte{0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11}; !bytes.Equal(got, want) {
			t.Errorf("head's table block reads %x, want %x", got, want)
		}
		st2tab := must[*BlockTable](t)(s.BlockTable())
		defer st2tab.Release()
		if got, want := readVia(st2tab), []byte{0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11}; !bytes.Equal(got, want) {
			t.Errorf("snapshot's table block reads %x, want %x", got, want)
		}
		keptRows(t, h, 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
	})
}

// TestKernelSnapRecordStreamAfterKernel: a snapshot taken as the call after
// a device write (stream recorded before, kernel held) records a second
// stream whose held ReadAsync reads the snapshot; the head copies on
// write; head and snapshot go. The block goes to no other head until
// both streams ran: the read sees the kernel's rows, the new head its own.
func TestKernelSnapRecordStreamAfterKernel(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p := keepPool(t, r)
	h, st := keepHead(t, r, p, false, Mutable)
	check(t, h.RecordStream(st))
	release := holdFor(t, r, st, 5*time.Second)
	fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
	s := must[*Snap](t)(h.Snapshot())
	st2 := must[device.Stream](t)(r.Streams().NewStream())
	defer st2.Close()
	check(t, s.RecordStream(st2))
	ev := must[device.Event](t)(r.Streams().Record(st))
	check(t, r.Streams().WaitEvent(st2, ev))
	defer ev.Close()
	buf := must[[]byte](t)(r.Streams().HostAlloc(keepRows * keepRowBytes))
	defer r.Streams().HostFree(buf)
	check(t, s.ReadAsync(st2, 0, keepRows, [][]byte{buf}))
	wrote := make(chan error, 1)
	go func() { wrote <- h.Write(0, oneRow(0x22)) }() // waits for the kernel
	time.Sleep(20 * time.Millisecond)
	check(t, s.Release())
	o := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
	defer o.Release()
	check(t, o.Append([][]byte{bytes.Repeat([]byte{0x77}, keepRows*keepRowBytes)}))
	release()
	check(t, st.Sync())
	check(t, st2.Sync())
	check(t, <-wrote)
	var rows []byte
	for i := 0; i < len(buf); i += keepRowBytes {
		rows = append(rows, buf[i])
	}
	if want := []byte{0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11}; !bytes.Equal(rows, want) {
		t.Errorf("the snapshot's ReadAsync read %x, want %x", rows, want)
	}
	keptRows(t, o, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77)
	keptRows(t, h, 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
}

func sharedKernelLayout() *Layout {
	return &Layout{Type: "Tok", Columns: []Column{{Name: "B", ElemSize: 8, Width: 1}}, Growth: Append, Bound: 4 * tokPer, BlockRows: tokPer, ShareKey: "B", Descendants: Keep}
}

const tokBytes, tokPer = 8, 32

func tokFill(t *testing.T, r *statetest.StreamRig, st device.Stream, spans [][]device.Span, v byte) {
	t.Helper()
	for _, sp := range spans[0] {
		check(t, r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, sp.Ptr, uint32(v), uint64(sp.Rows*tokBytes)))
	}
}

func tokRows(t *testing.T, x reader, v byte, n int) {
	t.Helper()
	got := make([]byte, x.Len()*tokBytes)
	check(t, x.Read(0, x.Len(), [][]byte{got}))
	if want := bytes.Repeat([]byte{v}, n*tokBytes); !bytes.Equal(got[:min(len(got), len(want))], want) || x.Len() < n {
		t.Fatalf("rows read %x, want %d rows of %x", got, n, v)
	}
}

// TestKernelAdoptKernelRows: a shared head's AppendDevice fills a block by a
// held kernel; the call after it is each of several. Another owner's
// adoption while the kernel is held must not adopt the block (its keys
// are not written), nor read anything but the kernel's rows; after the
// kernel, one adopts it and reads the kernel's rows, also after the
// writer goes.
func TestKernelAdoptKernelRows(t *testing.T) {
	nexts := map[string]func(t *testing.T, h *Head, st device.Stream){
		"RecordStream": func(t *testing.T, h *Head, st device.Stream) { check(t, h.RecordStream(st)) },
		"Append": func(t *testing.T, h *Head, st device.Stream) {
			check(t, h.Append([][]byte{bytes.Repeat([]byte{0x33}, tokBytes)}))
		},
		"Snapshot": func(t *testing.T, h *Head, st device.Stream) {
			s := must[*Snap](t)(h.Snapshot())
			t.Cleanup(func() { s.Release() })
		},
		"Branch": func(t *testing.T, h *Head, st device.Stream) {
			b := must[*Head](t)(h.Branch())
			t.Cleanup(func() { b.Release() })
		},
	}
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		for name, next := range nexts {
			for _, before := range []bool{false, true} {
				if !before && name != "RecordStream" {
					continue
				}
				t.Run(name, func(t *testing.T) {
					p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: tokPer * tokBytes}))
					t.Cleanup(func() { check(t, p.Close()) })
					sl := sharedKernelLayout()
					a := must[*Head](t)(p.NewSharedHead(sl, "a", "d"))
					defer a.Release()
					st := must[device.Stream](t)(r.Streams().NewStream())
					defer st.Close()
					if before {
						check(t, a.RecordStream(st))
					}
					release := holdFor(t, r, st, 5*time.Second)
					tokFill(t, r, st, must[[][]device.Span](t)(a.AppendDevice(tokPer)), 0x5a)
					next(t, a, st)
					keys := bytes.Repeat([]byte{0x5a}, tokPer*tokBytes)
					b := must[*Head](t)(p.NewSharedHead(sl, "b", "d"))
					defer b.Release()
					var n int
					within(t, "AdoptPrefix", 10*time.Second, func() (err error) { n, err = b.AdoptPrefix(keys); return })
					if n != 0 {
						t.Errorf("adopted %d rows whose kernel has not run", n)
					}
					zero := make([]byte, tokPer*tokBytes)
					b0 := must[*Head](t)(p.NewSharedHead(sl, "b", "d"))
					defer b0.Release()
					within(t, "AdoptPrefix", 10*time.Second, func() (err error) { n, err = b0.AdoptPrefix(zero); return })
					if n != 0 {
						t.Errorf("adopted %d rows of zero keys: the keys read before the kernel", n)
					}
					release()
					check(t, st.Sync())
					c := must[*Head](t)(p.NewSharedHead(sl, "c", "d"))
					defer c.Release()
					n = must[int](t)(c.AdoptPrefix(keys))
					if n != tokPer {
						t.Errorf("adopted %d rows after the kernel, want %d", n, tokPer)
					}
					check(t, a.Release())
					if n > 0 {
						tokRows(t, c, 0x5a, tokPer)
					}
					check(t, c.Append([][]byte{bytes.Repeat([]byte{0x66}, tokBytes)}))
					p.WaitPending()
					if ps := p.Stats(); ps.PendingBytes != 0 {
						t.Errorf("pending bytes %d after WaitPending", ps.PendingBytes)
					}
				})
			}
		}
	})
}
