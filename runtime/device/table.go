package device

import (
	"fmt"
	"slices"
	"sync/atomic"
)

// region is one live allocation: size bytes starting at base. For the host
// backend mem is the whole mapping (size rounded up to pages); device
// backends leave it nil.
type region struct {
	base Ptr
	size uint64
	mem  []byte
	// mapped says HostBytes gave the allocation's memory out: Close
	// leaves it mapped.
	mapped bool
}

// table tracks a backend's live allocations, sorted by base address, so that
// every Ptr and length handed to the backend is checked before it is used.
// It is not safe for concurrent use; the backends guard it with their lock.
type table struct {
	regions []region
	bytes   uint64 // sum of sizes of live allocations
	// near is a direct-mapped cache of find's answers, keyed by the
	// address's page: slot (p>>nearShift) mod nearSlots holds the index of
	// the allocation find last returned for an address of that page, plus
	// one (zero: empty). A page lies in one allocation at most (the host
	// backend maps whole pages), so slots only alias between pages 16 MiB
	// apart. A store's copies go to blocks spread over many slabs (after a
	// few generations of a state freed and made again, each column's block
	// of a row comes from another slab), which a few last answers miss.
	// Readers holding the backend's read lock write it, hence atomics; an
	// index is only a guess, checked against the range (inserts and
	// removes shift them).
	near [nearSlots]atomic.Int32
}

const (
	nearShift = 12
	nearSlots = 4096
)

// insert records r. Bases are distinct because live allocations never overlap.
func (t *table) insert(r region) {
	i, _ := slices.BinarySearchFunc(t.regions, r.base, cmpBase)
	t.regions = slices.Insert(t.regions, i, r)
	t.bytes += r.size
}

// remove forgets the allocation that starts exactly at p and returns it.
func (t *table) remove(p Ptr) (region, error) {
	i, ok := slices.BinarySearchFunc(t.regions, p, cmpBase)
	if !ok {
		if _, _, err := t.find(p, 0); err == nil {
			return region{}, fmt.Errorf("%w: %#x is inside an allocation, not its start", ErrInvalidPtr, uint64(p))
		}
		return region{}, fmt.Errorf("%w: %#x was not returned by Alloc or is already freed", ErrInvalidPtr, uint64(p))
	}
	r := t.regions[i]
	t.regions = slices.Delete(t.regions, i, i+1)
	t.bytes -= r.size
	return r, nil
}

// find returns the allocation holding the n bytes starting at p, and p's
// offset in it. The range must lie inside one live allocation; a zero-length
// range may start at the allocation's end.
func (t *table) find(p Ptr, n int) (region, uint64, error) {
	i, off, err := t.at(p, n)
	if err != nil {
		return region{}, 0, err
	}
	return t.regions[i], off, nil
}

// at is find answering the allocation's index in t.regions, which stays
// valid while the backend's lock is held.
func (t *table) at(p Ptr, n int) (int, uint64, error) {
	if n < 0 {
		return 0, 0, fmt.Errorf("%w: negative length %d", ErrInvalidSize, n)
	}
	slot := &t.near[uint64(p)>>nearShift&(nearSlots-1)]
	if i := int(slot.Load()) - 1; i >= 0 && i < len(t.regions) {
		r := &t.regions[i]
		if off := uint64(p - r.base); p >= r.base && off < r.size && uint64(n) <= r.size-off {
			return i, off, nil
		}
	}
	// The last allocation whose base is <= p, by a binary search written
	// out: every copy passes here, and a comparison function called at
	// each step cost a copy of a row as much as the copy itself.
	lo, hi := 0, len(t.regions)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.regions[m].base <= p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i := lo - 1
	if i < 0 {
		return 0, 0, fmt.Errorf("%w: %#x is not in a live allocation", ErrInvalidPtr, uint64(p))
	}
	r := &t.regions[i]
	off := uint64(p - r.base)
	if off > r.size || (off == r.size && n > 0) {
		return 0, 0, fmt.Errorf("%w: %#x is not in a live allocation", ErrInvalidPtr, uint64(p))
	}
	if uint64(n) > r.size-off {
		return 0, 0, fmt.Errorf("%w: %d bytes at %#x run past the end of its %d-byte allocation at %#x",
			ErrInvalidPtr, n, uint64(p), r.size, uint64(r.base))
	}
	if int(slot.Load()) != i+1 { // one store at most, none when it is there
		slot.Store(int32(i + 1))
	}
	return i, off, nil
}

// clear forgets every allocation and returns them.
func (t *table) clear() []region {
	rs := t.regions
	t.regions = nil
	t.bytes = 0
	return rs
}

func cmpBase(r region, p Ptr) int {
	switch {
	case r.base < p:
		return -1
	case r.base > p:
		return 1
	}
	return 0
}
