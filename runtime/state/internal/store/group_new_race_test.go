package store

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestNewGroupWhileEvictionCounts: NewGroup makes its members with NewHead
// (each in the pool's live list at once), then sets their history
// entries' commit order (oneCut); the eviction reads the members'
// histories under their try-locks meanwhile (freeable counting the
// optional handles together). NewGroup sets the order under the members'
// locks: make test runs this under the race detector.
func TestNewGroupWhileEvictionCounts(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 64 * 256})
	ls := pressureGroupLayouts(true)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			eviction{p}.freeable(1 << 40)
		}
	}()
	for range 2000 {
		g := must[*Group](t)(NewGroup(p, "g", ls...))
		check(t, g.Release())
	}
	stop.Store(true)
	wg.Wait()
}

// TestNewGroupMembersNotEvictedAlone: a group's members are evicted
// together, from their birth: NewGroup makes them one by one, and an
// eviction for a later member's blocks took an earlier one alone, which
// the pool listed as a head of its own until the group coupled them; the
// new group then read one member and found the other evicted. A breaker
// helper found it.
func TestNewGroupMembersNotEvictedAlone(t *testing.T) {
	opt := &Layout{Type: "Opt", Columns: []Column{{Name: "Row", ElemSize: 8, Width: 32}},
		Growth: Mutable, Bound: 2, Retention: Optional}
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256})
	for range 4 { // every block, each head used once
		h := must[*Head](t)(p.NewHead(opt, "other"))
		check(t, h.Read(0, 2, [][]byte{make([]byte, 512)}))
		defer h.Release()
	}
	g, err := NewGroup(p, "g", opt, opt)
	if err != nil {
		if errors.Is(err, ErrNoMemory) {
			return // refused whole: nothing to check
		}
		t.Fatal(err)
	}
	defer g.Release()
	var errs [2]error
	for i := range errs {
		errs[i] = g.Head(i).Read(0, 2, [][]byte{make([]byte, 512)})
	}
	if (errs[0] == nil) != (errs[1] == nil) {
		t.Fatalf("a new group's members, read at once: member 0: %v; member 1: %v", errs[0], errs[1])
	}
}
