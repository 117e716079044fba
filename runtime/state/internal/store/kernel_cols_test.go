package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

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
