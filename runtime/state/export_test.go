package state

import "fmt"

// CheckStreamMarks is checkStreamMarks for the interaction model (package
// state_test).
var CheckStreamMarks = checkStreamMarks

// The methods below are not the package's API: nothing outside the
// package called them (TestExportsHaveCallersOutside), so they exist for
// the tests alone, which read a handle's owner, layout or last
// reconstruction and a pool's cost model.

// RowBytes is rowBytes.
func (c Column) RowBytes() int { return c.rowBytes() }

// CostModel returns the pool's cost model, measuring the backend on first
// use.
func (p *Pool) CostModel() (CostModel, error) {
	if err := p.enter(); err != nil {
		return CostModel{}, fmt.Errorf("state: CostModel: %w", err)
	}
	defer p.leave()
	return p.costModel()
}

// BlockBytes returns the pool's own block size: PoolOptions.BlockBytes,
// or DefaultBlockBytes for a pool whose blocks follow its layouts' rows
// (PoolStats.BlockBytes).
func (p *Pool) BlockBytes() int {
	if p == nil {
		return 0
	}
	return p.blockBytes
}

// LastReconstruction returns the plan the last At on h performed, with
// the cost it measured; false when At has not run.
func (h *Head) LastReconstruction() (Plan, bool) {
	if h == nil {
		return Plan{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hist == nil || h.hist.last == nil {
		return Plan{}, false
	}
	return *h.hist.last, true
}

// InvalidationSteps returns the segments the rollbacks of h's lineage
// have passed to find the handles they invalidate (lineage.steps).
func (h *Head) InvalidationSteps() int {
	if h == nil || h.lin == nil {
		return 0
	}
	h.lin.mu.Lock()
	defer h.lin.mu.Unlock()
	return h.lin.steps
}

// Owner returns the head's owner.
func (h *Head) Owner() Owner {
	if h == nil {
		return ""
	}
	return h.owner
}

// Layout returns a copy of the head's layout.
func (h *Head) Layout() *Layout {
	if h == nil {
		return nil
	}
	return h.l.clone()
}

// Owner returns the snapshot's owner.
func (s *Snap) Owner() Owner {
	if s == nil {
		return ""
	}
	return s.owner
}

// Stats returns the snapshot's version, rows, logical and physical bytes
// (none once released, or once its pool is closed).
func (s *Snap) Stats() Stats {
	if s == nil {
		return Stats{}
	}
	if s.pool.isClosed() {
		return Stats{Version: s.pos.v}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.stats(s.r, s.pos.v)
	if s.tier != nil {
		st.Rows, st.LogicalBytes = s.tier.rows, s.logical
	}
	return st
}

// Len returns the number of members.
func (g *Group) Len() int {
	if g == nil {
		return 0
	}
	return len(g.heads)
}

// Len returns the number of members' snapshots.
func (v *GroupSnap) Len() int {
	if v == nil {
		return 0
	}
	return len(v.snaps)
}
