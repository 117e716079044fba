package store

import (
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

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
