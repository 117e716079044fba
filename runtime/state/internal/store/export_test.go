package store

import (
	"fmt"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// CheckStreamMarks is checkStreamMarks for the interaction model (package
// store_test).
var CheckStreamMarks = checkStreamMarks

// The methods below are not the package's API: nothing outside the
// package called them (TestExportsHaveCallersOutside), so they exist for
// the tests alone, which read a handle's owner, layout or last
// reconstruction and a pool's cost model.

// RowBytes is rowBytes.
func (c Column) RowBytes() int { return c.rowBytes() }

// CostModel returns the pool's cost model as measured so far: the model
// of the first size class a head's Plan or At measured (zero before).
func (p *Pool) CostModel() (CostModel, error) {
	if err := p.enter(); err != nil {
		return CostModel{}, fmt.Errorf("state: CostModel: %w", err)
	}
	defer p.leave()
	return p.calib.costModel(), nil
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

// NewPool is makePool, which runtime/state's NewPool calls through the link.
func NewPool(b device.Backend, opt PoolOptions) (*Pool, error) { return makePool(b, opt) }

// Bytes is state.Bytes.
func Bytes[T any](s []T) []byte { return state.Bytes(s) }

// Rows is state.Rows.
func Rows[T any](b []byte) []T { return state.Rows[T](b) }

// Step is StepWith for a step function, as the tests write it.
func (h *Head) Step(in [][]byte, verify bool, f StepFunc) error {
	var s Stepper
	if f != nil {
		s = f
	}
	return h.StepWith(in, verify, s)
}

// StepFunc computes a version of a state from the one before, in place:
// spans locate every row (per column, one span per block, in row order)
// and in is the step's input, one []byte per input column. It runs again,
// on the same input, whenever a reconstruction passes its version, so it
// must compute the same rows from the same rows and input, and must not
// change in nor call the head it steps (which is locked while it runs).
type StepFunc func(spans [][]device.Span, in [][]byte) error

// Step runs f.
func (f StepFunc) Step(spans [][]device.Span, in [][]byte) error { return f(spans, in) }

// Snapshot is SnapshotInto a new Snap, as the tests take snapshots.
func (h *Head) Snapshot() (*Snap, error) {
	s := new(Snap)
	if err := h.SnapshotInto(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Branch is BranchInto a new Head, as the tests branch.
func (h *Head) Branch() (*Head, error) {
	c := new(Head)
	if err := h.BranchInto(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Snapshot is SnapshotInto a cut of its own, as generated code makes one
// inside its handle.
func (g *Group) Snapshot() (*GroupSnap, error) {
	cut := new(GroupSnap)
	if err := g.SnapshotInto(cut); err != nil {
		return nil, err
	}
	return cut, nil
}
