package store

import (
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestKernelWindowDeviceAppendPastWindow: an AppendDevice of more rows
// than the window holds, on a stream recorded before: the spans it
// hands out must lie in blocks no other head gets while the kernel has
// not run (or the call refuses).
func TestKernelWindowDeviceAppendPastWindow(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		t.Cleanup(func() { check(t, p.Close()) })
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
