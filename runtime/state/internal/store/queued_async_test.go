package store

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// AppendAsync on two streams, the first held; a ReadAsync on the
// second must see both batches; a Rollback (which lands) in between
// another stream's copies; then the model.
func TestQueuedAsyncTwoStreamsRollback(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Invalidate), "a"))
	st1, st2 := r.stream(t), r.stream(t)
	m := qwModel(kvRows(5, 1))
	check(t, h.Append(kvRows(5, 1)))
	snap := must[*Snap](t)(h.Snapshot())
	open1 := r.hold(t, st1)
	check(t, h.AppendAsync(st1, kvRows(20, 2)))
	check(t, h.AppendAsync(st2, kvRows(20, 3)))
	m2 := m.add(kvRows(20, 2)).add(kvRows(20, 3))
	dst := [][]byte{make([]byte, 45*16), make([]byte, 45*8)}
	check(t, h.ReadAsync(st2, 0, 45, dst))
	ev := must[device.Event](t)(r.sb.Record(st2))
	if done, _ := ev.Done(); done {
		t.Error("ReadAsync on st2 ran before st1's append copies")
	}
	open1()
	check(t, ev.Wait())
	ev.Close()
	if !equalCols(dst, m2) {
		t.Error("ReadAsync on st2 read other rows than the two appends")
	}
	queuedheck(t, "after the appends", h, m2)
	// rollback while more copies are held on st1
	open1 = r.hold(t, st1)
	check(t, h.AppendAsync(st1, kvRows(7, 4)))
	openAfter(open1, 30*time.Millisecond)
	check(t, h.Rollback(snap))
	queuedheck(t, "after rollback", h, m)
	check(t, h.AppendAsync(st2, kvRows(9, 5)))
	queuedheck(t, "after rollback+append", h, m.add(kvRows(9, 5)))
	check(t, snap.Release())
	check(t, h.Release())
	qwLeaks(t, p)
}

// AppendAsync held on st, Release at once, another owner takes
// the memory (MaxBytes tight): its rows must not be overwritten by the
// queued copies, and the staging buffer must not be reused under them.
func TestQueuedAsyncReleaseThenReuse(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256, PendingWait: 20 * time.Millisecond}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	a := must[*Head](t)(p.NewHead(kv(Append, 0, Invalidate), "a"))
	open := r.hold(t, st)
	check(t, a.AppendAsync(st, kvRows(32, 9))) // 32*16=512 -> 2 blocks keys, 1 block values
	check(t, a.Release())
	b := must[*Head](t)(p.NewHead(kv(Append, 0, Invalidate), "b"))
	// an async append by b on another stream reuses the staging buffer
	st2 := r.stream(t)
	check(t, b.AppendAsync(st2, kvRows(1, 200)))
	mb := qwModel(kvRows(1, 200))
	for i := 0; i < 8; i++ {
		if err := b.Append(kvRows(16, byte(100+i))); err != nil {
			if !errors.Is(err, ErrNoMemory) {
				t.Fatal(err)
			}
			break
		}
		mb = mb.add(kvRows(16, byte(100+i)))
	}
	open()
	check(t, st.Sync())
	queuedheck(t, "b after a's queued copies ran", b, mb)
	check(t, b.Release())
	qwLeaks(t, p)
}

// A snapshot shares the tail block; AppendAsync copies it on
// write (held), the head is released at once; the snapshot and another
// owner's rows stay right.
func TestQueuedAsyncCowReleaseSnapshot(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 6 * 256, PendingWait: 20 * time.Millisecond}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	a := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	check(t, a.Append(kvRows(3, 1)))
	s := must[*Snap](t)(a.Snapshot())
	open := r.hold(t, st)
	check(t, a.AppendAsync(st, kvRows(4, 2)))
	check(t, a.Release())
	b := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "b"))
	mb := qwModel(kvRows(0, 0))
	for i := 0; i < 6; i++ {
		if err := b.Append(kvRows(8, byte(50+i))); err != nil {
			break
		}
		mb = mb.add(kvRows(8, byte(50+i)))
	}
	queuedheck(t, "snapshot while the copy is held", s, qwModel(kvRows(3, 1)))
	open()
	check(t, st.Sync())
	queuedheck(t, "snapshot", s, qwModel(kvRows(3, 1)))
	queuedheck(t, "b", b, mb)
	check(t, s.Release())
	check(t, b.Release())
	qwLeaks(t, p)
}

// RecordStream with a held fill kernel queued on the head's last
// block, then Rollback to a snapshot before that block; the head appends
// again (same owner, and another owner): neither must get the block the
// kernel is about to fill.
func TestQueuedRecordStreamRollbackReuse(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 6 * 256, PendingWait: 20 * time.Millisecond}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	a := must[*Head](t)(p.NewHead(kv(Append, 0, Invalidate), "a"))
	check(t, a.Append(kvRows(16, 1))) // exactly one key block, half a value block
	s := must[*Snap](t)(a.Snapshot())
	check(t, a.Append(kvRows(16, 2)))
	sp := must[[][]device.Span](t)(a.Spans(16, 32))
	open := r.hold(t, st)
	r.fillOn(t, st, sp[0][0].Ptr, 0xEE, 256)
	check(t, a.RecordStream(st))
	check(t, a.Rollback(s))
	ma := qwModel(kvRows(16, 1))
	b := must[*Head](t)(p.NewHead(kv(Append, 0, Invalidate), "b"))
	mb := qwModel(kvRows(0, 0))
	for i := 0; i < 4; i++ {
		if err := b.Append(kvRows(16, byte(60+i))); err != nil {
			break
		}
		mb = mb.add(kvRows(16, byte(60+i)))
	}
	if err := a.Append(kvRows(16, 3)); err == nil {
		ma = ma.add(kvRows(16, 3))
	}
	open()
	check(t, st.Sync())
	queuedheck(t, "a", a, ma)
	queuedheck(t, "b", b, mb)
	check(t, s.Release())
	check(t, a.Release())
	check(t, b.Release())
	qwLeaks(t, p)
}

// Branch + AppendAsync on the branch on a held stream + Merge
// (lands, opened from a goroutine) + parent ReadAsync on another stream.
func TestQueuedBranchAsyncMerge(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st1, st2 := r.stream(t), r.stream(t)
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	check(t, h.Append(kvRows(5, 1)))
	b := must[*Head](t)(h.Branch())
	open := r.hold(t, st1)
	check(t, b.AppendAsync(st1, kvRows(10, 2)))
	check(t, b.AppendAsync(st2, kvRows(3, 3)))
	m := qwModel(kvRows(5, 1)).add(kvRows(10, 2)).add(kvRows(3, 3))
	openAfter(open, 30*time.Millisecond)
	check(t, h.Merge(b))
	check(t, b.Release())
	dst := [][]byte{make([]byte, 18*16), make([]byte, 18*8)}
	check(t, h.ReadAsync(st2, 0, 18, dst))
	check(t, st2.Sync())
	if !equalCols(dst, m) {
		t.Error("ReadAsync after merge read other rows")
	}
	queuedheck(t, "h", h, m)
	check(t, h.Release())
	qwLeaks(t, p)
}

// Pool.Close with a live head whose AppendAsync is held, and a
// released one: Close must not deadlock or panic, and names the live one.
func TestQueuedCloseWithPendingAsync(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	st := r.stream(t)
	a := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "live"))
	b := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "gone"))
	open := r.hold(t, st)
	check(t, a.AppendAsync(st, kvRows(10, 1)))
	check(t, b.AppendAsync(st, kvRows(10, 2)))
	check(t, b.Release())
	openAfter(open, 50*time.Millisecond)
	var err error
	qwWithin(t, 5*time.Second, "Close", func() { err = p.Close() })
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("live")) {
		t.Errorf("Close with a live head: %v", err)
	}
	if err := a.AppendAsync(st, kvRows(1, 3)); err == nil {
		t.Error("AppendAsync after Close succeeded")
	}
	a.Release()
}
