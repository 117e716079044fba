package store

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestKernelRowsHostWriteInPlaceUnderKernel: the kernel's stream was
// recorded on the head before WriteDevice copied the block a snapshot
// shared, into a new block. The call after the device write records the
// stream on that block too (queuedKernels), so a host write of one of the
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
		r.Hold(t, st)
		var once sync.Once
		release := func() { once.Do(r.Release) }
		defer release()
		time.AfterFunc(100*time.Millisecond, release)
		fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(0, 3)), 0x5a)
		check(t, s.Release())
		check(t, h.Write(1, oneRow(0x22)))
		release()
		check(t, st.Sync())
		keptRows(t, h, 0x5a, 0x22, 0x5a, 0x11, 0x11, 0x11, 0x11, 0x11)
	})
}
