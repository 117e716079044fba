package store

import (
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestQueuedReleasedBranchAsyncOverwritesParentAppend: a branch appends
// on a stream, in place past the tail it shares with its parent (it
// claims the bytes), and is released while the copy is queued. The
// parent, now the block's only holder, appends on the host: the block's
// queued work and its fill past the parent's rows make the append copy
// the block (writeTx.inPlace), so the branch's copy, landing later, does
// not overwrite the parent's rows. Before, it wrote them in place.
func TestQueuedReleasedBranchAsyncOverwritesParentAppend(t *testing.T) {
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

// TestQueuedReleasedBranchKernelOverwritesParentAppend: the same with a
// kernel: the branch's AppendDevice spans are in the shared tail block, a
// kernel queued on a held stream writes them, RecordStream, release; the
// parent's host append must not write those bytes in place, which the
// kernel would overwrite when it runs.
func TestQueuedReleasedBranchKernelOverwritesParentAppend(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	check(t, h.Append(kvRows(3, 1)))
	b := must[*Head](t)(h.Branch())
	sp := must[[][]device.Span](t)(b.AppendDevice(4))
	open := r.hold(t, st)
	for c, col := range sp {
		rb := []int{16, 8}[c]
		for _, s := range col {
			r.fillOn(t, st, s.Ptr, 0xEE, s.Rows*rb)
		}
	}
	check(t, b.RecordStream(st))
	check(t, b.Release())
	check(t, h.Append(kvRows(4, 3)))
	open()
	check(t, st.Sync())
	queuedheck(t, "parent", h, qwModel(kvRows(3, 1)).add(kvRows(4, 3)))
	check(t, h.Release())
	qwLeaks(t, p)
}

// TestQueuedReleasedBranchAsyncOverwritesParentAppendAsync: as above,
// the parent appending with AppendAsync on another stream (not ordered
// after the branch's).
func TestQueuedReleasedBranchAsyncOverwritesParentAppendAsync(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st, st2 := r.stream(t), r.stream(t)
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	check(t, h.Append(kvRows(3, 1)))
	b := must[*Head](t)(h.Branch())
	open := r.hold(t, st)
	check(t, b.AppendAsync(st, kvRows(4, 2)))
	check(t, b.Release())
	check(t, h.AppendAsync(st2, kvRows(4, 3)))
	check(t, st2.Sync())
	open()
	check(t, st.Sync())
	queuedheck(t, "parent", h, qwModel(kvRows(3, 1)).add(kvRows(4, 3)))
	check(t, h.Release())
	qwLeaks(t, p)
}

// TestQueuedCheckpointDeltaOfAsyncAppend: a checkpointed head's
// AppendAsync leaves its delta pending (history.committed, w.device); the
// next AppendAsync's prepare takes it in stream order, after the copies
// in flight (history.prepare). Before, it took it at once, with no
// stream recorded, before the first call's queued copies landed, and At
// of that version read the zeroed block forever after.
func TestQueuedCheckpointDeltaOfAsyncAppend(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	l := kv(Append, 0, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 8}
	h := must[*Head](t)(p.NewHead(l, "a"))
	open := r.hold(t, st)
	check(t, h.AppendAsync(st, kvRows(2, 1)))
	v1 := h.Version()
	check(t, h.AppendAsync(st, kvRows(2, 2)))
	open()
	check(t, st.Sync())
	queuedheck(t, "head", h, qwModel(kvRows(2, 1)).add(kvRows(2, 2)))
	s := must[*Snap](t)(h.At(v1))
	queuedheck(t, "At(v1)", s, qwModel(kvRows(2, 1)))
	check(t, s.Release())
	check(t, h.Release())
	qwLeaks(t, p)
}

// TestQueuedCheckpointDeltaOfAsyncAppendNoHold: the same with nothing
// held: a decode loop of AppendAsync calls on one stream, then At of
// every version (before, most runs read other rows at most versions).
func TestQueuedCheckpointDeltaOfAsyncAppendNoHold(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	l := kv(Append, 0, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 64}
	h := must[*Head](t)(p.NewHead(l, "a"))
	m := qwModel(kvRows(0, 0))
	var vs []Version
	var ms []qwModel
	for i := 0; i < 32; i++ {
		check(t, h.AppendAsync(st, kvRows(1, byte(i))))
		m = m.add(kvRows(1, byte(i)))
		vs, ms = append(vs, h.Version()), append(ms, m)
	}
	check(t, st.Sync())
	bad := 0
	for i, v := range vs {
		s := must[*Snap](t)(h.At(v))
		if got := readAll(t, s); !equalCols(got, ms[i]) {
			bad++
		}
		check(t, s.Release())
	}
	if bad > 0 {
		t.Errorf("%d of %d versions read other rows through At", bad, len(vs))
	}
	check(t, h.Release())
	qwLeaks(t, p)
}

// TestQueuedRollbackKernelTailThenSnapRelease probes the same rule on one
// head: a kernel queued (held) writes the AppendDevice rows past a
// snapshot in the shared tail block, RecordStream; the head rolls back to
// the snapshot, the snapshot is released (the head now holds the block
// alone) and the head appends on the host over the kernel's bytes.
func TestQueuedRollbackKernelTailThenSnapRelease(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Invalidate), "a"))
	check(t, h.Append(kvRows(3, 1)))
	s := must[*Snap](t)(h.Snapshot())
	sp := must[[][]device.Span](t)(h.AppendDevice(4))
	open := r.hold(t, st)
	for c, col := range sp {
		rb := []int{16, 8}[c]
		for _, x := range col {
			r.fillOn(t, st, x.Ptr, 0xEE, x.Rows*rb)
		}
	}
	check(t, h.RecordStream(st))
	check(t, h.Rollback(s))
	check(t, s.Release())
	// The append copies the tail block the kernel's queued work uses, and
	// the copy waits for the kernel: it returns once the stream runs.
	done := make(chan error, 1)
	go func() { done <- h.Append(kvRows(4, 3)) }()
	time.Sleep(10 * time.Millisecond)
	open()
	check(t, <-done)
	check(t, st.Sync())
	queuedheck(t, "head", h, qwModel(kvRows(3, 1)).add(kvRows(4, 3)))
	check(t, h.Release())
	qwLeaks(t, p)
}

// TestQueuedReleasedBranchQueuedReadSeesParentAppend: the read side of
// the same rule: a branch appends on the host in place past the tail it
// shares with its parent, queues a ReadAsync of those rows on a held
// stream (recorded on the block) and is released; the parent, now alone
// on the block, must not append in place over those bytes before the
// queued read ran, which would then read the parent's rows.
func TestQueuedReleasedBranchQueuedReadSeesParentAppend(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	check(t, h.Append(kvRows(3, 1)))
	b := must[*Head](t)(h.Branch())
	check(t, b.Append(kvRows(4, 2)))
	open := r.hold(t, st)
	dst := [][]byte{make([]byte, 7*16), make([]byte, 7*8)}
	check(t, b.ReadAsync(st, 0, 7, dst))
	check(t, b.Release())
	check(t, h.Append(kvRows(4, 3)))
	open()
	check(t, st.Sync())
	if want := qwModel(kvRows(3, 1)).add(kvRows(4, 2)); !equalCols(dst, want) {
		t.Errorf("the branch's queued read reads row 3 %x, want the branch's %x", dst[0][48:64], want[0][48:64])
	}
	queuedheck(t, "parent", h, qwModel(kvRows(3, 1)).add(kvRows(4, 3)))
	check(t, h.Release())
	qwLeaks(t, p)
}
