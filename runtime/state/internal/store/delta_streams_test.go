package store

import (
	"testing"
	"time"
)

// TestDeltaAfterSeveralStreamsHoldsNoOtherHead: a checkpointed head's
// delta of rows it appended on two streams, one held by a gate, is copied
// after the work on both, on the pool's own stream: a wait queued on one
// of the caller's streams held every later piece of work there behind
// the other's, so that another head's read of what it appended on that
// stream waited for work it never queued.
func TestDeltaAfterSeveralStreamsHoldsNoOtherHead(t *testing.T) {
	rig := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(rig.b, PoolOptions{BlockBytes: 256}))
	st0, st1 := rig.stream(t), rig.stream(t)
	la := kv(Append, 0, Keep)
	la.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 4}
	a := must[*Head](t)(p.NewHead(la, "a"))
	check(t, a.AppendAsync(st0, kvRows(3, 1)))
	check(t, st0.Sync())
	open := rig.hold(t, st1)
	check(t, a.AppendAsync(st1, kvRows(2, 2)))
	check(t, a.AppendAsync(st1, kvRows(2, 3))) // its delta follows st0's work and st1's
	check(t, a.Release())
	b := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "b"))
	check(t, b.AppendAsync(st0, kvRows(4, 4)))
	got := [][]byte{make([]byte, 4*16), make([]byte, 4*8)}
	read := make(chan error, 1)
	go func() { read <- b.Read(0, 4, got) }()
	select {
	case err := <-read:
		check(t, err)
		if want := kvRows(4, 4); string(got[0]) != string(want[0]) || string(got[1]) != string(want[1]) {
			t.Error("head b reads other rows")
		}
	case <-time.After(3 * time.Second):
		open()
		<-read
		t.Fatal("head b's read waited for head a's held work on a stream b never used")
	}
	open()
	check(t, st1.Sync())
	check(t, st0.Sync())
	check(t, b.Release())
	p.WaitPending()
}
