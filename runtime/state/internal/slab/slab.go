// Package slab hands out new values carved from larger allocations, for
// the store's handles and records that a serving loop makes at every step
// (a snapshot, a branch, a lineage segment): one allocation serves many
// values, and no value is ever handed out twice, so that a stale pointer to
// a released handle still finds that handle, released, never another one.
//
// The cost is memory held past its use: the garbage collector keeps a
// chunk while any of its values is reachable. A chunk is about 8 KiB (and
// at least 8 values), so one long-lived value keeps at most that much host
// memory alive; device memory is never in a chunk.
package slab

import (
	"sync"
	"unsafe"
)

// chunkBytes is a chunk's target size.
const chunkBytes = 8 << 10

// minValues and maxValues bound a chunk's count of values.
const (
	minValues = 8
	maxValues = 64
)

// Slab hands out zeroed values of T. Its zero value is ready to use, and it
// may be used from many goroutines at once.
type Slab[T any] struct {
	mu   sync.Mutex
	free []T
}

// New returns a pointer to a zero T that no earlier call returned.
func (s *Slab[T]) New() *T {
	s.mu.Lock()
	if len(s.free) == 0 {
		s.free = make([]T, count[T]())
	}
	v := &s.free[0]
	s.free = s.free[1:]
	s.mu.Unlock()
	return v
}

// count is how many values of T a chunk holds.
func count[T any]() int {
	var zero T
	n := chunkBytes / max(1, int(unsafe.Sizeof(zero)))
	return min(max(n, minValues), maxValues)
}
