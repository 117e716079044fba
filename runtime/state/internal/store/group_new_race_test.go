package store

import (
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
