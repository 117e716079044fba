package store

import (
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// A checkpointed head (Every 1): AppendAsync on a held stream
// fills part of a block the new checkpoint then shares; a second
// AppendAsync on another stream must copy that block on write after the
// first copies, not before; At of each version reads its rows.
func TestQueuedCheckpointAsyncCowAcrossStreams(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st1, st2 := r.stream(t), r.stream(t)
	l := kv(Append, 0, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 1, Keep: 8}
	h := must[*Head](t)(p.NewHead(l, "a"))
	check(t, h.Append(kvRows(2, 1)))
	v1 := h.Version()
	open := r.hold(t, st1)
	check(t, h.AppendAsync(st1, kvRows(3, 2)))
	v2 := h.Version()
	check(t, h.AppendAsync(st2, kvRows(3, 3)))
	v3 := h.Version()
	m1 := qwModel(kvRows(2, 1))
	m2 := m1.add(kvRows(3, 2))
	m3 := m2.add(kvRows(3, 3))
	open()
	check(t, st1.Sync())
	check(t, st2.Sync())
	queuedheck(t, "head", h, m3)
	for _, c := range []struct {
		v Version
		m qwModel
	}{{v1, m1}, {v2, m2}, {v3, m3}} {
		s, err := h.At(c.v)
		if err != nil {
			t.Errorf("At(%v): %v", c.v, err)
			continue
		}
		queuedheck(t, "At", s, c.m)
		check(t, s.Release())
	}
	check(t, h.Release())
	qwLeaks(t, p)
}

// Same, the At taken while the first stream is still held
// (At waits for the copies: opened from a goroutine): the deltas of
// AppendAsync versions are copied after their rows land (see
// TestQueuedCheckpointDeltaOfAsyncAppend).
func TestQueuedCheckpointAsyncAtWhileHeld(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st1 := r.stream(t)
	l := kv(Append, 0, Invalidate)
	l.Checkpoint = &CheckpointPolicy{Every: 2, Keep: 8}
	h := must[*Head](t)(p.NewHead(l, "a"))
	m := qwModel(kvRows(0, 0))
	var vs []Version
	var ms []qwModel
	open := r.hold(t, st1)
	for i := 0; i < 7; i++ {
		check(t, h.AppendAsync(st1, kvRows(5, byte(i*11))))
		m = m.add(kvRows(5, byte(i*11)))
		vs = append(vs, h.Version())
		ms = append(ms, m)
	}
	openAfter(open, 30*time.Millisecond)
	for i := range vs {
		s, err := h.At(vs[i])
		if err != nil {
			t.Errorf("At(%v): %v", vs[i], err)
			continue
		}
		queuedheck(t, "At", s, ms[i])
		if i == 3 {
			check(t, h.Rollback(s))
			check(t, h.AppendAsync(st1, kvRows(2, 99)))
			check(t, s.Release())
			queuedheck(t, "after rollback", h, ms[3].add(kvRows(2, 99)))
			break
		}
		check(t, s.Release())
	}
	check(t, h.Release())
	qwLeaks(t, p)
}

// A branch appends in place past the tail it shares with its
// parent, on a held stream, and is released at once; the parent then
// appends on the host into the same rows of the shared block: the
// branch's queued copy must not land over the parent's rows (see
// TestQueuedReleasedBranchAsyncOverwritesParentAppend).
func TestQueuedSharedTailBranchReleasedParentAppends(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	check(t, h.Append(kvRows(3, 1)))
	b := must[*Head](t)(h.Branch())
	open := r.hold(t, st)
	check(t, b.AppendAsync(st, kvRows(4, 2)))
	check(t, b.Release())
	check(t, h.Append(kvRows(4, 3)))
	open()
	check(t, st.Sync())
	queuedheck(t, "parent", h, qwModel(kvRows(3, 1)).add(kvRows(4, 3)))
	check(t, h.Release())
	qwLeaks(t, p)
}

// Parent appends async in place past the shared tail (held),
// the branch appends on the host (must copy, keeping rows 0..3), then
// the parent is released; the branch's rows must be its own.
func TestQueuedSharedTailParentAsyncBranchHost(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st, st2 := r.stream(t), r.stream(t)
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	check(t, h.Append(kvRows(3, 1)))
	b := must[*Head](t)(h.Branch())
	open := r.hold(t, st)
	check(t, h.AppendAsync(st, kvRows(4, 2)))
	check(t, b.AppendAsync(st2, kvRows(2, 4)))
	check(t, b.Append(kvRows(4, 3)))
	check(t, h.Release())
	queuedheck(t, "branch while held", b, qwModel(kvRows(3, 1)).add(kvRows(2, 4)).add(kvRows(4, 3)))
	open()
	check(t, st.Sync())
	queuedheck(t, "branch", b, qwModel(kvRows(3, 1)).add(kvRows(2, 4)).add(kvRows(4, 3)))
	check(t, b.Release())
	qwLeaks(t, p)
}

// Group members append async on two streams, the group rolls
// back to a group snapshot (opened from a goroutine), appends again.
func TestQueuedGroupAsyncRollback(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st1, st2 := r.stream(t), r.stream(t)
	g := must[*Group](t)(NewGroup(p, "g", kv(Append, 0, Invalidate), kv(Append, 0, Invalidate)))
	h0, h1 := g.Head(0), g.Head(1)
	check(t, h0.AppendAsync(st1, kvRows(3, 1)))
	check(t, h1.AppendAsync(st2, kvRows(5, 2)))
	gs := must[*GroupSnap](t)(g.Snapshot())
	open := r.hold(t, st1)
	check(t, h0.AppendAsync(st1, kvRows(20, 3)))
	check(t, h1.AppendAsync(st1, kvRows(20, 4)))
	check(t, h1.AppendAsync(st2, kvRows(2, 5)))
	openAfter(open, 30*time.Millisecond)
	check(t, g.Rollback(gs))
	queuedheck(t, "h0", h0, qwModel(kvRows(3, 1)))
	queuedheck(t, "h1", h1, qwModel(kvRows(5, 2)))
	check(t, h0.AppendAsync(st2, kvRows(1, 6)))
	check(t, h1.AppendAsync(st1, kvRows(1, 7)))
	dst := [][]byte{make([]byte, 6*16), make([]byte, 6*8)}
	check(t, h1.ReadAsync(st2, 0, 6, dst))
	check(t, st2.Sync())
	if !equalCols(dst, qwModel(kvRows(5, 2)).add(kvRows(1, 7))) {
		t.Error("h1 ReadAsync after group rollback reads other rows")
	}
	queuedheck(t, "h0 after", h0, qwModel(kvRows(3, 1)).add(kvRows(1, 6)))
	check(t, gs.Release())
	check(t, g.Release())
	qwLeaks(t, p)
}

var _ device.Stream

// probe: the same as AtWhileHeld, but the stream synced before any At.
// See TestQueuedCheckpointDeltaOfAsyncAppend.
func TestQueuedCheckpointAsyncAtAfterSync(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st1 := r.stream(t)
	l := kv(Append, 0, Invalidate)
	l.Checkpoint = &CheckpointPolicy{Every: 2, Keep: 8}
	h := must[*Head](t)(p.NewHead(l, "a"))
	m := qwModel(kvRows(0, 0))
	var vs []Version
	var ms []qwModel
	open := r.hold(t, st1)
	for i := 0; i < 3; i++ {
		check(t, h.AppendAsync(st1, kvRows(5, byte(i*11))))
		m = m.add(kvRows(5, byte(i*11)))
		vs = append(vs, h.Version())
		ms = append(ms, m)
	}
	open()
	check(t, st1.Sync())
	for i := range vs {
		s, err := h.At(vs[i])
		if err != nil {
			t.Errorf("At(%v): %v", vs[i], err)
			continue
		}
		queuedheck(t, "At", s, ms[i])
		check(t, s.Release())
	}
	check(t, h.Release())
	qwLeaks(t, p)
}
