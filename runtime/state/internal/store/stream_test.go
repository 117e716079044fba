package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestReleaseWaitsForInFlightKernel: blocks a queued kernel uses, released
// while it is held back, are neither reused nor zeroed for another owner
// until the event after it completes; then they are free again.
func TestReleaseWaitsForInFlightKernel(t *testing.T) {
	statetest.EachStreamRig(t, testReleaseWaits)
}

func testReleaseWaits(t *testing.T, r *statetest.StreamRig) {
	const rowBytes, rows = 256, 4
	l := &Layout{Type: "Rows", Columns: []Column{{Name: "B", ElemSize: 1, Width: rowBytes}}, Growth: Append}
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: rowBytes, MaxBytes: rows * rowBytes})
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.NewHead(l, "a")
	if err != nil {
		t.Fatal(err)
	}
	rowsA := bytes.Repeat([]byte{0x11, 0x22, 0x33, 0x44}, rows*rowBytes/4)
	if err := a.Append([][]byte{rowsA}); err != nil {
		t.Fatal(err)
	}
	snap, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	spans, err := snap.Spans(0, rows)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Streams().NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out, err := r.Streams().HostAlloc(rowBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Streams().HostFree(out)
	clear(out)
	// Queued, held back: a read of the snapshot's first block, then a
	// kernel that writes it.
	r.Hold(t, st)
	blk := spans[0][0].Ptr
	if err := r.Streams().CopyDtoHAsync(st, out, blk); err != nil {
		t.Fatal(err)
	}
	if err := r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, blk, uint32(0x5A), uint64(rowBytes)); err != nil {
		t.Fatal(err)
	}
	if err := snap.RecordStream(st); err != nil {
		t.Fatal(err)
	}
	ev, err := r.Streams().Record(st)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if done, _ := ev.Done(); done {
		t.Fatal("the held work completed before the stream was let go")
	}
	if s := p.Stats(); s.PendingBytes != rows*rowBytes || s.FreeBlocks != 0 || s.Blocks != 0 {
		t.Errorf("after the release: %d pending bytes, %d free blocks, %d in use; want %d, 0, 0",
			s.PendingBytes, s.FreeBlocks, s.Blocks, rows*rowBytes)
	}
	// Another owner finds no block: the released ones are pending, so
	// none is zeroed and handed over while the kernel may touch it.
	b, err := p.NewHead(l, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append([][]byte{bytes.Repeat([]byte{0x77}, rowBytes)}); !errors.Is(err, ErrNoMemory) {
		t.Errorf("another owner's append while the blocks are pending: %v; want ErrNoMemory", err)
	}
	r.Release()
	if err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, rowsA[:rowBytes]) {
		t.Errorf("the in-flight read saw %x..., not the released snapshot's rows %x...", out[:4], rowsA[:4])
	}
	if n := p.WaitPending(); n < 0 {
		t.Fatal(n)
	}
	if s := p.Stats(); s.PendingBytes != 0 || s.FreeBlocks != rows {
		t.Errorf("after the event: %d pending bytes, %d free blocks; want 0, %d", s.PendingBytes, s.FreeBlocks, rows)
	}
	rowB := bytes.Repeat([]byte{0x77}, rowBytes)
	if err := b.Append([][]byte{rowB}); err != nil {
		t.Fatalf("append once the blocks are free: %v", err)
	}
	got := make([]byte, rowBytes)
	if err := b.Read(0, 1, [][]byte{got}); err != nil || !bytes.Equal(got, rowB) {
		t.Errorf("the new owner reads %x... (%v), want its own rows", got[:4], err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCloseWaitsForPending: Close returns only once the events of
// pending blocks completed.
func TestCloseWaitsForPending(t *testing.T) {
	r := statetest.HostStreamRig(t)
	l := &Layout{Type: "Rows", Columns: []Column{{Name: "B", ElemSize: 1, Width: 256}}, Growth: Append}
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := p.NewHead(l, "a")
	if err := h.Append([][]byte{make([]byte, 256)}); err != nil {
		t.Fatal(err)
	}
	st, _ := r.Streams().NewStream()
	defer st.Close()
	r.Hold(t, st)
	if err := h.RecordStream(st); err != nil {
		t.Fatal(err)
	}
	ev, _ := r.Streams().Record(st)
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	go r.Release()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if done, _ := ev.Done(); !done {
		t.Error("Close returned before the pending blocks' stream work completed")
	}
}

func TestRecordStreamErrors(t *testing.T) {
	p := newPool(t, PoolOptions{})
	h, err := p.NewHead(kv(Append, 0, Keep), "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RecordStream(nil); err == nil {
		t.Error("RecordStream(nil) answered nil")
	}
	h.Release()
	st, _ := p.Backend().(device.Streams).NewStream()
	defer st.Close()
	if err := h.RecordStream(st); !errors.Is(err, ErrReleased) {
		t.Errorf("RecordStream on a released head: %v; want ErrReleased", err)
	}
	q, err := NewPool(statetest.Plain{Backend: device.Host()}, PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	g, _ := q.NewHead(kv(Append, 0, Keep), "a")
	defer g.Release()
	if err := g.RecordStream(st); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("RecordStream on a backend without streams: %v; want ErrUnsupported", err)
	}
}

// TestStreamsRecordedPerBlock: the blocks recorded on one stream share one
// record of it, and recording a second stream on some of them gives those
// their own. Released with the second stream held back, the blocks only
// the first used are free once it is done; the others stay pending until
// the second is let go. The host rig alone: the fake driver's hold holds
// every stream, and this needs one held and one running.
func TestStreamsRecordedPerBlock(t *testing.T) {
	r := statetest.HostStreamRig(t)
	const rowBytes = 256
	l := &Layout{Type: "Rows", Columns: []Column{{Name: "B", ElemSize: 1, Width: rowBytes}}, Growth: Append}
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: rowBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var sts [2]device.Stream
	for i := range sts {
		if sts[i], err = r.Streams().NewStream(); err != nil {
			t.Fatal(err)
		}
		defer sts[i].Close()
	}
	heads := make([]*Head, 2)
	for i, rows := range []int{4, 2} {
		if heads[i], err = p.NewHead(l, "o"); err != nil {
			t.Fatal(err)
		}
		if err := heads[i].Append([][]byte{bytes.Repeat([]byte{byte(i + 1)}, rows*rowBytes)}); err != nil {
			t.Fatal(err)
		}
		if err := heads[i].RecordStream(sts[0]); err != nil {
			t.Fatal(err)
		}
	}
	r.Hold(t, sts[1])
	if err := heads[1].RecordStream(sts[1]); err != nil {
		t.Fatal(err)
	}
	for _, h := range heads {
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if err := sts[0].Sync(); err != nil {
		t.Fatal(err)
	}
	// The blocks only the first stream used come back on their own
	// goroutine once its event is done: wait for that, not for the rest.
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().PendingBytes != 2*rowBytes && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := p.Stats(); s.PendingBytes != 2*rowBytes || s.FreeBlocks < 4 {
		t.Errorf("with the second stream held: %d pending bytes, %d free blocks; want %d, at least 4",
			s.PendingBytes, s.FreeBlocks, 2*rowBytes)
	}
	r.Release()
	p.WaitPending()
	if s := p.Stats(); s.PendingBytes != 0 || s.FreeBlocks < 6 {
		t.Errorf("with both streams done: %d pending bytes, %d free blocks; want 0, at least 6", s.PendingBytes, s.FreeBlocks)
	}
}

// TestRecordStreamAgain: a head that records its stream every step walks
// only the blocks it took since (streamMark), and still leaves every block
// it holds carrying the stream: after appends, a copy on write in the
// middle of a mutable state, a rollback and a window's slide; a snapshot
// recorded twice, likewise.
func TestRecordStreamAgain(t *testing.T) {
	b := device.Host()
	defer b.Close()
	p := must[*Pool](t)(NewPool(b, PoolOptions{}))
	defer p.Close()
	st := must[device.Stream](t)(b.(device.Streams).NewStream())
	defer st.Close()
	all := func(what string, r *root) {
		t.Helper()
		for ci := range r.cols {
			tr := &r.cols[ci]
			for i := tr.lo; i < tr.n; i++ {
				if !hasStream(streamsOn(tr.held(i)), st) {
					t.Fatalf("%s: column %d block %d does not carry the stream", what, ci, i)
				}
			}
		}
	}
	l := kvCacheLayout(128)
	l.Growth, l.Window = Append, 300
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	row := zeroRows(l, 1)
	s0 := must[*Snap](t)(h.Snapshot())
	defer s0.Release()
	for i := range 500 {
		check(t, h.Append(row))
		check(t, h.RecordStream(st))
		if i%101 == 0 {
			all(fmt.Sprintf("after %d appends", i+1), h.r)
		}
	}
	all("after the window slid", h.r)
	check(t, h.Rollback(s0))
	check(t, h.Append(zeroRows(l, 40)))
	check(t, h.RecordStream(st))
	all("after a rollback", h.r)

	m := must[*Head](t)(p.NewHead(&Layout{Type: "M", Columns: l.Columns, Growth: Mutable, Bound: 256}, "s"))
	defer m.Release()
	check(t, m.Write(0, zeroRows(l, 256)))
	check(t, m.RecordStream(st))
	s := must[*Snap](t)(m.Snapshot())
	defer s.Release()
	check(t, m.Write(100, row)) // a new block 100: s holds the old one
	check(t, m.RecordStream(st))
	all("after a copy on write in the middle", m.r)
	m2 := must[*Head](t)(p.NewHead(&Layout{Type: "M", Columns: l.Columns, Growth: Mutable, Bound: 256}, "s"))
	defer m2.Release()
	check(t, m2.Write(0, zeroRows(l, 256)))
	u := must[*Snap](t)(m2.Snapshot())
	defer u.Release()
	check(t, m2.Write(50, row)) // u's block 50 is never m2's while it records
	check(t, m2.Write(200, row))
	check(t, m2.RecordStream(st))
	check(t, m2.Rollback(u)) // not a write: any block may be new to the head
	check(t, m2.RecordStream(st))
	all("after a rollback to blocks never recorded", m2.r)
	check(t, s.RecordStream(st))
	check(t, s.RecordStream(st))
	all("a snapshot recorded twice", s.r)
}
