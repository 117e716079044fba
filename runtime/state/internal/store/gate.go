package store

import (
	"sync"
	"sync/atomic"
)

// The pool's gate: every handle call holds the pool open, and Close shuts
// it, so that Close never frees memory a call is using. It is split in
// shards, one lock and one part of the pool's logical bytes each, every
// shard on cache lines of its own: a head and its snapshots hold their
// head's shard, and calls on heads of different shards write no line in
// common. One lock for the pool, read-held by every call, was one line
// that every call of every goroutine wrote twice: two goroutines serving
// sessions of their own each ran their calls at a third of one
// goroutine's speed (docs/BENCHMARKS.md, "Calls from several
// goroutines").

// gateShards is how many shards the gate has: far more than the cores
// that call at once, so that two goroutines' heads seldom share one.
const (
	gateBits   = 5
	gateShards = 1 << gateBits
)

// gate is the pool's gate.
type gate struct {
	shards [gateShards]gateShard
}

// gateShard is one shard of the gate. The padding keeps its hot words 64
// bytes or more from any other shard's and from the fields around the
// gate, so that no two of them share a cache line wherever the pool lies.
type gateShard struct {
	_ [64]byte
	// mu is read-held by the calls of the shard's handles, write-held by
	// Close.
	mu sync.RWMutex
	// logical is the shard's part of PoolStats.LogicalBytes: the logical
	// bytes its handles' changes added, less those they dropped.
	logical atomic.Int64
	// history is the shard's part of PoolStats.HistoryBytes: the bytes
	// of delta blocks its heads' histories hold (history.held).
	history atomic.Int64
}

// gateOf returns the shard of the head or group of id id.
func gateOf(id uint64) uint8 { return uint8(id % gateShards) }

// Heads take their ids shard by shard: a new head takes the next shard in
// turn (nextShard), a branch its parent's, and each its id from its
// shard's counter (newHeadID), so that a beam search's branches, which one
// goroutine makes and uses, stay in their root's shard and take their ids
// with no write to a line every goroutine's branches write. An id is
// unique in the process and orders nothing but locks (cmpID).
var (
	headShards atomic.Uint64
	headIDs    [gateShards]struct {
		_ [64]byte
		n atomic.Uint64
	}
)

// nextShard returns the shard of the next new head.
func nextShard() uint8 { return gateOf(headShards.Add(1)) }

// newHeadID returns a new id of a head of shard k: gateOf gives k back.
func newHeadID(k uint8) uint64 { return headIDs[k].n.Add(1)<<gateBits | uint64(k) }

// rlock read-holds shard k.
func (g *gate) rlock(k uint8) { g.shards[k].mu.RLock() }

// runlock lets shard k go.
func (g *gate) runlock(k uint8) { g.shards[k].mu.RUnlock() }

// shut write-holds every shard, in order, for Close: no call runs until
// open.
func (g *gate) shut() {
	for i := range g.shards {
		g.shards[i].mu.Lock()
	}
}

// open lets calls run again after shut.
func (g *gate) open() {
	for i := len(g.shards) - 1; i >= 0; i-- {
		g.shards[i].mu.Unlock()
	}
}

// add adds d to shard k's part of the logical bytes.
func (g *gate) add(k uint8, d int64) {
	if d != 0 {
		g.shards[k].logical.Add(d)
	}
}

// logical returns the pool's logical bytes: the sum of the shards'
// parts. It is exact when no call changes them meanwhile.
func (g *gate) logical() int64 {
	var n int64
	for i := range g.shards {
		n += g.shards[i].logical.Load()
	}
	return n
}

// history returns the bytes of delta blocks the pool's histories hold:
// the sum of the shards' parts.
func (g *gate) history() int64 {
	var n int64
	for i := range g.shards {
		n += g.shards[i].history.Load()
	}
	return n
}

// zero sets every shard's parts to zero, for Close.
func (g *gate) zero() {
	for i := range g.shards {
		g.shards[i].logical.Store(0)
		g.shards[i].history.Store(0)
	}
}
