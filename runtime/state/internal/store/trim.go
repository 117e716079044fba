package store

import "fmt"

// Trim gives the slabs whose blocks are all free back to the device and
// returns the bytes it gave back. Free blocks leave their size classes for
// their slabs' free extents first, so a slab whose blocks are free in any
// classes is wholly free. After every handle is released, Trim
// leaves ReservedBytes at zero, unless shared prefix blocks are cached:
// those are in use, kept for later heads to adopt (PoolStats.CachedBytes),
// until memory pressure evicts them or ForgetPrefixes drops them. A closed
// pool holds nothing to trim.
func (p *Pool) Trim() (int64, error) {
	if err := p.enter(); err != nil {
		return 0, fmt.Errorf("state: Pool.Trim: %w", err)
	}
	defer p.leave()
	return p.mem.Trim("Pool.Trim")
}
