package store

import (
	"errors"

	"github.com/gpustate/gpustate/runtime/device"
)

// alloc returns n blocks of the pool's own size for owner, each with
// reference count 1 (see blocks.Allocator.Alloc for which free blocks it
// takes), reclaiming when the pool is full.
func (p *Pool) alloc(owner Owner, n int, zero bool) ([]*block, error) {
	return p.allocIn(nil, p.own, owner, n, zero)
}

// allocIn is alloc of blocks of class c appending to buf[:0]. When the
// pool or the device is full, it reclaims (see reclaim) and tries again
// while reclaiming makes room (a few times: other calls may take it
// first).
func (p *Pool) allocIn(buf []*block, c *sizeClass, owner Owner, n int, zero bool) ([]*block, error) {
	out, err := p.allocTry(buf, c, owner, n, zero)
	if err == nil || !errors.Is(err, ErrNoMemory) || p.mem.Fits(c, n) != nil {
		return out, err // no reclaim makes room for more than the pool holds
	}
	for range maxAllocTries {
		if !p.room.reclaim(c, n, errors.Is(err, device.ErrOutOfMemory)) {
			break
		}
		out, err = p.mem.Alloc(buf, c, string(owner), n, zero)
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
func (p *Pool) roomForAll(classes []*sizeClass, ns []int, deviceFull bool) bool {
	var short, want int64
	for i, cl := range classes {
		want += int64(ns[i]) * int64(cl.Bytes())
		short = max(short, p.shortfall(cl, ns[i], deviceFull))
	}
	short = max(short, want-p.mem.Room(deviceFull))
	pending := p.mem.Stats().Pending
	if short > p.room.freeable(short-pending)+pending {
		return false
	}
	return p.mem.ShortfallAllIf(classes, ns, deviceFull, p.room.victimBlocks(nil)) <= pending
}

// maxAllocTries bounds the reclaims of one allocation: each one made room,
// but other calls may take it first.
const maxAllocTries = 8

// allocOnce is one try of allocIn, with no reclaim: it answers
// ErrNoMemory rather than wait for pending blocks or evict anything.
// Calibration allocates through it, so that measuring never takes another
// state's memory.
func (p *Pool) allocOnce(buf []*block, c *sizeClass, owner Owner, n int, zero bool) ([]*block, error) {
	return p.mem.Alloc(buf, c, string(owner), n, zero)
}

// allocTry is allocIn with no reclaim: ErrNoMemory when the pool has no
// room for the n blocks now.
func (p *Pool) allocTry(buf []*block, c *sizeClass, owner Owner, n int, zero bool) ([]*block, error) {
	if n <= 0 {
		return buf[:0], nil
	}
	if n == 1 && !zero {
		// The owner's block freed last, if it is still hot: no lock.
		if b := p.mem.TakeHot(c, string(owner)); b != nil {
			return append(buf[:0], b), nil
		}
	}
	if err := p.mem.Fits(c, n); err != nil {
		return buf[:0], err
	}
	return p.mem.Alloc(buf, c, string(owner), n, zero)
}

// takeOne is allocTry of one block.
func (p *Pool) takeOne(c *sizeClass, owner Owner) (*block, error) {
	var one [1]*block
	b, err := p.allocTry(one[:0], c, owner, 1, false)
	if err != nil {
		return nil, err
	}
	return b[0], nil
}

// free gives blocks whose reference count reached zero back to the
// allocator. Blocks a recorded stream used wait behind a fence for that
// stream's work first (see RecordStream); free itself never waits.
func (p *Pool) free(list []*block) {
	if len(list) == 0 {
		return
	}
	list = p.rec.fenceRecorded(p.b, p.mem, list)
	p.mem.Free(list)
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
func (p *Pool) takeFreed() *[]*block {
	if l, ok := p.freedLists.Get().(*[]*block); ok {
		return l
	}
	return new([]*block)
}

// freeList frees the blocks of *l (free) and keeps l for the next
// takeFreed, emptied, unless it grew past maxFreedList.
func (p *Pool) freeList(l *[]*block) {
	p.free(*l)
	if cap(*l) > maxFreedList {
		return
	}
	clear(*l)
	*l = (*l)[:0]
	p.freedLists.Put(l)
}

// shortfall returns the bytes an allocation of want blocks of class c
// lacks (blocks.Allocator.Shortfall).
func (p *Pool) shortfall(c *sizeClass, want int, deviceFull bool) int64 {
	return p.mem.Shortfall(c, want, deviceFull)
}
