package store

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// fillOn launches the fill kernel over spans on st.
func fillOn(t *testing.T, r *statetest.StreamRig, st device.Stream, spans [][]device.Span, v byte) {
	t.Helper()
	for _, sp := range spans[0] {
		check(t, r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, sp.Ptr, uint32(v), uint64(sp.Rows*keepRowBytes)))
	}
}

// oneRow is a batch of one row of bytes v.
func oneRow(v byte) [][]byte { return [][]byte{bytes.Repeat([]byte{v}, keepRowBytes)} }

// within runs f and fails if it takes longer than d (a stall).
func within(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		check(t, err)
	case <-time.After(d):
		t.Fatalf("%s stalled", what)
	}
}

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
	r.Hold(t, st)
	var once sync.Once
	release := func() { once.Do(r.Release) }
	defer release()
	time.AfterFunc(50*time.Millisecond, release) // At waits for the kernel
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
	r.Hold(t, st)
	var once sync.Once
	release := func() { once.Do(r.Release) }
	defer release()
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
