package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestKernelTwoStreamsHostWriteNextCall: streams a and b recorded on the
// head; WriteDevice copies the block a snapshot shares into a new one;
// the kernel runs on b (held); the snapshot goes; the next call on the
// head is a host write of one of the kernel's rows: both streams mark
// the new block, so it is not written in place under the kernel, and
// the head reads the host row.
func TestKernelTwoStreamsHostWriteNextCall(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		defer p.Close()
		h := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
		defer h.Release()
		a := must[device.Stream](t)(r.Streams().NewStream())
		defer a.Close()
		b := must[device.Stream](t)(r.Streams().NewStream())
		defer b.Close()
		check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
		check(t, h.RecordStream(a))
		check(t, h.RecordStream(b))
		s := must[*Snap](t)(h.Snapshot())
		release := holdFor(t, r, b, 100*time.Millisecond)
		fillOn(t, r, b, must[[][]device.Span](t)(h.WriteDevice(0, 3)), 0x5a)
		check(t, s.Release())
		check(t, h.Write(1, oneRow(0x22)))
		release()
		check(t, b.Sync())
		keptRows(t, h, 0x5a, 0x22, 0x5a, 0x11, 0x11, 0x11, 0x11, 0x11)
	})
}
