package store

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Stats returns the pool's memory figures.
func (p *Pool) Stats() PoolStats {
	if p == nil {
		return PoolStats{}
	}
	ms := p.mem.Stats()
	p.mu.Lock()
	st := PoolStats{
		LogicalBytes:  p.gate.logical(),
		PhysicalBytes: ms.InUseBytes,
		ReservedBytes: ms.Reserved,
		Live:          p.liveCount(),
		BlockBytes:    p.blockBytes,
		Blocks:        ms.InUse,
		FreeBlocks:    ms.Free,
		Slabs:         ms.Slabs,
		HistoryBytes:  p.gate.history(),
		EvictedBytes:  p.evictedBytes.Load(),
		RebuiltBytes:  p.rebuiltBytes.Load(),
		Evictions:     p.evictions.Load(),
		AdoptCalls:    p.adoptCalls.Load(),
		AdoptHits:     p.adoptHits.Load(),
		AdoptedRows:   p.adoptedRows.Load(),
		PendingBytes:  ms.Pending,
	}
	closed := p.closed.Load()
	p.mu.Unlock()
	if p.tier != nil {
		st.TierBytes = p.tier.usedBytes()
		st.TierOut, st.TierIn, st.TierDropped = p.tier.out.Load(), p.tier.in.Load(), p.tier.dropped.Load()
	}
	st.CachedBytes = p.cache.cachedBytes() + p.groups.cachedBytes()
	if !closed {
		if free, total, err := p.b.MemInfo(); err == nil {
			st.Device = &DeviceStats{Backend: p.b.Name(), Free: free, Total: total}
			if p.telemetry != nil {
				if m, err := p.telemetry(); err == nil {
					st.Device.Telemetry = &m
				}
			}
		}
	}
	return st
}

// Close waits for the stream events of pending blocks (RecordStream), then
// gives every slab back to the backend (the backend itself stays open: it
// is the caller's). Handles still live are released with it: their
// later calls answer ErrReleased, and the error returned names each of them
// by type and owner. Closing a closed pool does nothing.
//
//state:release
func (p *Pool) Close() error {
	if p == nil {
		return errNilPool
	}
	p.gate.shut()
	defer p.gate.open()
	p.WaitPending() // no handle call runs, so no block turns pending now
	var errs []error
	if !p.closed.Load() {
		if err := p.tables.releaseLive(); err != nil {
			errs = append(errs, fmt.Errorf("state: pool close: %w", err))
		}
		p.WaitPending() // tables whose streams were recorded
	}
	if p.tier != nil {
		p.tier.drain() // copies back from the tier, before device memory goes
	}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return nil
	}
	p.closed.Store(true)
	if live := p.liveHandles(); len(live) > 0 {
		names := make([]string, 0, len(live))
		for _, h := range live {
			names = append(names, h.describe())
		}
		sort.Strings(names)
		errs = append(errs, fmt.Errorf("state: pool closed with %d live handles: %s", len(names), strings.Join(names, "; ")))
		for _, x := range live {
			if h, ok := x.(*Head); ok {
				h.async.closeEvents() // its Release, after Close, no longer reaches them
			}
		}
	}
	if err := p.staging.close(p.b); err != nil {
		errs = append(errs, fmt.Errorf("state: pool close: %w", err))
	}
	if err := p.tables.close(p.b); err != nil {
		errs = append(errs, fmt.Errorf("state: pool close: %w", err))
	}
	p.forgetLive()
	p.cache.reset()
	p.groups.reset()
	p.rec.forget()
	p.mu.Unlock()
	if err := p.mem.Close("pool close"); err != nil {
		errs = append(errs, err)
	}
	if p.tier != nil {
		p.tierPx.forget("", true)
		if err := p.tier.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := p.deltaSt.close(); err != nil {
		errs = append(errs, fmt.Errorf("state: pool close: %w", err))
	}
	p.gate.zero()
	return errors.Join(errs...)
}

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

// ForgetPrefixes takes out of the prefix cache every block of domain d
// (of every layout), as a tenant that leaves would: blocks no head holds
// go back to the pool, and blocks heads hold stay theirs but can no longer
// be adopted. It returns the bytes given back to the pool.
func (p *Pool) ForgetPrefixes(d Domain) int64 {
	if p == nil {
		return 0
	}
	if err := p.enter(); err != nil {
		return 0
	}
	defer p.leave()
	var freed []*block
	for _, b := range p.cache.forget(d) {
		releaseBlock(b, &freed) // the cache's references, given up unlocked
	}
	freed = append(freed, p.groups.forget(d)...) // registered group states (group_share.go)
	p.tierPx.drop(p.tier, d, false)              // and the domain's blocks in the host tier
	p.free(freed)
	return blockBytes(freed)
}
