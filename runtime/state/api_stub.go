package state

import (
	"errors"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

var errNotImplemented = errors.New("state: not implemented yet")

// Head is a mutable state: the head of a line of versions. Its methods are
// safe for concurrent use; writers are serialized.
type Head struct{ lin *lineage }

// Snap is an immutable version of a state. Its content never changes,
// whatever happens later to its head, the head's branches or the pool; it
// stays readable after its head is released.
type Snap struct{ lin *lineage }

// Stats describes one head or snapshot.
type Stats struct {
	Version      Version
	Rows         int
	LogicalBytes int64
	// PhysicalBytes is the bytes of the blocks the version references,
	// each counted once here even when other versions share it; the pool's
	// PhysicalBytes counts every block once overall.
	PhysicalBytes int64
}

// Plan explains how At would reconstruct a version: from which checkpoint,
// with how many deltas, at what estimated cost, and what the alternatives
// cost.
type Plan struct {
	Target Version
	Candidate
	Alternatives []Candidate
}

// Candidate is one way to reconstruct a version.
type Candidate struct {
	Checkpoint Version
	Deltas     int
	SeedBytes  int64
	DeltaBytes int64
	Estimate   time.Duration
}

// NewHead returns a new head of layout l for owner.
//
//state:acquire
func (p *Pool) NewHead(l *Layout, owner Owner) (*Head, error) { return nil, errNotImplemented }

// Append appends rows.
//
//state:appends
func (h *Head) Append(cols [][]byte) error { return errNotImplemented }

// Write writes rows at at.
//
//state:mutates
func (h *Head) Write(at int, cols [][]byte) error { return errNotImplemented }

// Read copies rows [from, to) into dst.
func (h *Head) Read(from, to int, dst [][]byte) error { return errNotImplemented }

// AppendDevice reserves n rows for a kernel to fill.
//
//state:appends
func (h *Head) AppendDevice(n int) ([][]device.Span, error) { return nil, errNotImplemented }

// WriteDevice hands out rows [from, to) for a kernel to write.
//
//state:mutates
func (h *Head) WriteDevice(from, to int) ([][]device.Span, error) { return nil, errNotImplemented }

// Spans locates rows [from, to) in device memory.
//
//state:view
func (h *Head) Spans(from, to int) ([][]device.Span, error) { return nil, errNotImplemented }

// Len returns the rows.
func (h *Head) Len() int { return 0 }

// Bound returns the bound.
func (h *Head) Bound() int { return 0 }

// Version returns the version.
func (h *Head) Version() Version { return 0 }

// Owner returns the owner.
func (h *Head) Owner() Owner { return "" }

// Stats returns statistics.
func (h *Head) Stats() Stats { return Stats{} }

// Snapshot returns an immutable snapshot.
//
//state:acquire
func (h *Head) Snapshot() (*Snap, error) { return nil, errNotImplemented }

// Branch returns a new head.
//
//state:acquire
func (h *Head) Branch() (*Head, error) { return nil, errNotImplemented }

// Merge fastforwards h to child.
//
//state:mutates
func (h *Head) Merge(child *Head) error { return errNotImplemented }

// Rollback moves h back to to.
//
//state:mutates
func (h *Head) Rollback(to *Snap) error { return errNotImplemented }

// At reconstructs version v.
//
//state:acquire
func (h *Head) At(v Version) (*Snap, error) { return nil, errNotImplemented }

// Plan explains At(v).
func (h *Head) Plan(v Version) (Plan, error) { return Plan{}, errNotImplemented }

// Release releases h.
//
//state:release
func (h *Head) Release() error { return errNotImplemented }

// Read copies rows [from, to) into dst.
func (s *Snap) Read(from, to int, dst [][]byte) error { return errNotImplemented }

// Spans locates rows [from, to); read only.
//
//state:view
func (s *Snap) Spans(from, to int) ([][]device.Span, error) { return nil, errNotImplemented }

// Len returns the rows.
func (s *Snap) Len() int { return 0 }

// Version returns the version.
func (s *Snap) Version() Version { return 0 }

// Owner returns the owner.
func (s *Snap) Owner() Owner { return "" }

// Stats returns statistics.
func (s *Snap) Stats() Stats { return Stats{} }

// Release releases s.
//
//state:release
func (s *Snap) Release() error { return errNotImplemented }
