package store

import (
	"bytes"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestKernelRowsInHistory: a kernel queued on a stream writes the rows a
// WriteDevice handed out, and RecordStream names that stream while the
// kernel is still held back. RecordStream returns without waiting, and the
// history's copy of those rows is the kernel's: At of that version, after
// later writes, reads what the kernel wrote, not the rows before it.
func TestKernelRowsInHistory(t *testing.T) {
	statetest.EachStreamRig(t, testKernelRowsInHistory)
}

func testKernelRowsInHistory(t *testing.T, r *statetest.StreamRig) {
	const rowBytes, rows = 256, 8
	l := &Layout{Type: "Rows", Columns: []Column{{Name: "B", ElemSize: 1, Width: rowBytes}},
		Growth: Mutable, Bound: rows, Checkpoint: &CheckpointPolicy{Every: 100, Keep: 1}}
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{}))
	defer p.Close()
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	before := bytes.Repeat([]byte{0x11}, rows*rowBytes)
	check(t, h.Write(0, [][]byte{before}))

	st := must[device.Stream](t)(r.Streams().NewStream())
	defer st.Close()
	spans := must[[][]device.Span](t)(h.WriteDevice(2, 4))
	v := h.Version()
	r.Hold(t, st)
	for _, sp := range spans[0] {
		check(t, r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, sp.Ptr, uint32(0x5A), uint64(sp.Rows*rowBytes)))
	}
	check(t, h.RecordStream(st)) // returns with the kernel held back
	// A later write of the same rows, from the host: the version after
	// the kernel's must come from its delta, not from the head.
	check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x22}, rows*rowBytes)}))
	r.Release()

	s := must[*Snap](t)(h.At(v))
	defer s.Release()
	got := make([]byte, rows*rowBytes)
	check(t, s.Read(0, rows, [][]byte{got}))
	want := bytes.Clone(before)
	for i := 2 * rowBytes; i < 4*rowBytes; i++ {
		want[i] = 0x5A
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("At(%v) rows 2-3 = %x..., %x...; want the kernel's %x", v, got[2*rowBytes], got[3*rowBytes], byte(0x5A))
	}
}
