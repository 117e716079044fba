package state

import (
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// Owner names the owner of a state (a session, a request, a step...), which
// has the mutation and cleanup authority over it. Blocks are never shared
// across owners but for declared shared prefixes within one Domain, and a
// block one owner used is zeroed before another gets it. A new state
// refuses the empty owner with ErrOwner.
type Owner string

// Version identifies a version of a state. Every successful write makes a
// new version, larger than every version its lineage (the head it was
// created as, with all its branches) has seen.
type Version uint64

// Domain names a sharing domain: heads of one non-empty domain may share
// the blocks of a common prefix (a shared key column), heads of two domains
// never do. It plays the part of a prefix cache's salt: one tenant, one
// model, one adapter per domain. The empty domain shares with nobody.
type Domain string

// Stats describes one head or snapshot.
type Stats struct {
	Version Version
	// Rows is the version's Len: for a window, every row ever appended.
	Rows int
	// LogicalBytes is the size of the version's readable rows (for a
	// window, the last Window rows at most).
	LogicalBytes int64
	// PhysicalBytes is the bytes of the blocks the version references,
	// each counted here even when other versions share it; the pool's
	// PhysicalBytes counts every block once overall.
	PhysicalBytes int64
	// Checkpoints and HistoryBytes describe a checkpointed head's history:
	// the checkpoints it keeps and the bytes of the blocks its deltas hold.
	Checkpoints  int
	HistoryBytes int64
}

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
	// Measured is how long At took to perform the plan; zero for a plan
	// that Plan returned.
	Measured time.Duration
	// Low and High are the range the chosen candidate's time is expected
	// in, two deviations of the pool's measured reconstructions from their
	// estimates; zero until three were measured.
	Low, High time.Duration
	// Observed counts the reconstructions of the pool whose measured
	// time refined this estimate: those of states whose largest blocks
	// are of the same size class.
	Observed int
	// Unmeasured says the pool never measured a cost this plan incurs (it
	// had no free room to measure in, or the plan takes memory new to a
	// pool that never measured any), so it gives no estimate rather than a
	// guess: Estimate, Low and High are zero, and the candidates are
	// ranked by the bytes they copy.
	Unmeasured bool
}

// Candidate is one way to reconstruct a version: seed from the checkpoint
// at version Checkpoint, then apply the Deltas versions after it.
type Candidate struct {
	Checkpoint Version
	Deltas     int
	// SeedBytes are the bytes of the checkpoint's blocks that the deltas
	// overwrite, which the reconstruction copies first (the rest it
	// shares); DeltaBytes are the bytes the deltas apply.
	SeedBytes, DeltaBytes int64
	// Copies counts the device copies, Blocks the blocks taken.
	Copies, Blocks int
	// NewBytes are the bytes of memory the reconstruction touches for the
	// first time (on the host backend, pages that fault).
	NewBytes int64
	// Steps counts the versions among Deltas made by Step, which the
	// reconstruction runs again; Replayed is the time their step functions
	// are expected to take, from the times they took when they ran.
	Steps    int
	Replayed time.Duration
	// Estimate is the cost by the pool's cost model, refined by the
	// reconstructions the pool measured (Plan.Observed), plus the cost of
	// NewBytes and Replayed.
	Estimate time.Duration
}

// TableColumn locates one column's table.
type TableColumn struct {
	// Ptr is the table's device address (0 while the column has no block):
	// the entry of block First. It changes when a write changes an entry
	// earlier versions had.
	Ptr device.Ptr
	// First is the block of the table's first entry: 0, but for a window
	// state, whose expired blocks leave the table as it moves, so that the
	// table of a window that slides for ever stays the window's size.
	// Blocks is the column's blocks, expired ones included: the table
	// holds the entries of blocks [First, Blocks), and a kernel finds row
	// r at entry r/RowsPerBlock - First. RowsPerBlock and RowBytes place
	// rows inside a block.
	First, Blocks, RowsPerBlock, RowBytes int
}
