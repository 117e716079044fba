package store

// The records of a write: the operations its plan makes (write.go) and
// the buffers a head's writes reuse from call to call.

import (
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
)

// blockOp is what a write does to one block of one column.
type blockOp struct {
	col, idx int
	old      *block // the block at idx; nil past the column's last block
	nb       *block // the new block that replaces old; nil writes old in place
	keep     int    // bytes of old to copy into nb first; -1: old is covered whole, replace it if the pool has room (not on host memory: hostInPlace)
	off      int    // byte offset in the block where src goes
	src      []byte // host rows to write; nil for none
	visible  bool   // an in-place write over rows a reader may see
	alone    bool   // the claim was old's fill set on the head's own block (SetFill), not a claim of one others share
	fill     int    // an append's: the bytes of the block its version holds after it (Block.SetFill)
	claimed  int    // an append that claimed old's bytes from here to fill (inPlace), plus one; 0: none
}

// writeBufs are the buffers a head's writes reuse from call to call, so
// that a decode step allocates none. A released head gives them to its
// pool's spares and a new head or branch takes them from there: a beam
// search branches and releases a beam's worth of heads a step, each of
// which grew its own buffers on its first write. They are used with h.mu
// held, and never after the head is released.
type writeBufs struct {
	scratch  []*block          // the blocks a write takes
	countBuf []int             // a write's blocks per column
	ops      []blockOp         // small writes' plans (write.go)
	copies   []device.HostCopy // a write's copies from the host
	reads    []device.HostRead // a read's copies to the host (shape.read)
	freed    []*block          // the blocks a write gives back (freeing)
	saved    []byte            // what a write in place overwrites
	// stepCols and stepSpans are Step's spans: the step function may use
	// them during its call only (writeTx.spans).
	stepCols  [][]device.Span
	stepSpans []device.Span
}

// maxSpareBufs is how many released heads' buffers a shard's stock keeps
// (a pool: gateShards times as many), and maxSpareLen the longest buffer
// it keeps of them: a spare is held until a new head takes it, and a bulk
// write's are large.
const (
	maxSpareBufs = 32
	maxSpareLen  = 1024
)

// spareBufs are spare write buffers of a shard of a pool's gate: a
// branch takes its parent's shard's, and a head gives its own back to
// its shard's, so that two goroutines' branches seldom share a stock.
// The padding keeps each stock's lock on cache lines of its own.
type spareBufs struct {
	_    [64]byte
	mu   sync.Mutex
	bufs []writeBufs
	n    atomic.Int32 // len(bufs), read without mu by another shard's take
}

// put keeps b's buffers, emptied and cleared of what they referenced, and
// leaves b empty.
func (s *spareBufs) put(b *writeBufs) {
	keep := writeBufs{
		scratch:   cleared(b.scratch),
		countBuf:  cleared(b.countBuf),
		ops:       cleared(b.ops),
		copies:    cleared(b.copies),
		reads:     cleared(b.reads),
		freed:     cleared(b.freed),
		saved:     cleared(b.saved),
		stepCols:  cleared(b.stepCols),
		stepSpans: cleared(b.stepSpans),
	}
	*b = writeBufs{}
	if keep.empty() {
		return // nothing to keep: a head that never wrote, or took none
	}
	s.mu.Lock()
	if len(s.bufs) < maxSpareBufs {
		s.bufs = append(s.bufs, keep)
		s.n.Store(int32(len(s.bufs)))
	}
	s.mu.Unlock()
}

// empty reports whether b holds no buffer.
func (b *writeBufs) empty() bool {
	return b.scratch == nil && b.countBuf == nil && b.ops == nil && b.copies == nil && b.reads == nil &&
		b.freed == nil && b.saved == nil && b.stepCols == nil && b.stepSpans == nil
}

// spareStocks are a pool's stocks of spare write buffers, one a shard of
// its gate.
type spareStocks [gateShards]spareBufs

// take moves spare buffers into b: shard k's, or, where it has none, those
// of the nearest shard before it that has some (skipped by their counts,
// read unlocked). New heads take the shards in turn, so that a beam
// search's root, made anew for each query, finds the last query's beams'
// buffers in the shard before its own, and a round of new sessions those
// the last round's released.
func (st *spareStocks) take(k uint8, b *writeBufs) {
	for i := range spareLookBack + 1 {
		s := &st[(int(k)-i+gateShards)%gateShards]
		if (i == 0 || s.n.Load() > 0) && s.take(b) {
			return
		}
	}
}

// spareLookBack is how many shards before its own a head looks in for
// spare buffers when its own has none: all.
const spareLookBack = gateShards - 1

// take moves the last spare buffers into b, if there are any, and
// reports whether there were.
func (s *spareBufs) take(b *writeBufs) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.bufs)
	if n == 0 {
		return false
	}
	*b = s.bufs[n-1]
	s.bufs[n-1] = writeBufs{}
	s.bufs = s.bufs[:n-1]
	s.n.Store(int32(n - 1))
	return true
}

// cleared returns buf emptied, every element of its capacity zeroed, or
// nil when it is longer than a spare keeps.
func cleared[T any](buf []T) []T {
	if cap(buf) > maxSpareLen {
		return nil
	}
	clear(buf[:cap(buf)])
	return buf[:0]
}
