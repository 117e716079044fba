package state

import (
	"errors"
	"fmt"

	"github.com/gpustate/gpustate/runtime/device"
)

// Trim gives the slabs whose blocks are all free back to the device and
// returns the bytes it gave back. After every handle is released, Trim
// leaves ReservedBytes at zero, unless shared prefix blocks are cached:
// those are in use, kept for later heads to adopt (PoolStats.CachedBytes),
// until memory pressure evicts them or ForgetPrefixes drops them. A closed
// pool holds nothing to trim.
func (p *Pool) Trim() (int64, error) {
	leave, err := p.enter()
	if err != nil {
		return 0, fmt.Errorf("state: Pool.Trim: %w", err)
	}
	defer leave()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.trimLocked(nil)
}

// trimLocked gives back the wholly free slabs of every class but skip
// (nil: of every class). p.mu is held.
func (p *Pool) trimLocked(skip *sizeClass) (int64, error) {
	free := make(map[device.Ptr]int64, len(p.slabs))
	classOf := make(map[device.Ptr]*sizeClass, len(p.slabs))
	for _, c := range p.classes {
		if c == skip {
			continue
		}
		for _, b := range c.clean {
			free[b.slab]++
			classOf[b.slab] = c
		}
		for _, fl := range c.dirty {
			for _, b := range fl.blocks {
				free[b.slab]++
				classOf[b.slab] = c
			}
		}
	}
	gone := make(map[device.Ptr]bool)
	for _, s := range p.slabs {
		if n := free[s]; n > 0 && n == p.slabLen[s] {
			gone[s] = true
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	keep := func(list []*block) []*block {
		out := list[:0]
		for _, b := range list {
			if !gone[b.slab] {
				out = append(out, b)
			}
		}
		clear(list[len(out):])
		return out
	}
	for _, c := range p.classes {
		if c == skip {
			continue
		}
		c.clean = keep(c.clean)
		for _, fl := range c.dirty {
			fl.blocks = keep(fl.blocks)
		}
	}
	var given int64
	var errs []error
	slabs := p.slabs[:0]
	for _, s := range p.slabs {
		if !gone[s] {
			slabs = append(slabs, s)
			continue
		}
		c := classOf[s]
		n := p.slabLen[s]
		delete(p.slabLen, s)
		c.nfree -= n
		bytes := n * int64(c.bytes)
		p.reserved -= bytes
		if err := p.b.Free(s); err != nil {
			errs = append(errs, fmt.Errorf("state: Pool.Trim: freeing a slab of %d bytes: %w", bytes, err))
			continue
		}
		given += bytes
	}
	clear(p.slabs[len(slabs):])
	p.slabs = slabs
	return given, errors.Join(errs...)
}
