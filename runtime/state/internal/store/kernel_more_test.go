package store

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestKernelEventsGroupBranchMergeRelease: a group's member writes on a
// device; the group branches, the branch's member writes on a device too,
// the group merges the branch; the two are released in either order.
// Every event is closed once.
func TestKernelEventsGroupBranchMergeRelease(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		for _, merge := range []bool{false, true} {
			for _, gFirst := range []bool{false, true} {
				t.Run(fmt.Sprintf("merge=%v/groupFirst=%v", merge, gFirst), func(t *testing.T) {
					b, p := countedPool(t, r, PoolOptions{})
					g := must[*Group](t)(NewGroup(p, "s", keepLayout(false, Mutable), keepLayout(false, Append)))
					m := g.Head(0)
					check(t, m.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
					check(t, g.Head(1).Append(oneRow(0x01)))
					fillOn(t, r, st, must[[][]device.Span](t)(m.WriteDevice(2, 4)), 0x5a)
					check(t, m.RecordStream(st))
					fillOn(t, r, st, must[[][]device.Span](t)(g.Head(1).AppendDevice(2)), 0x5b)
					bg := must[*Group](t)(g.Branch()) // the next call on member 1
					check(t, bg.Head(0).Write(0, oneRow(0x22)))
					fillOn(t, r, st, must[[][]device.Span](t)(bg.Head(0).WriteDevice(5, 6)), 0x6b)
					check(t, bg.Head(0).RecordStream(st))
					if merge {
						check(t, g.Merge(bg))
					}
					check(t, st.Sync())
					if gFirst {
						check(t, g.Release())
						check(t, bg.Release())
					} else {
						check(t, bg.Release())
						check(t, g.Release())
					}
					eventsBalanced(t, b, p, "after every release")
					if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.PendingBytes != 0 {
						t.Errorf("after every release: physical %d pending %d", ps.PhysicalBytes, ps.PendingBytes)
					}
					check(t, p.Close())
				})
			}
		}
	})
}

// TestKernelWindowKernelRowsKeptOverCopy: an append state with a window
// has dropped its first blocks; a kernel fills the rows of an
// AppendDevice in the tail block, a snapshot shares the block, and a host
// append copies it: the copy waits for the kernel.
func TestKernelWindowKernelRowsKeptOverCopy(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		t.Cleanup(func() { check(t, p.Close()) })
		l := keepLayout(false, Append)
		l.Bound = 0
		l.Window = 2 * keepRows
		h := must[*Head](t)(p.NewHead(l, "s"))
		defer h.Release()
		for i := 0; i < 3*keepRows+2; i++ {
			check(t, h.Append(oneRow(0x11)))
		}
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		release := holdFor(t, r, st, 50*time.Millisecond)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.RecordStream(st))
		s := must[*Snap](t)(h.Snapshot())
		defer s.Release()
		check(t, h.Append(oneRow(0x33)))
		release()
		check(t, st.Sync())
		n := h.Len()
		got := make([]byte, 5*keepRowBytes)
		check(t, h.Read(n-6, n-1, [][]byte{got}))
		var rows []byte
		for i := 0; i < 5; i++ {
			rows = append(rows, got[i*keepRowBytes])
		}
		if want := []byte{0x11, 0x11, 0x5a, 0x5a, 0x5a}; !bytes.Equal(rows, want) {
			t.Fatalf("rows before the last read %x, want %x", rows, want)
		}
	})
}

// TestKernelClosedRecordedStreamDrains: a stream recorded on the head is
// closed; a device write on another stream, its RecordStream, the
// release: nothing stays pending after the streams synced.
func TestKernelClosedRecordedStreamDrains(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		t.Cleanup(func() { check(t, p.Close()) })
		h := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		st2 := must[device.Stream](t)(r.Streams().NewStream())
		check(t, h.RecordStream(st2))
		check(t, st2.Close())
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.RecordStream(st))
		check(t, h.Append(oneRow(0x11)))
		check(t, h.Release())
		check(t, st.Sync())
		done := make(chan struct{})
		go func() { p.WaitPending(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("WaitPending did not return")
		}
		if ps := p.Stats(); ps.PendingBytes != 0 || ps.PhysicalBytes != 0 {
			t.Errorf("after the release: pending %d physical %d", ps.PendingBytes, ps.PhysicalBytes)
		}
	})
}

// TestKernelTwoStreamsBothMarked: streams a and b were recorded on the head
// before it held a block; AppendDevice; the kernel runs on a; the next
// call is RecordStream(b). The release must keep the block from another
// head until a's kernel ran.
func TestKernelTwoStreamsBothMarked(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		t.Cleanup(func() { check(t, p.Close()) })
		h, a := recordedHead(t, r, p, keepLayout(false, Append))
		b := must[device.Stream](t)(r.Streams().NewStream())
		defer b.Close()
		check(t, h.RecordStream(b))
		release := holdFor(t, r, a, 5*time.Second)
		fillOn(t, r, a, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.RecordStream(b))
		check(t, h.Release())
		o := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		defer o.Release()
		check(t, o.Append([][]byte{bytes.Repeat([]byte{0x77}, keepRows*keepRowBytes)}))
		release()
		check(t, a.Sync())
		keptRows(t, o, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77)
	})
}
