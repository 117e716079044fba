package blocks

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpustate/gpustate/runtime/device"
)

// Room: what an allocation of one class can reach once it takes the free
// blocks of the other classes back to the slabs' extents (growLocked).
// Only whole blocks of the class fit in each free run of a slab: bytes of
// other classes' free blocks count only where they make such a run with
// their neighbours (docs/INTERNALS.md, "Memory pressure"). Fits and
// FitsBytes, last, say whether an allocation could ever fit.

// Shortfall returns the bytes an allocation of want blocks of class c
// lacks: zero or less when c's own room holds them (its free blocks, the
// whole blocks of c in the slabs' free extents, the room left under
// MaxBytes unless the device itself is full), or, counted exactly, the
// room an allocation reaches once every free block is back in its slab
// (regrowLocked): the whole blocks of c in each free run of the slabs in
// use, and the wholly free slabs pooled with the cap's room. When even
// every free byte would not hold them it answers that lower bound
// (leastShortfallLocked) without walking the free blocks.
func (a *Allocator) Shortfall(c *Class, want int, deviceFull bool) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	own := a.ownShortfallLocked(c, want, deviceFull)
	if own <= 0 {
		return own // c's own room: no walk (an eviction that freed a block of c)
	}
	if least := a.leastShortfallLocked(c, want, deviceFull); least > 0 {
		return least
	}
	return a.shortfallLocked(c, want, deviceFull, nil)
}

// leastShortfallLocked returns the bytes an allocation of want blocks of
// class c lacks at least: what it wants beyond every free byte (Room).
// Free bytes make blocks only in runs of c's size, so the exact shortfall
// may be more, never less. a.mu is held.
func (a *Allocator) leastShortfallLocked(c *Class, want int, deviceFull bool) int64 {
	return int64(want)*int64(c.bytes) - a.roomLocked(deviceFull)
}

// OwnShortfall returns the bytes an allocation of want blocks of class c
// lacks counting only what c itself can take without the free blocks of
// other classes: c's free blocks, the whole blocks of c the slabs' free
// extents hold, and the room left under MaxBytes (unless the device
// itself is full). Shortfall counts the other classes' free blocks as
// bytes too, which only a merge with their neighbours makes room of.
func (a *Allocator) OwnShortfall(c *Class, want int, deviceFull bool) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ownShortfallLocked(c, want, deviceFull)
}

// ownShortfallLocked is OwnShortfall with a.mu held.
func (a *Allocator) ownShortfallLocked(c *Class, want int, deviceFull bool) int64 {
	bb := int64(c.bytes)
	have := c.nfree * bb
	if c.hot.Load() != nil {
		have += bb
	}
	if a.loose >= bb {
		for _, s := range a.slabs {
			for _, e := range s.free {
				have += e.n / bb * bb
			}
		}
	}
	if a.maxBytes > 0 && !deviceFull {
		have += (a.maxBytes - a.reserved) / bb * bb
	}
	return int64(want)*bb - have
}

// Room returns the bytes free for blocks of any class: every class's free
// blocks, the slabs' free extents and, unless the device itself is full,
// the room left under MaxBytes. No allocation of several classes can
// take more than that without freeing some.
func (a *Allocator) Room(deviceFull bool) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.roomLocked(deviceFull)
}

// roomLocked is Room with a.mu held.
func (a *Allocator) roomLocked(deviceFull bool) int64 {
	room := a.loose
	for _, k := range a.classes {
		room += k.nfree * int64(k.bytes)
		if k.hot.Load() != nil {
			room += int64(k.bytes)
		}
	}
	if a.maxBytes > 0 && !deviceFull {
		room += a.maxBytes - a.reserved
	}
	return room
}

// ShortfallIf returns the bytes an allocation of want blocks of class c
// lacks once the blocks of extra are free too (the blocks an eviction
// would free, that the caller weighs before it evicts), counting only the
// whole blocks of c each free run of a slab would hold: its free extents
// merged with the free blocks of the other classes, as growLocked's
// take-back would merge them. It walks every free block: the caller asks
// only when its own blocks do not settle the question (OwnShortfall).
func (a *Allocator) ShortfallIf(c *Class, want int, deviceFull bool, extra []*Block) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.shortfallLocked(c, want, deviceFull, extra)
}

// shortfallLocked returns the bytes an allocation of want blocks of class
// c lacks, with the blocks of extra free as well (those free already
// count once), against the room regrowLocked reaches (freeRunsLocked): the
// whole blocks of c that each free run holds, and those of a new slab.
// a.mu is held.
func (a *Allocator) shortfallLocked(c *Class, want int, deviceFull bool, extra []*Block) int64 {
	bb := int64(c.bytes)
	runs, fresh := a.freeRunsLocked(deviceFull, extra)
	have := fresh / bb * bb
	for _, n := range runs {
		have += n / bb * bb
	}
	return int64(want)*bb - have
}

// ShortfallAllIf is ShortfallIf for an allocation of ns[i] blocks of each
// class cs[i], the classes taken one after another in that order: each
// takes its blocks first fit from the free runs, in address order, as
// carveLocked carves them, then from the room of a new slab, and leaves
// the rest of both to the classes after it. Bytes are not room for
// several classes either: blocks of a class taken first may cut the only
// run long enough for a block of a later one. It returns the bytes the
// classes lack in all (0 when every block fits).
func (a *Allocator) ShortfallAllIf(cs []*Class, ns []int, deviceFull bool, extra []*Block) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	runs, fresh := a.freeRunsLocked(deviceFull, extra)
	var short int64
	for i, c := range cs {
		bb, n := int64(c.bytes), int64(ns[i])
		for j := 0; j < len(runs) && n > 0; j++ {
			k := min(runs[j]/bb, n)
			runs[j] -= k * bb
			n -= k
		}
		k := min(fresh/bb, n)
		fresh -= k * bb
		short += (n - k) * bb
	}
	return short
}

// freeRunsLocked returns the free runs regrowLocked reaches, slab by slab
// and in address order in each: the slab's free extents merged with the
// free blocks of every class and the blocks of extra, as takeBackLocked
// merges them; and fresh, the room of a new slab: under MaxBytes with a
// device not full, the cap's room pooled with the wholly free slabs,
// which regrowLocked gives back for a new slab (without a cap, or with
// the device full, a wholly free slab is a run, and there is no fresh
// room). a.mu is held.
func (a *Allocator) freeRunsLocked(deviceFull bool, extra []*Block) (runs []int64, fresh int64) {
	type run struct{ off, n int64 }
	bySlab := make(map[device.Ptr][]run)
	seen := make(map[*Block]bool)
	add := func(b *Block) {
		if !seen[b] {
			seen[b] = true
			bySlab[b.slab.ptr] = append(bySlab[b.slab.ptr], run{int64(b.ptr - b.slab.ptr), int64(b.cls.bytes)})
		}
	}
	for _, k := range a.classes {
		for _, b := range k.clean {
			add(b)
		}
		for _, fl := range k.dirty {
			for _, b := range fl.blocks {
				add(b)
			}
		}
		if b := k.hot.Load(); b != nil {
			add(b)
		}
	}
	for _, b := range extra {
		add(b)
	}
	capped := a.maxBytes > 0 && !deviceFull
	if capped {
		fresh = a.maxBytes - a.reserved
	}
	for _, s := range a.slabs {
		rs := bySlab[s.ptr]
		for _, e := range s.free {
			rs = append(rs, run{e.off, e.n})
		}
		if len(rs) == 0 {
			continue
		}
		slices.SortFunc(rs, func(x, y run) int { return cmp.Compare(x.off, y.off) })
		merged := rs[:1]
		for _, r := range rs[1:] {
			if cur := &merged[len(merged)-1]; cur.off+cur.n == r.off {
				cur.n += r.n
			} else {
				merged = append(merged, r)
			}
		}
		if capped && len(merged) == 1 && merged[0].n == s.bytes {
			fresh += s.bytes // regrowLocked gives the slab back to make a new one
			continue
		}
		for _, r := range merged {
			runs = append(runs, r.n)
		}
	}
	return runs, fresh
}

// Fits fails with Options.NoMemory, before anything is taken, when n
// blocks of class c are more than the allocator could ever hold.
func (a *Allocator) Fits(c *Class, n int) error {
	bb := int64(c.bytes)
	if int64(n) > int64(maxInt)/bb {
		return fmt.Errorf("state: %d blocks of %d bytes: %w", n, bb, a.noMem)
	}
	return a.FitsBytes(int64(n) * bb)
}

// FitsBytes fails with Options.NoMemory when want bytes are more than the
// allocator could ever hold: past MaxBytes or, with no cap and over 64
// MiB, past the device's total memory.
func (a *Allocator) FitsBytes(want int64) error {
	if want < 0 {
		return fmt.Errorf("state: more bytes than an int64 holds: %w", a.noMem)
	}
	if a.maxBytes > 0 {
		if want > a.maxBytes {
			return fmt.Errorf("state: %d bytes wanted, the pool's cap is %d: %w", want, a.maxBytes, a.noMem)
		}
		return nil
	}
	if want > 64<<20 {
		if _, total, err := a.b.MemInfo(); err == nil && uint64(want) > total {
			return fmt.Errorf("state: %d bytes wanted, the device has %d: %w", want, total, a.noMem)
		}
	}
	return nil
}
