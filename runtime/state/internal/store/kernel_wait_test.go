package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// returnsWithin runs f in a goroutine and fails t unless it returns
// within 5s; release lets held work go in that case.
func returnsWithin(t *testing.T, r *statetest.StreamRig, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		check(t, err)
	case <-time.After(5 * time.Second):
		r.Release()
		<-done
		t.Fatalf("%s waited for work queued after the kernel's next call", what)
	}
}

// TestKernelMergeDoesNotWaitLater: a child's kernel rows, merged into the
// head (the merge is the child's next call), then later work on the
// stream is held: a copy by the head, and by the child, waits only for
// the kernel.
func TestKernelMergeDoesNotWaitLater(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
	t.Cleanup(func() { check(t, p.Close()) })
	h, st := keepHead(t, r, p, false, Mutable)
	check(t, h.RecordStream(st))
	c := must[*Head](t)(h.Branch())
	defer c.Release()
	fillOn(t, r, st, must[[][]device.Span](t)(c.WriteDevice(2, 4)), 0x5a)
	check(t, h.Merge(c))
	r.Hold(t, st)
	returnsWithin(t, r, "the head's Write", func() error { return h.Write(0, oneRow(0x22)) })
	returnsWithin(t, r, "the child's Write", func() error { return c.Write(1, oneRow(0x33)) })
	r.Release()
	check(t, st.Sync())
	keptRows(t, h, 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
	keptRows(t, c, 0x11, 0x33, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
}

// TestKernelGroupBranchDoesNotWaitLater: a member's device write, the
// group's Branch as its next call, later work held: the branch's member
// copy waits only for the kernel.
func TestKernelGroupBranchDoesNotWaitLater(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
	t.Cleanup(func() { check(t, p.Close()) })
	g := must[*Group](t)(NewGroup(p, "s", keepLayout(false, Mutable), keepLayout(false, Append)))
	defer g.Release()
	m := g.Head(0)
	check(t, m.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
	st := must[device.Stream](t)(r.Streams().NewStream())
	defer st.Close()
	check(t, m.RecordStream(st))
	fillOn(t, r, st, must[[][]device.Span](t)(m.WriteDevice(2, 4)), 0x5a)
	b := must[*Group](t)(g.Branch())
	defer b.Release()
	r.Hold(t, st)
	returnsWithin(t, r, "the branch's Write", func() error { return b.Head(0).Write(0, oneRow(0x22)) })
	returnsWithin(t, r, "the group's Write", func() error { return m.Write(0, oneRow(0x33)) })
	r.Release()
	check(t, st.Sync())
	keptRows(t, b.Head(0), 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
	keptRows(t, m, 0x33, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
}
