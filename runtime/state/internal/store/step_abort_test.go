package store

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// The abort of a failed step (writeTx.abort with callerWrites): the head
// is as before, whatever made the step fail and whatever the pool can
// give at that moment.

// stepHead returns a mandatory replayed head of recLayout, stepped a few
// times so that its version is rebuilt by replay, and its rows.
func stepHead(t *testing.T, p *Pool) (*Head, [][]byte) {
	t.Helper()
	h := must[*Head](t)(p.NewHead(recLayout(4, 2, Invalidate), "me"))
	check(t, h.Write(0, kvRows(10, 3)))
	for i := range 6 {
		check(t, h.Step([][]byte{{byte(i + 1)}}, true, stepOn(p.Backend(), []int{16, 8}, false)))
	}
	return h, readAll(t, h)
}

// junkStep writes junk over every row in place, runs then, and fails.
func junkStep(b device.Backend, then func()) StepFunc {
	return func(spans [][]device.Span, _ [][]byte) error {
		for c, col := range spans {
			for _, sp := range col {
				if err := b.Memset(sp.Ptr, 0xee, sp.Rows*[]int{16, 8}[c]); err != nil {
					return err
				}
			}
		}
		if then != nil {
			then()
		}
		return errStep
	}
}

// sameHead fails unless h reads rows at version v.
func sameHead(t *testing.T, what string, h *Head, v Version, rows [][]byte) {
	t.Helper()
	if got := h.Version(); got != v {
		t.Fatalf("%s: version %d, was %d", what, got, v)
	}
	got := [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
	if err := h.Read(0, 10, got); err != nil {
		t.Fatalf("%s: Read: %v", what, err)
	}
	if !bytes.Equal(got[0], rows[0]) || !bytes.Equal(got[1], rows[1]) {
		t.Fatalf("%s: the head's rows changed", what)
	}
}

// TestStepFailureInAFullPoolKeepsTheHead: a step that fails after writing
// in place, in a pool with no block to spare, leaves the head as before:
// the rebuild goes into the head's own blocks, not into memory it would
// have to find. With the head's blocks recorded on a stream whose work has
// not run, the step may not write them in place (that work reads the rows
// as they were): in the full pool it answers ErrNoMemory, and the head
// reads as before.
func TestStepFailureInAFullPoolKeepsTheHead(t *testing.T) {
	b := device.Host()
	p, err := NewPool(b, PoolOptions{BlockBytes: 64, MaxBytes: 64 << 10, PendingWait: time.Millisecond})
	check(t, err)
	defer p.Close()
	h, rows := stepHead(t, p)
	defer h.Release()
	// Fill the pool with mandatory rows.
	fill := &Layout{Type: "Fill", Columns: []Column{{Name: "A", ElemSize: 64, Width: 1}}, Growth: Append, Bound: 1 << 20}
	other := must[*Head](t)(p.NewHead(fill, "other"))
	defer other.Release()
	for other.Append([][]byte{make([]byte, 64)}) == nil {
	}
	v := h.Version()
	err = h.Step([][]byte{{9}}, true, junkStep(b, nil))
	if !errors.Is(err, errStep) || errors.Is(err, ErrNoMemory) || errors.Is(err, ErrEvicted) {
		t.Fatalf("a failing step in a full pool answered %v; want the step's error alone", err)
	}
	sameHead(t, "after a failed step in a full pool", h, v, rows)

	st := must[device.Stream](t)(b.(device.Streams).NewStream())
	defer st.Close()
	fn, open := statetest.HostGate(t, b)
	defer open() // before the pool's Close, which waits for the stream
	check(t, b.(device.Kernels).Launch(st, fn, device.Dim3{X: 1}, device.Dim3{X: 1}, 0))
	check(t, h.RecordStream(st))
	if err := h.Step([][]byte{{9}}, true, junkStep(b, nil)); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("a step over blocks queued work reads, in a full pool, answered %v; want ErrNoMemory", err)
	}
	sameHead(t, "after a step that found no memory, the stream's work not run", h, v, rows)
}

// TestStepFailureWhoseRebuildFaultsKeepsTheHead: when the rebuild after a
// failed step meets a backend fault, the mandatory head is not lost: its
// next call rebuilds it, and it reads as before.
func TestStepFailureWhoseRebuildFaultsKeepsTheHead(t *testing.T) {
	fb := statetest.NewFaults(device.Host())
	p, err := NewPool(fb, PoolOptions{BlockBytes: 64})
	check(t, err)
	defer p.Close()
	h, rows := stepHead(t, p)
	defer h.Release()
	v := h.Version()
	err = h.Step([][]byte{{9}}, true, junkStep(fb, func() { fb.Arm(statetest.OpCopy, 0) }))
	if !fb.Disarm() {
		t.Fatal("the rebuild made no copy to fail")
	}
	if !errors.Is(err, errStep) || !errors.Is(err, statetest.ErrInjected) {
		t.Fatalf("a failing step whose rebuild faulted answered %v; want both errors", err)
	}
	sameHead(t, "after a failed step whose rebuild faulted", h, v, rows)
	check(t, h.Step([][]byte{{9}}, true, stepOn(fb, []int{16, 8}, false)))
}

// TestStepPanicRestoresTheHead: a step function that panics is a failed
// step: the head is as before, nothing it took is kept, and the panic
// reaches the caller with its value.
func TestStepPanicRestoresTheHead(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 64})
	h, rows := stepHead(t, p)
	defer h.Release()
	snap := must[*Snap](t)(h.Snapshot()) // some blocks shared: the step copies them
	defer snap.Release()
	v, before := h.Version(), p.Stats()
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v; want the step function's panic", r)
			}
		}()
		h.Step([][]byte{{9}}, true, junkStep(p.Backend(), func() { panic("boom") }))
		t.Fatal("Step returned after its function panicked")
	}()
	sameHead(t, "after a panicking step", h, v, rows)
	if after := p.Stats(); after.PhysicalBytes != before.PhysicalBytes || after.LogicalBytes != before.LogicalBytes {
		t.Fatalf("a panicking step left %d physical, %d logical bytes; was %d, %d",
			after.PhysicalBytes, after.LogicalBytes, before.PhysicalBytes, before.LogicalBytes)
	}
	check(t, checkInvariants(p))
	check(t, h.Step([][]byte{{9}}, true, stepOn(p.Backend(), []int{16, 8}, false)))
}

// TestStepInputShape: an input of another number of columns than the
// layout's, or whose length is no multiple of its row, answers ErrShape
// and reaches no step function.
func TestStepInputShape(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := recLayout(4, 2, Invalidate)
	l.Input = []Column{{Name: "X", ElemSize: 4, Width: 2}}
	h := must[*Head](t)(p.NewHead(l, "me"))
	defer h.Release()
	ran := false
	f := func([][]device.Span, [][]byte) error { ran = true; return nil }
	for _, in := range [][][]byte{{make([]byte, 7)}, {make([]byte, 8), make([]byte, 8)}, nil} {
		if err := h.Step(in, false, f); !errors.Is(err, ErrShape) || ran {
			t.Fatalf("Step of an input of %d columns answered %v (ran %v); want ErrShape", len(in), err, ran)
		}
	}
	check(t, h.Step([][]byte{make([]byte, 16)}, false, f))
	if !ran {
		t.Fatal("a well-shaped input did not reach the step function")
	}
	if err := h.Step([][]byte{make([]byte, 8)}, false, nil); !errors.Is(err, ErrShape) {
		t.Fatalf("Step with a nil function answered %v; want ErrShape", err)
	}
}
