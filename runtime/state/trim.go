package state

import (
	"errors"
	"fmt"

	"github.com/gpustate/gpustate/runtime/device"
)

// Trim gives the slabs whose blocks are all free back to the device and
// returns the bytes it gave back. After every handle is released, Trim
// leaves ReservedBytes at zero. A closed pool holds nothing to trim.
func (p *Pool) Trim() (int64, error) {
	leave, err := p.enter()
	if err != nil {
		return 0, fmt.Errorf("state: Pool.Trim: %w", err)
	}
	defer leave()
	p.mu.Lock()
	defer p.mu.Unlock()
	free := make(map[device.Ptr]int64, len(p.slabs))
	for _, b := range p.clean {
		free[b.slab]++
	}
	for _, fl := range p.dirty {
		for _, b := range fl.blocks {
			free[b.slab]++
		}
	}
	gone := make(map[device.Ptr]bool)
	for _, s := range p.slabs {
		if free[s] == p.slabLen[s] {
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
	p.clean = keep(p.clean)
	for _, fl := range p.dirty {
		fl.blocks = keep(fl.blocks)
	}
	var given int64
	var errs []error
	slabs := p.slabs[:0]
	for _, s := range p.slabs {
		if !gone[s] {
			slabs = append(slabs, s)
			continue
		}
		n := p.slabLen[s]
		delete(p.slabLen, s)
		p.nfree -= n
		bytes := n * int64(p.blockBytes)
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
