package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestKernelReleaseRightAfterAppendDevice: the stream is recorded on the
// head before it holds a block; AppendDevice takes a new block for the
// kernel, and Release is the next call on the head (the spans are the
// caller's "until the next call"). The kernel is queued by then, so the
// block must not go to another head until it ran.
func TestKernelReleaseRightAfterAppendDevice(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		t.Cleanup(func() { check(t, p.Close()) })
		h, st := recordedHead(t, r, p, keepLayout(false, Append))
		release := holdFor(t, r, st, 5*time.Second)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.Release()) // the next call
		o := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		defer o.Release()
		check(t, o.Append([][]byte{bytes.Repeat([]byte{0x77}, keepRows*keepRowBytes)}))
		release()
		check(t, st.Sync())
		keptRows(t, o, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77)
	})
}

// TestKernelReleaseRightAfterWriteDeviceCopy: as above for WriteDevice that
// copies a block a snapshot shares; the snapshot and then the head are
// released, the head's release being the call after the device write.
func TestKernelReleaseRightAfterWriteDeviceCopy(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		t.Cleanup(func() { check(t, p.Close()) })
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
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		t.Cleanup(func() { check(t, p.Close()) })
		g := must[*Group](t)(NewGroup(p, "s", keepLayout(false, Append), keepLayout(false, Append)))
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		check(t, g.Head(0).RecordStream(st))
		release := holdFor(t, r, st, 5*time.Second)
		fillOn(t, r, st, must[[][]device.Span](t)(g.Head(0).AppendDevice(3)), 0x5a)
		check(t, g.Release())
		o := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		defer o.Release()
		check(t, o.Append([][]byte{bytes.Repeat([]byte{0x77}, keepRows*keepRowBytes)}))
		release()
		check(t, st.Sync())
		keptRows(t, o, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77)
	})
}

// TestKernelInvalidatedBranchReleaseUnderKernel: a branch, its stream
// recorded (inherited from its head), appends on a device; the head's
// rollback invalidates it before any next call, so every later call on
// it fails before it is prepared. Its release must still keep the
// kernel's block from another head until the kernel ran.
func TestKernelInvalidatedBranchReleaseUnderKernel(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		t.Cleanup(func() { check(t, p.Close()) })
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
