package blocks

import (
	"cmp"
	"slices"

	"github.com/gpustate/gpustate/runtime/device"
)

// Room: what an allocation of one class can reach once it takes the free
// blocks of the other classes back to the slabs' extents (growLocked).
// Only whole blocks of the class fit in each free run of a slab: bytes of
// other classes' free blocks count only where they make such a run with
// their neighbours (docs/INTERNALS.md, "Memory pressure").

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
// count once), against the room regrowLocked reaches: the whole blocks of
// c that each free run of a slab holds (its free extents merged with the
// free blocks of every class, c's included), and, under MaxBytes with a
// device not full, the cap's room pooled with the wholly free slabs,
// which it gives back for a new slab (without a cap, or with the device
// full, only the slabs too small for a block of c are given back; the
// others count as runs). a.mu is held.
func (a *Allocator) shortfallLocked(c *Class, want int, deviceFull bool, extra []*Block) int64 {
	bb := int64(c.bytes)
	var have int64
	type run struct{ off, n int64 }
	runs := make(map[device.Ptr][]run)
	seen := make(map[*Block]bool)
	add := func(b *Block) {
		if !seen[b] {
			seen[b] = true
			runs[b.slab] = append(runs[b.slab], run{int64(b.ptr - b.slab), int64(b.cls.bytes)})
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
	var dropped int64 // the bytes of the wholly free slabs too small for a block of c
	for _, s := range a.slabs {
		rs := runs[s.ptr]
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
		if len(merged) == 1 && merged[0].n == s.bytes && (s.bytes < bb || a.maxBytes > 0 && !deviceFull) {
			// regrowLocked gives the slab back to make a new one.
			dropped += s.bytes
			continue
		}
		for _, r := range merged {
			have += r.n / bb * bb
		}
	}
	if a.maxBytes > 0 && !deviceFull {
		have += (a.maxBytes - a.reserved + dropped) / bb * bb
	}
	return int64(want)*bb - have
}
