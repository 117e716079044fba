package blocks

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/gpustate/gpustate/runtime/device"
)

// Slabs are shared by every size class (docs/INTERNALS.md, "Memory
// pressure"). A slab is one backend allocation; the part of it not carved
// into blocks is kept as free extents, and any class carves its blocks from
// them. A class keeps the blocks it carved on its free lists once they are
// free, so that its alloc and free cycle stays a pop and a push; when a
// class finds no room (the cap, or the device, is full), the free blocks of
// the other classes go back to their slabs' extents and are carved again.
// So a pool whose live bytes are half its cap can still allocate a block of
// any size that fits in what is free.

// slab is one backend allocation of the allocator.
type slab struct {
	ptr   device.Ptr
	bytes int64
	// host is the slab's memory, where device memory is the process's
	// (device.HostBytes), else nil: Block.Host.
	host []byte
	free []extent // not carved into blocks; by offset, neighbours merged
}

// extent is a free range of a slab, carved into no block.
type extent struct {
	off, n int64
	// dirty says the range may hold an owner's rows: blocks carved from it
	// are zeroed before use.
	dirty bool
}

// give returns the n bytes at off to s's free extents, merging them with
// their neighbours.
func (s *slab) give(off, n int64, dirty bool) {
	i := sort.Search(len(s.free), func(i int) bool { return s.free[i].off > off })
	if i > 0 && s.free[i-1].off+s.free[i-1].n == off {
		prev := &s.free[i-1]
		prev.n += n
		prev.dirty = prev.dirty || dirty
		if i < len(s.free) && prev.off+prev.n == s.free[i].off {
			prev.n += s.free[i].n
			prev.dirty = prev.dirty || s.free[i].dirty
			s.free = slices.Delete(s.free, i, i+1)
		}
		return
	}
	if i < len(s.free) && off+n == s.free[i].off {
		next := &s.free[i]
		next.off, next.n = off, next.n+n
		next.dirty = next.dirty || dirty
		return
	}
	s.free = slices.Insert(s.free, i, extent{off: off, n: n, dirty: dirty})
}

// wholly reports whether every byte of s is free and carved into no block.
func (s *slab) wholly() bool {
	return len(s.free) == 1 && s.free[0].off == 0 && s.free[0].n == s.bytes
}

// growBlocks returns how many blocks of class c one growth takes for an
// allocation short of want: a slab's worth (SlabBlocks, up to maxSlabBytes),
// and under MaxBytes at most an eighth of the cap, so that the first class
// a pool serves does not take the room of the others at once.
func (a *Allocator) growBlocks(c *Class, want int) int64 {
	bb := int64(c.bytes)
	nb := max(int64(want), int64(SlabBlocks))
	if nb*bb > maxSlabBytes {
		nb = max(int64(want), maxSlabBytes/bb)
	}
	if a.maxBytes > 0 {
		nb = min(nb, max(int64(want), a.maxBytes/bb/8))
	}
	return nb
}

// growLocked makes at least want more blocks of class c free: it carves
// them from the slabs' free extents, else takes a new slab from the
// backend (MaxBytes permitting), else takes back the free blocks of the
// other classes and carves those, else gives back wholly free slabs and
// takes one large enough. Its error wraps a.noMem when the cap or the
// device is exhausted. a.mu is held, and let go across backend calls.
func (a *Allocator) growLocked(c *Class, want int) error {
	nb := a.growBlocks(c, want)
	want -= int(min(a.carveLocked(c, nb), int64(want)))
	if want == 0 {
		return nil
	}
	err := a.newSlabLocked(c, want, nb)
	if err == nil || !errors.Is(err, a.noMem) {
		return err
	}
	a.takeBackLocked(c)
	want -= int(a.carveLocked(c, int64(want)))
	if want == 0 {
		return nil
	}
	if gone := a.dropWhollyFreeLocked(); len(gone) > 0 {
		a.mu.Unlock()
		a.freeSlabs(gone, "taking back free slabs") // nobody to tell: the allocation goes on
		a.mu.Lock()
		return a.newSlabLocked(c, want, int64(want))
	}
	return err
}

// regrowLocked is the last resort of an allocation of want blocks of
// class c that growLocked left short, and reports whether c has them
// free now. A block of c carved where another class's blocks were splits
// its slab's free bytes into runs too short for a block, and carving
// splits a slab no block holds: every free block, c's own included, goes
// back to its slab's extents, and c carves what it can from them. When
// that is not enough, the slabs then wholly free go back to the backend
// and c grows from the rest, a new slab included; with none to give back,
// the backend is not asked again. a.mu is held, and let go across
// backend calls.
func (a *Allocator) regrowLocked(c *Class, want int) bool {
	a.takeBackLocked(nil)
	gone := a.dropWhollyFreeLocked()
	if len(gone) == 0 {
		return a.carveLocked(c, int64(want)) == int64(want)
	}
	a.mu.Unlock()
	a.freeSlabs(gone, "taking back free slabs") // nobody to tell: the allocation goes on
	a.mu.Lock()
	return a.growLocked(c, want) == nil
}

// carveLocked carves up to most blocks of class c from the free extents,
// the first that fit first, onto c's free lists, and returns how many it
// carved. a.mu is held.
func (a *Allocator) carveLocked(c *Class, most int64) int64 {
	if a.loose < int64(c.bytes) {
		return 0
	}
	bb := int64(c.bytes)
	var got int64
	for _, s := range a.slabs {
		for i := 0; i < len(s.free) && got < most; {
			e := &s.free[i]
			k := min(e.n/bb, most-got)
			if k == 0 {
				i++
				continue
			}
			a.addBlocksLocked(c, s, e.off, k, e.dirty)
			e.off += k * bb
			e.n -= k * bb
			if e.n == 0 {
				s.free = slices.Delete(s.free, i, i+1)
			} else {
				i++
			}
			got += k
		}
		if got == most {
			break
		}
	}
	return got
}

// blockChunk is how many Blocks one array holds (blockArray).
const blockChunk = 63

// blockArray is blockChunk Blocks in one allocation of 4 KiB, a page,
// laid out so that each Block is a cache line of its own: the runtime
// puts an 8-byte header before an object of this size that holds
// pointers, and the pad fills the rest of the first line. A Block that
// straddled two lines shared one with its neighbour, which another
// goroutine's head may hold: a reference one took on its block waited for
// the line the other wrote (docs/BENCHMARKS.md, "Calls from several
// goroutines"; TestBlocksOwnTheirLines).
type blockArray struct {
	_      [56]byte
	blocks [blockChunk]Block
}

// addBlocksLocked makes k blocks of class c from the bytes at off in s and
// puts them on c's free lists, so that they pop in address order: on the
// clean list, or, from a dirty extent, on the list of the empty owner,
// which no call allocates for and so every owner zeroes before use.
//
// The Blocks are made blockChunk to an array, in address order: a call
// that takes or frees a run of blocks walks their structs in order, a page
// at a time, where one allocation each left them anywhere in the heap and
// cost a cache and TLB miss per block (docs/BENCHMARKS.md, "Serving
// paths"). A chunk lives while any of its blocks does, so what a slab's
// churn can keep is a chunk per live block at most.
func (a *Allocator) addBlocksLocked(c *Class, s *slab, off, k int64, dirty bool) {
	bb := int64(c.bytes)
	a.loose -= k * bb
	c.nfree += k
	var chunk []Block
	for i := k - 1; i >= 0; i-- {
		if len(chunk) == 0 {
			chunk = new(blockArray).blocks[:i%blockChunk+1] // chunk[j] is block i-i%blockChunk+j
		}
		b := &chunk[len(chunk)-1]
		chunk = chunk[:len(chunk)-1]
		b.ptr, b.slab, b.cls = s.ptr+device.Ptr(off+i*bb), s, c
		if dirty {
			c.putDirtyLocked(b)
		} else {
			b.flags.Store(zeroedFlag)
			c.clean = append(c.clean, b)
		}
	}
}

// takeBackLocked returns the free blocks of every class but skip (nil:
// of every class) to their slabs' free extents. a.mu is held.
func (a *Allocator) takeBackLocked(skip *Class) {
	for _, c := range a.classes {
		if c == skip {
			continue
		}
		c.drainHotLocked()
		if c.nfree == 0 {
			continue
		}
		bb := int64(c.bytes)
		for _, b := range c.clean {
			b.slab.give(int64(b.ptr-b.slab.ptr), bb, false)
		}
		clear(c.clean)
		c.clean = c.clean[:0]
		for _, fl := range c.dirty {
			for _, b := range fl.blocks {
				b.slab.give(int64(b.ptr-b.slab.ptr), bb, true)
			}
			clear(fl.blocks)
			fl.blocks = fl.blocks[:0]
		}
		a.loose += c.nfree * bb
		c.nfree = 0
	}
}

// dropWhollyFreeLocked takes the slabs whose bytes are all in free extents
// out of the allocator and returns them, for the caller to free with a.mu let
// go. a.mu is held.
func (a *Allocator) dropWhollyFreeLocked() []*slab {
	var gone []*slab
	keep := a.slabs[:0]
	for _, s := range a.slabs {
		if s.wholly() {
			gone = append(gone, s)
			delete(a.slabOf, s.ptr)
			a.loose -= s.bytes
			a.reserved -= s.bytes
			continue
		}
		keep = append(keep, s)
	}
	clear(a.slabs[len(keep):])
	a.slabs = keep
	return gone
}

// freeSlabs gives slabs back to the backend; a.mu is not held, since a
// backend's Free may wait for work queued on its streams.
func (a *Allocator) freeSlabs(list []*slab, what string) (int64, error) {
	var given int64
	var errs []error
	for _, s := range list {
		if err := a.b.Free(s.ptr); err != nil {
			errs = append(errs, fmt.Errorf("state: %s: freeing a slab of %d bytes: %w", what, s.bytes, err))
			continue
		}
		given += s.bytes
	}
	return given, errors.Join(errs...)
}

// newSlabLocked takes a slab of nb blocks of class c from the backend (at
// least want of them, MaxBytes and the device permitting), zeroes it unless
// the backend says fresh memory reads as zeros (device.AllocZeroer), and
// puts its blocks on c's clean list. The bytes are reserved before a.mu is
// let go for the backend's calls, so that concurrent growths keep to the
// cap. a.mu is held.
func (a *Allocator) newSlabLocked(c *Class, want int, nb int64) error {
	bb := int64(c.bytes)
	if a.maxBytes > 0 {
		left := (a.maxBytes - a.reserved) / bb
		if left < int64(want) {
			return a.noMem
		}
		nb = min(nb, left)
	}
	if nb*bb > int64(maxInt) {
		return a.noMem
	}
	a.reserved += nb * bb
	a.mu.Unlock()
	start := a.now()
	ptr, err := a.b.Alloc(int(nb * bb))
	if err != nil && nb > int64(want) && errors.Is(err, device.ErrOutOfMemory) {
		a.mu.Lock()
		a.reserved -= (nb - int64(want)) * bb
		a.mu.Unlock()
		nb = int64(want) // the device may have room for less
		ptr, err = a.b.Alloc(int(nb * bb))
	}
	if err == nil {
		err = a.zeroSlab(ptr, nb*bb)
	}
	var host []byte
	if err == nil {
		host, _ = device.HostBytes(a.b, ptr, int(nb*bb)) // nil: the backend's copies (Block.Host)
	}
	a.mu.Lock()
	if err != nil {
		a.reserved -= nb * bb
		if errors.Is(err, device.ErrOutOfMemory) {
			return fmt.Errorf("%w: %w", a.noMem, err)
		}
		return fmt.Errorf("state: taking a slab of %d bytes: %w", nb*bb, err)
	}
	s := &slab{ptr: ptr, bytes: nb * bb, host: host}
	a.slabs = append(a.slabs, s)
	a.slabOf[ptr] = s
	a.loose += s.bytes
	a.addBlocksLocked(c, s, 0, nb, false)
	c.grew(a.now().Sub(start))
	return nil
}

// zeroSlab zeroes a fresh slab, unless the backend's Alloc zeroes already
// (device.AllocZeroer); on failure it frees the slab.
func (a *Allocator) zeroSlab(ptr device.Ptr, bytes int64) error {
	if z, ok := a.b.(device.AllocZeroer); ok && z.AllocZeroes() {
		return nil // zeroing again would only touch every page once more
	}
	if err := a.b.Memset(ptr, 0, int(bytes)); err != nil {
		if ferr := a.b.Free(ptr); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return fmt.Errorf("zeroing a new slab: %w", err)
	}
	return nil
}

// checkSlabs checks the slabs' free extents: in order, within their slab,
// neither overlapping nor touching (neighbours merge), and summing to
// a.loose. a.mu is held.
func (a *Allocator) checkSlabs() error {
	var loose int64
	for _, s := range a.slabs {
		if a.slabOf[s.ptr] != s {
			return fmt.Errorf("slab %#x is not indexed", s.ptr)
		}
		end := int64(-1)
		for _, e := range s.free {
			if e.n <= 0 || e.off <= end || e.off+e.n > s.bytes {
				return fmt.Errorf("slab %#x of %d bytes: extent [%d, %d) after %d", s.ptr, s.bytes, e.off, e.off+e.n, end)
			}
			end = e.off + e.n
			loose += e.n
		}
	}
	if loose != a.loose {
		return fmt.Errorf("free extents hold %d bytes, the pool counts %d", loose, a.loose)
	}
	return nil
}
