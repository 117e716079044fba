package store

import (
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

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
		defer p.Close()
		h := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		defer h.Release()
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		check(t, h.RecordStream(st))
		check(t, h.Append(oneRow(0x11)))
		s := must[*Snap](t)(h.Snapshot())
		defer s.Release()
		r.Hold(t, st)
		var once sync.Once
		release := func() { once.Do(r.Release) }
		defer release()
		time.AfterFunc(100*time.Millisecond, release)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(2)), 0x5a)
		check(t, h.Rollback(s))
		check(t, h.Append(oneRow(0x33)))
		release()
		check(t, st.Sync())
		keptRows(t, h, 0x11, 0x33)
		keptRows(t, s, 0x11)
	})
}
