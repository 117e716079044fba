package blocks

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Class is the blocks of one size: its free lists and counts. An
// allocator holds one class per block size its callers use; every class
// carves its blocks from the allocator's shared slabs (slab.go). Its fields
// are guarded by the allocator's mu.
type Class struct {
	bytes   int
	clean   []*Block             // zeroed blocks (Block.Zeroed)
	dirty   map[string]*freeList // free blocks not zeroed, by the owner whose rows they held
	sweepAt int                  // the size of dirty at which empty lists are swept
	// lastOwner's free list is lastList: the last one looked up.
	lastOwner string
	lastList  *freeList
	nfree     int64
	inUse     int64
	// hot is the last block freed alone, kept for its owner's next
	// one-block allocation: both take no lock (Free, TakeHot). It counts
	// in inUse until a locked path drains it to a free list (drainHot).
	hot atomic.Pointer[Block]
	// zeroTaken says a zeroed allocation took blocks of the class: its
	// blocks may lie untouched (Block.Untouched).
	zeroTaken atomic.Bool
	// growths are the times of the class's last growths (a slab from the
	// backend and its blocks' records), a ring written at ngrowths.
	growths  [growthsKept]time.Duration
	ngrowths int
}

// growthsKept is how many of a class's growths FreeCounts's GrowTime is
// the median of, and growthsTrusted how many it needs to be given.
const (
	growthsKept    = 9
	growthsTrusted = 3
)

// grew records a growth of c that took d. a.mu is held.
func (c *Class) grew(d time.Duration) {
	c.growths[c.ngrowths%growthsKept] = d
	c.ngrowths++
}

// growTime returns the median of c's last growths, zero when it grew
// fewer than growthsTrusted times. a.mu is held.
func (c *Class) growTime() time.Duration {
	n := min(c.ngrowths, growthsKept)
	if n < growthsTrusted {
		return 0
	}
	last := c.growths
	slices.Sort(last[:n])
	return last[n/2]
}

// ZeroTaken reports whether a zeroed allocation ever took blocks of c,
// whose blocks may then lie untouched; blocks of a class no zeroed
// allocation took were all written by the allocations that took them.
func (c *Class) ZeroTaken() bool { return c.zeroTaken.Load() }

// drainHotLocked puts c's hot block, if any, on its owner's free list, so
// that locked paths see every free block. a.mu is held.
func (c *Class) drainHotLocked() {
	if c.hot.Load() == nil {
		return
	}
	if b := c.hot.Swap(nil); b != nil {
		c.putDirtyLocked(b)
		c.nfree++
		c.inUse--
	}
}

func newClass(bytes int) *Class {
	return &Class{bytes: bytes, dirty: make(map[string]*freeList)}
}

// takeLocked moves free blocks of c to out, up to n in all, in the order
// Alloc documents, and appends to wipe those that must be zeroed before
// use. a.mu is held.
func (c *Class) takeLocked(out, wipe []*Block, owner string, n int, zero bool) ([]*Block, []*Block) {
	before := len(out)
	if !zero {
		out = c.takeFree(out, owner, n)
	}
	if len(out) < n {
		k := min(len(c.clean), n-len(out))
		out = appendPopped(out, c.clean[len(c.clean)-k:])
		clear(c.clean[len(c.clean)-k:])
		c.clean = c.clean[:len(c.clean)-k]
	}
	if len(out) < n {
		dirty := len(out)
		out = c.takeFree(out, owner, n)
		for o := range c.dirty {
			if len(out) == n {
				break
			}
			out = c.takeFree(out, o, n)
		}
		wipe = append(wipe, out[dirty:]...)
	}
	c.nfree -= int64(len(out) - before)
	return out, wipe
}

// freeList holds the free blocks one owner's rows were in. Empty lists
// stay in the class's map, so that an owner's alloc and free cycle costs
// no map insertions; they are swept when they outnumber the others.
type freeList struct{ blocks []*Block }

// listLocked returns owner o's free list, nil when it has none. The last
// list looked up is remembered: an owner's blocks go and come back in
// turns.
func (c *Class) listLocked(o string) *freeList {
	if c.lastList != nil && c.lastOwner == o {
		return c.lastList
	}
	fl := c.dirty[o]
	if fl != nil {
		c.lastOwner, c.lastList = o, fl
	}
	return fl
}

// takeFree moves free blocks of owner o from its free list to out, up to
// n in all.
func (c *Class) takeFree(out []*Block, o string, n int) []*Block {
	fl := c.listLocked(o)
	if fl == nil {
		return out
	}
	list := fl.blocks
	k := min(len(list), n-len(out))
	if k <= 0 {
		return out
	}
	out = appendPopped(out, list[len(list)-k:])
	clear(list[len(list)-k:])
	fl.blocks = list[:len(list)-k]
	return out
}

// appendPopped appends the top of a free list to out in the order a stack
// pops it: the last element first. Free lists are pushed so that this
// order walks memory upwards, which lets neighbouring blocks be copied in
// one call.
func appendPopped(out, top []*Block) []*Block {
	for i := len(top) - 1; i >= 0; i-- {
		out = append(out, top[i])
	}
	return out
}

// putDirtyLocked puts b on the free list of the owner whose rows it holds.
func (c *Class) putDirtyLocked(b *Block) {
	fl := c.dirtyListLocked(b.owner)
	fl.blocks = append(fl.blocks, b)
}

// putDirtyRunLocked puts the blocks of bs, whose rows owner o holds, on
// its free list, the last first, as putDirtyLocked would one at a time
// from the last; it reads no block.
func (c *Class) putDirtyRunLocked(o string, bs []*Block) {
	fl := c.dirtyListLocked(o)
	n := len(fl.blocks)
	fl.blocks = slices.Grow(fl.blocks, len(bs))[:n+len(bs)]
	top := fl.blocks[n:]
	for i, b := range bs {
		top[len(bs)-1-i] = b
	}
}

// dirtyListLocked returns owner o's free list, made when it has none.
func (c *Class) dirtyListLocked(o string) *freeList {
	fl := c.listLocked(o)
	if fl == nil {
		if len(c.dirty) >= c.sweepAt {
			c.sweepLocked()
		}
		fl = &freeList{}
		c.dirty[o] = fl
	}
	return fl
}

// sweepLocked forgets the empty free lists, so that the map grows with
// the owners that have free blocks, not with every owner ever seen. It runs
// when the map has doubled since the last sweep: O(1) per list, amortized.
func (c *Class) sweepLocked() {
	for o, fl := range c.dirty {
		if len(fl.blocks) == 0 {
			delete(c.dirty, o)
		}
	}
	c.lastOwner, c.lastList = "", nil
	c.sweepAt = max(64, 2*len(c.dirty))
}

// putLocked returns blocks that alloc took but did not hand out: zeroed
// ones to the clean list, the others to the free list of the owner whose
// rows they hold.
func (c *Class) putLocked(list []*Block) {
	c.nfree += int64(len(list))
	for _, b := range list {
		if b.Zeroed() {
			c.clean = append(c.clean, b)
		} else {
			c.putDirtyLocked(b)
		}
	}
}

// Bytes returns the size of the class's blocks.
func (c *Class) Bytes() int { return c.bytes }

// check checks one size class's free lists and counts against the blocks
// in use, inUse of them its own. a.mu is held.
func (c *Class) check(refs map[*Block]int, inUse int64) error {
	if b := c.hot.Load(); b != nil {
		if refs[b] > 0 || b.Refs() != 0 || b.cls != c {
			return fmt.Errorf("hot block %#x is in use (%d references, count %d) or of another class", b.ptr, refs[b], b.Refs())
		}
		inUse++ // counted in use until drained
	}
	if inUse != c.inUse {
		return fmt.Errorf("%d blocks of %d bytes referenced, the class counts %d in use", inUse, c.bytes, c.inUse)
	}
	free := 0
	check := func(b *Block) error {
		free++
		if refs[b] > 0 {
			return fmt.Errorf("block %#x is both free and in use", b.ptr)
		}
		if b.cls != c {
			return fmt.Errorf("block %#x of %d bytes on the free list of %d", b.ptr, b.cls.bytes, c.bytes)
		}
		return nil
	}
	for _, b := range c.clean {
		if err := check(b); err != nil {
			return err
		}
		if !b.Zeroed() {
			return fmt.Errorf("clean block %#x is not marked zeroed (owner %q)", b.ptr, b.owner)
		}
	}
	for o, fl := range c.dirty {
		for _, b := range fl.blocks {
			if err := check(b); err != nil {
				return err
			}
			if b.owner != o {
				return fmt.Errorf("block %#x on %q's list has owner %q", b.ptr, o, b.owner)
			}
			if b.Zeroed() {
				return fmt.Errorf("zeroed block %#x on %q's list, not the clean one", b.ptr, o)
			}
		}
	}
	if int64(free) != c.nfree {
		return fmt.Errorf("%d blocks on free lists, the class counts %d", free, c.nfree)
	}
	return nil
}
