package store

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// tierStreamPool is a pool of 256-byte blocks with a host tier on r's
// backend, and an optional head of rows wide rows seeded 40 moved to the
// tier.
func tierStreamPool(t *testing.T, r *statetest.StreamRig, blockBytes, rows int) (*Pool, *Head) {
	t.Helper()
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: blockBytes, MaxBytes: 16 * int64(blockBytes), HostTier: 64 << 10})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	h := headOf(t, p, wide("Cache", Optional), "a")
	fill(t, h, rows, 40)
	if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
		t.Fatalf("move out: %v, %v", moved, err)
	}
	return p, h
}

// holdTier holds the tier's stream back and returns its release, which
// runs, once, when the test ends too (before the pool closes).
func holdTier(t *testing.T, r *statetest.StreamRig, p *Pool) func() {
	t.Helper()
	r.Hold(t, p.tier.stream())
	var once sync.Once
	release := func() { once.Do(r.Release) }
	t.Cleanup(release)
	return release
}

// notYet fails t when done is closed within a short while: the call it
// stands for returned while the copies it needs were held back.
func notYet(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("%s returned before the copies back from the tier ran", what)
	case <-time.After(30 * time.Millisecond):
	}
}

// TestTierPrefetchAsync: Prefetch queues the copies back on the tier's
// stream and returns while they are held back; a read waits for them and
// sees the rows. A head released while its copies are held back leaves
// its blocks pending until they ran, and the tier's memory comes back.
func TestTierPrefetchAsync(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p, h := tierStreamPool(t, r, 256, 2)
		if copiedAtOnce(t, p, h, catWide(wideRow(40), wideRow(41))) {
			return
		}
		release := holdTier(t, r, p)
		check(t, h.Prefetch()) // returns with the copies held back
		if h.tier != nil || p.Stats().TierIn != 512 {
			t.Fatal("Prefetch did not start the return")
		}
		done := make(chan struct{})
		var got []byte
		go func() {
			defer close(done)
			got = readWide(t, h)
		}()
		notYet(t, done, "a read after Prefetch")
		release()
		<-done
		if !bytes.Equal(got, catWide(wideRow(40), wideRow(41))) {
			t.Fatal("the rows read after Prefetch differ")
		}
		checkInv(t, p)

		// Released with the copies held back: the blocks wait for them.
		if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
			t.Fatalf("second move out: %v, %v", moved, err)
		}
		p.WaitPending() // the blocks it freed carry the tier's stream
		release = holdTier(t, r, p)
		check(t, h.Prefetch())
		check(t, h.Release())
		if st := p.Stats(); st.PendingBytes != 512 {
			t.Fatalf("pending %d bytes while the copies back are held, want 512", st.PendingBytes)
		}
		release()
		p.WaitPending()
		if st := p.Stats(); st.PendingBytes != 0 || st.TierBytes != 0 {
			t.Fatalf("after the copies: pending %d, tier %d; want 0, 0", st.PendingBytes, st.TierBytes)
		}
		checkInv(t, p)
	})
}

// TestTierReturnStreamOrder: calls that take a stream order it after the
// copies back from the tier instead of waiting: ReadAsync reads the rows
// brought back, and an AppendAsync into the last block, which the copies
// write whole, lands after them.
func TestTierReturnStreamOrder(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p, h := tierStreamPool(t, r, 512, 1) // two rows a block: the last is part full
		if copiedAtOnce(t, p, h, catWide(wideRow(40))) {
			return
		}
		sb := r.Streams()
		st := must[device.Stream](t)(sb.NewStream())
		defer st.Close()
		release := holdTier(t, r, p)
		check(t, h.Prefetch())
		buf := must[[]byte](t)(sb.HostAlloc(256))
		defer sb.HostFree(buf)
		check(t, h.ReadAsync(st, 0, 1, [][]byte{buf}))
		check(t, h.AppendAsync(st, wideRow(7)))
		ev := must[device.Event](t)(sb.Record(st))
		defer ev.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			ev.Wait()
		}()
		notYet(t, done, "work queued on a stream after Prefetch")
		release()
		<-done
		if !bytes.Equal(buf, wideRow(40)[0]) {
			t.Fatal("ReadAsync did not read the rows brought back")
		}
		if got := readWide(t, h); !bytes.Equal(got, catWide(wideRow(40), wideRow(7))) {
			t.Fatal("the copies back overwrote the row appended on a stream after them")
		}
		checkInv(t, p)
	})
}

// copiedAtOnce reports whether p's tier copies at once (the host backend,
// whose device memory is host memory: a stream would only delay a
// memmove), after checking that Prefetch brought h back with want, with
// no copy left queued.
func copiedAtOnce(t *testing.T, p *Pool, h *Head, want []byte) bool {
	t.Helper()
	if !p.tier.memcpy {
		return false
	}
	check(t, h.Prefetch())
	if h.tier != nil || len(h.async.inflight) != 0 {
		t.Fatal("Prefetch on the host backend left the return queued")
	}
	if got := readWide(t, h); !bytes.Equal(got, want) {
		t.Fatal("the rows read after Prefetch differ")
	}
	checkInv(t, p)
	return true
}

// TestTierAfterAppendAsyncLanded: an optional head whose AppendAsync
// copies completed while nobody called it moves to the host tier when
// the pool needs its room, and comes back with the rows (it was dropped,
// as if the copies were still in flight). One whose copies are held back
// on their stream moves only after them: the rows brought back are the
// appended ones.
func TestTierAfterAppendAsyncLanded(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256, MaxBytes: 4 * 256, HostTier: 64 << 10})
		check(t, err)
		t.Cleanup(func() { p.Close() })
		st, err := r.Streams().NewStream()
		check(t, err)
		defer st.Close()

		landed := headOf(t, p, wide("Cache", Optional), "a")
		check(t, landed.AppendAsync(st, catCols(wideRow(40), wideRow(41))))
		check(t, st.Sync()) // the copies completed; the head was not called since
		m := headOf(t, p, wide("Session", Mandatory), "m")
		fill(t, m, 3, 1)
		if s := p.Stats(); landed.tier == nil || s.TierOut != 512 || s.EvictedBytes != 0 {
			t.Fatalf("a head whose appends landed: in the tier %v, tier out %d, evicted %d; want true, 512, 0",
				landed.tier != nil, s.TierOut, s.EvictedBytes)
		}
		check(t, m.Release())
		if got := readWide(t, landed); !bytes.Equal(got, catWide(wideRow(40), wideRow(41))) {
			t.Fatal("the rows brought back from the tier differ")
		}
		check(t, landed.Release())
		checkInv(t, p)

		held := headOf(t, p, wide("Cache", Optional), "b")
		r.Hold(t, st)
		check(t, held.AppendAsync(st, catCols(wideRow(50), wideRow(51))))
		go func() {
			time.Sleep(30 * time.Millisecond)
			r.Release()
		}()
		m = headOf(t, p, wide("Session", Mandatory), "m2")
		fill(t, m, 3, 1) // waits for the held copies, then moves the head
		if s := p.Stats(); held.tier == nil || s.TierOut != 1024 || s.EvictedBytes != 0 {
			t.Fatalf("a head whose appends were held back: in the tier %v, tier out %d, evicted %d; want true, 1024, 0",
				held.tier != nil, s.TierOut, s.EvictedBytes)
		}
		check(t, m.Release())
		if got := readWide(t, held); !bytes.Equal(got, catWide(wideRow(50), wideRow(51))) {
			t.Fatal("the rows brought back are not the appended ones")
		}
		checkInv(t, p)
	})
}

// catCols joins rows of one layout, column by column, into one batch.
func catCols(rows ...[][]byte) [][]byte {
	out := make([][]byte, len(rows[0]))
	for _, r := range rows {
		for c, col := range r {
			out[c] = append(out[c], col...)
		}
	}
	return out
}
