package store

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// fencedPair makes, on p, an optional head that wrote past its snapshot
// (the head holds its third block alone and shares two with the
// snapshot), with held work on st reading the snapshot's blocks, and
// returns them.
func fencedPair(t *testing.T, r *statetest.StreamRig, p *Pool) (*Head, *Snap) {
	t.Helper()
	st := must[device.Stream](t)(r.Streams().NewStream())
	opened := false
	open := func() {
		if !opened {
			opened = true
			r.Release()
		}
	}
	t.Cleanup(func() { open(); st.Close(); p.WaitPending() })
	l := wide("Cache", Optional)
	l.Descendants = Keep
	h := must[*Head](t)(p.NewHead(l, "o"))
	t.Cleanup(func() { h.Release() })
	fill(t, h, 2, 10)
	s := must[*Snap](t)(h.Snapshot())
	t.Cleanup(func() { s.Release() })
	r.Hold(t, st)
	check(t, s.RecordStream(st)) // held work reads the snapshot's blocks
	fill(t, h, 1, 20)
	return h, s
}

// boundedCall runs f, failing t when it does not return in 5 s
// (PendingWait is 30 ms): a call that waits for held work.
func boundedCall(t *testing.T, f func() error) error {
	t.Helper()
	err, stalled := callWithin(5*time.Second, f)
	if stalled {
		t.Fatal("the call waited for the held stream's work")
	}
	return err
}

// TestEvictTogetherSkipsFencedBlocks: a call that only the head and its
// snapshot together could make room for, where held work reads the
// snapshot's blocks, is refused and evicts nothing: evicting the head
// leaves the snapshot's blocks its own, whose eviction would leave them
// pending behind that work (or, with a tier, wait for it). The count of
// the optional blocks together takes no block a stream was recorded on.
func TestEvictTogetherSkipsFencedBlocks(t *testing.T) {
	for _, tier := range []int64{0, 64 << 10} {
		statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
			p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256, PendingWait: 30 * time.Millisecond, HostTier: tier}))
			t.Cleanup(func() { p.Close() })
			h, _ := fencedPair(t, r, p)
			m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), "m"))
			t.Cleanup(func() { m.Release() })
			fill(t, m, 5, 50) // the pool is full
			before := p.Stats()
			err := boundedCall(t, func() error { return m.Append([][]byte{catWide(wideRow(1), wideRow(2), wideRow(3))}) })
			if !errors.Is(err, ErrNoMemory) {
				t.Fatalf("tier %d: %v, want ErrNoMemory", tier, err)
			}
			if st := p.Stats(); st.EvictedBytes != before.EvictedBytes || st.TierOut != before.TierOut {
				t.Fatalf("tier %d: a refused call evicted %d bytes, moved %d", tier, st.EvictedBytes-before.EvictedBytes, st.TierOut-before.TierOut)
			}
			if got := readWide(t, h); !bytes.Equal(got, catWide(wideRow(10), wideRow(11), wideRow(20))) {
				t.Fatal("the head's rows changed")
			}
			checkInv(t, p)
		})
	}
}

// TestEvictSparesSnapshotFencedOnceAlone: the snapshot of a head the same
// reclaim evicts first holds its blocks alone from then on; held work
// reading them makes it a victim to spare, as one whose own blocks the
// work reads from the start (awaitVictimWork lists the streams of every
// block an optional victim holds), rather than one to move to the tier,
// which would wait for the work, or to evict, whose blocks would go
// pending. Another optional head makes the room.
func TestEvictSparesSnapshotFencedOnceAlone(t *testing.T) {
	// The host backend's rig: the fake driver's runs its streams' work in
	// one queue, so that the tier's copy of the other head waits behind
	// the held work there.
	func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: 256, MaxBytes: 10 * 256, PendingWait: 30 * time.Millisecond, HostTier: 64 << 10}))
		t.Cleanup(func() { p.Close() })
		_, s := fencedPair(t, r, p)
		o := must[*Head](t)(p.NewHead(wide("Other", Optional), "p"))
		t.Cleanup(func() { o.Release() })
		fill(t, o, 3, 30)
		// The head is the least recently used, then the snapshot, then the
		// other head.
		check(t, s.Read(0, 1, [][]byte{make([]byte, 256)}))
		check(t, o.Read(0, 1, [][]byte{make([]byte, 256)}))
		m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), "m"))
		t.Cleanup(func() { m.Release() })
		fill(t, m, 4, 50) // the pool is full
		check(t, boundedCall(t, func() error {
			return m.Append([][]byte{catWide(wideRow(1), wideRow(2), wideRow(3), wideRow(4))})
		}))
		if s.evicted || s.tier != nil {
			t.Fatalf("the snapshot held work reads was taken: evicted %v, in the tier %v", s.evicted, s.tier != nil)
		}
		if got := readWide(t, s); !bytes.Equal(got, catWide(wideRow(10), wideRow(11))) {
			t.Fatal("the snapshot's rows changed")
		}
		checkInv(t, p)
	}(t, statetest.HostStreamRig(t))
}
