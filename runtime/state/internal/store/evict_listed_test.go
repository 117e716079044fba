package store

import (
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"

	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestCachedVictimTakenAsListed: a cached prefix entry that eviction
// listed but that changed since (a head adopted it, or it freed again)
// is not replaced by the free list's front while queued work still uses
// some victims' blocks: eviction spared those victims by the entries it
// listed (awaitVictimWork), and the front may be one of them, whose
// blocks would then stay pending behind that work while the call that
// evicted them failed anyway (seed 3004 of the interaction model). With
// no work to spare, drop still takes the front.
func TestCachedVictimTakenAsListed(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p, err := NewPool(r.Backend, PoolOptions{})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	held, err := r.Streams().NewStream()
	check(t, err)
	defer held.Close()

	// The front of the cache's free list, least recently freed: a
	// prompt's block whose head recorded the held stream on it.
	busy := must[*Head](t)(p.NewSharedHead(tokLayout, "b", "d"))
	for i := range 16 {
		check(t, busy.Append(tokRow(uint32(1000+i))))
	}
	check(t, busy.RecordStream(held))
	check(t, busy.Release())
	// Another prompt's block, freed after it.
	idle := must[*Head](t)(p.NewSharedHead(tokLayout, "a", "d"))
	for i := range 16 {
		check(t, idle.Append(tokRow(uint32(i))))
	}
	check(t, idle.Release())

	c := &p.cache
	c.mu.Lock()
	front := c.free.front
	second := front.next
	c.mu.Unlock()
	if front == nil || second == nil {
		t.Fatal("the cache does not hold both prompts' blocks")
	}
	r.Hold(t, held)
	var once sync.Once
	release := func() { once.Do(r.Release) }
	defer release()

	stale := &cachedEntry{p: p, e: second, used: second.used + 1} // listed at another use
	if n, moved, ok := (eviction{p}).evictOne(stale, true); ok || moved || n != 0 {
		t.Fatalf("evictOne as listed of an entry that changed: %d bytes, moved %v, ok %v; want nothing", n, moved, ok)
	}
	if st := p.Stats(); st.PendingBytes != 0 || front.gone {
		t.Fatalf("the front entry, whose blocks the held stream uses, was evicted in the stale one's place (pending %d bytes)", st.PendingBytes)
	}
	// Without work to spare, a stale victim still makes room: the front.
	release()
	if _, _, ok := (eviction{p}).evictOne(stale, false); !ok || !front.gone || second.gone {
		t.Fatalf("evictOne of a stale entry: ok %v, front gone %v, listed one gone %v; want the front taken", ok, front.gone, second.gone)
	}
	p.WaitPending()
	checkInv(t, p)
}

// BenchmarkEvictListing: what every reclaim pays to list and describe the
// victims when one optional head holds a snapshot of each of its versions
// (one block a version, all in one joint set), at 2,000 snapshots and at
// 250, side by side; the ratio is 8 where the cost grows with the
// snapshots, 64 where it grows with their square.
func BenchmarkEvictListing(b *testing.B) {
	list := func(snaps int) func() time.Duration {
		p := benchPool(b, device.Host(), PoolOptions{BlockBytes: 256})
		h := must[*Head](b)(p.NewHead(wide("Cache", Optional), "a"))
		for i := range snaps {
			check(b, h.Append(wideRow(byte(i))))
			must[*Snap](b)(h.Snapshot())
		}
		e := eviction{p}
		if sets := jointSets(e.listedVictims()); len(sets) != 1 {
			b.Fatalf("%d joint sets, want the one", len(sets))
		}
		return func() time.Duration {
			start := time.Now()
			e.victims(Optional)
			return time.Since(start)
		}
	}
	alternate(b, 1, list(2000), "ns/list-2000", list(250), "ns/list-250")
}
