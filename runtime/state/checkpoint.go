package state

import (
	"time"
)

// Plan explains how At would reconstruct a version: from which checkpoint,
// with how many deltas, at what estimated cost, and what the alternatives
// cost.
type Plan struct {
	// Target is the version to reconstruct.
	Target Version
	// Candidate is the cheapest way.
	Candidate
	// Alternatives are the other ways, cheapest first.
	Alternatives []Candidate
}

// Candidate is one way to reconstruct a version: seed from a checkpoint,
// then apply the deltas after it.
type Candidate struct {
	Checkpoint Version
	Deltas     int
	SeedBytes  int64
	DeltaBytes int64
	Estimate   time.Duration
}

// history keeps a head's checkpoints and deltas.
type history struct {
	policy CheckpointPolicy
}

func newHistory(p *CheckpointPolicy) *history { return &history{policy: *p} }

func (x *history) clone() *history                       { c := *x; return &c }
func (x *history) release(freed *[]*block)               {}
func (x *history) rollback(to position, freed *[]*block) {}
func (h *Head) record(from, to int)                      {}

// At reconstructs version v of the head's own ancestry.
//
//state:acquire
func (h *Head) At(v Version) (*Snap, error) {
	return nil, h.errorf("At", "version %d: %w", v, ErrNotRetained)
}

// Plan explains how At(v) would reconstruct version v, without doing it.
func (h *Head) Plan(v Version) (Plan, error) {
	return Plan{}, h.errorf("Plan", "version %d: %w", v, ErrNotRetained)
}

// roots returns the roots the history holds.
func (x *history) roots() []*root { return nil }
