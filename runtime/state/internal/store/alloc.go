package store

import (
	"errors"
	"sync"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// allocator is the pool's allocation: blocks of its size classes from the
// block allocator, reclaiming through eviction when there is no room, and
// freed blocks given back, behind a fence where a recorded stream's work
// may still use them. The pool embeds it: its fields and methods are the
// pool's (p.mem, p.alloc, p.free), set up by makePool.
type allocator struct {
	// mem is the block allocator: size classes, slabs, free lists and
	// fences. own is the class of the pool's own block size.
	mem  *blocks.Allocator
	own  *sizeClass
	room reclaimer // eviction, for allocation to reclaim through
	// be is the pool's backend, and fences its streams recorded on
	// blocks (p.rec, stream.go), which fence the blocks free gives back.
	be     device.Backend
	fences *recorded
	// freedLists holds the lists releases gather freed blocks in
	// (takeFreed): a released state frees all its blocks at once, and a
	// list grown afresh for each was most of what a serving loop that
	// renews its states allocated.
	freedLists sync.Pool
}

// reclaimer makes room when allocation finds none: eviction (evict.go),
// which the pool is made with (makePool). It is the one seam between
// allocating blocks and evicting the states that hold them, so that
// allocation, which every feature calls, names nothing above it.
type reclaimer interface {
	// reclaim makes room for want blocks of class c, waiting for pending
	// blocks or evicting, and reports whether it made any.
	reclaim(c *sizeClass, want int, deviceFull bool) bool
	// freeable returns the bytes eviction could free now, counted until
	// they reach need.
	freeable(need int64) int64
	// victimBlocks returns the blocks eviction would free, sparing the
	// states whose blocks the busy streams' work holds: each victim's own,
	// or, together, those the optional ones hold among themselves.
	victimBlocks(busy []device.Stream, together bool) []*block
}

// alloc returns n blocks of the pool's own size for owner, each with
// reference count 1 (see blocks.Allocator.Alloc for which free blocks it
// takes), reclaiming when the pool is full.
func (a *allocator) alloc(owner Owner, n int, zero bool) ([]*block, error) {
	hand := handDirty
	if zero {
		hand = handZeroed
	}
	return a.allocIn(nil, a.own, owner, n, hand)
}

// handing says how an allocation hands its blocks out (blocks.Hand):
// handDirty, handZeroed (reading as zeros) or handFilled (their fills
// kept, for a caller that sets every one before it shares the block).
type handing = blocks.Hand

const (
	handDirty  = blocks.Dirty
	handZeroed = blocks.Zeroed
	handFilled = blocks.Filled
)

// allocIn is alloc of blocks of class c appending to buf[:0]. When the
// pool or the device is full, it reclaims (see reclaim) and tries again
// while reclaiming makes room (a few times: other calls may take it
// first).
func (a *allocator) allocIn(buf []*block, c *sizeClass, owner Owner, n int, hand handing) ([]*block, error) {
	out, err := a.allocTry(buf, c, owner, n, hand)
	if err == nil || !errors.Is(err, ErrNoMemory) || a.mem.Fits(c, n) != nil {
		return out, err // no reclaim makes room for more than the pool holds
	}
	for range maxAllocTries {
		if !a.room.reclaim(c, n, errors.Is(err, device.ErrOutOfMemory)) {
			break
		}
		out, err = a.mem.AllocHand(buf, c, string(owner), n, hand)
		if err == nil || !errors.Is(err, ErrNoMemory) {
			break
		}
	}
	return out, err
}

// roomForAll reports whether eviction, with the blocks pending now, could
// make room for ns[i] blocks of classes[i] for every i, the classes taken
// in that order (allocColsOf). Bytes first: the bytes short, each class's
// alone or all of them in bytes, whichever is more, are at most what
// eviction could free and the pending blocks give back. Then runs, as
// reclaim weighs them for one class: the blocks every victim would free,
// merged with the free ones into runs, must hold every class's blocks, the
// runs the classes before it left (ShortfallAllIf). Without the runs, an
// allocation of 256- and 512-byte blocks evicted for the 256-byte ones and
// then found no run of 512 bytes (seeds 1102, 1135, 1191 of the
// interaction model): a call that failed anyway, having evicted.
func (a *allocator) roomForAll(classes []*sizeClass, ns []int, deviceFull bool) bool {
	var short, want int64
	for i, cl := range classes {
		want += int64(ns[i]) * int64(cl.Bytes())
		short = max(short, a.shortfall(cl, ns[i], deviceFull))
	}
	short = max(short, want-a.mem.Room(deviceFull))
	pending := a.mem.Stats().Pending
	if short > a.room.freeable(short-pending)+pending {
		return false
	}
	if a.mem.ShortfallAllIf(classes, ns, deviceFull, a.room.victimBlocks(nil, false)) <= pending {
		return true
	}
	return a.mem.ShortfallAllIf(classes, ns, deviceFull, a.room.victimBlocks(nil, true)) <= pending
}

// maxAllocTries bounds the reclaims of one allocation: each one made room,
// but other calls may take it first.
const maxAllocTries = 8

// allocOnce is one try of allocIn, with no reclaim: it answers
// ErrNoMemory rather than wait for pending blocks or evict anything.
// Calibration allocates through it, so that measuring never takes another
// state's memory.
func (a *allocator) allocOnce(buf []*block, c *sizeClass, owner Owner, n int, zero bool) ([]*block, error) {
	return a.mem.Alloc(buf, c, string(owner), n, zero)
}

// allocTry is allocIn with no reclaim: ErrNoMemory when the pool has no
// room for the n blocks now.
func (a *allocator) allocTry(buf []*block, c *sizeClass, owner Owner, n int, hand handing) ([]*block, error) {
	if n <= 0 {
		return buf[:0], nil
	}
	if n == 1 && hand != handZeroed {
		// The owner's block freed last, if it is still hot: no lock.
		if b := a.mem.TakeHot(c, string(owner)); b != nil {
			return append(buf[:0], b), nil
		}
	}
	if err := a.mem.Fits(c, n); err != nil {
		return buf[:0], err
	}
	return a.mem.AllocHand(buf, c, string(owner), n, hand)
}

// takeOne is allocTry of one block.
func (a *allocator) takeOne(c *sizeClass, owner Owner) (*block, error) {
	var one [1]*block
	b, err := a.allocTry(one[:0], c, owner, 1, handDirty)
	if err != nil {
		return nil, err
	}
	return b[0], nil
}

// free gives blocks whose reference count reached zero back to the
// allocator. Blocks a recorded stream used wait behind a fence for that
// stream's work first (see RecordStream); free itself never waits.
func (a *allocator) free(list []*block) {
	if len(list) == 0 {
		return
	}
	list = a.fences.fenceRecorded(a.be, a.mem, list)
	a.mem.Free(list)
}

// maxFreedList is the longest freed list takeFreed keeps for reuse; a
// release of a larger state grows its own and leaves it to the collector.
// A kept list is scanned by every collection while it is kept, and one
// grown anew is fresh memory the release faults in page by page. With 64K
// blocks here, a bulk append loop that releases 200K blocks every 64
// batches spent a fifth of its time growing the list; the collections
// that scan a kept one cost its other rounds nothing measurable since tree
// nodes are reused (a third before: they were most of the garbage).
const maxFreedList = 1 << 18

// takeFreed returns an empty list to gather the blocks a release frees
// in; freeList frees them and gives the list back.
func (a *allocator) takeFreed() *[]*block {
	if l, ok := a.freedLists.Get().(*[]*block); ok {
		return l
	}
	return new([]*block)
}

// freeList frees the blocks of *l (free) and keeps l for the next
// takeFreed, emptied, unless it grew past maxFreedList.
func (a *allocator) freeList(l *[]*block) {
	a.free(*l)
	if cap(*l) > maxFreedList {
		return
	}
	clear(*l)
	*l = (*l)[:0]
	a.freedLists.Put(l)
}

// shortfall returns the bytes an allocation of want blocks of class c
// lacks (blocks.Allocator.Shortfall).
func (a *allocator) shortfall(c *sizeClass, want int, deviceFull bool) int64 {
	return a.mem.Shortfall(c, want, deviceFull)
}
