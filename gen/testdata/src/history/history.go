// Package history holds state types whose past versions are kept: the
// report charts each one's checkpoint memory against reconstruction cost.
package history

// Side is the grid's side.
const Side = 32

// Heat is a simulation's temperature grid, rewritten by every step, with
// a checkpoint whenever 64 KiB of deltas have been written since the last.
//
//state:contract purpose="temperature grid of one run"
//state:growth mutable bound=Side*Side
//state:owner run
//state:rollback descendants=keep
//state:checkpoint budget=64<<10 keep=3
type Heat struct {
	Cells []float32 `state:"width=4"`
}

// Trace is an unbounded event trace with a long history.
//
//state:contract
//state:growth append bound=unbounded reason="rotated by the collector"
//state:owner process
//state:checkpoint every=100 keep=5
type Trace struct {
	Events []uint64
	Tags   []uint16
}

// Tiny has a budget smaller than one version's writes: every version is
// a checkpoint.
//
//state:contract
//state:growth mutable bound=256
//state:owner step
//state:checkpoint keep=2 budget=100
type Tiny struct {
	V []float64
}

// Spool appends up to 1024 events, a checkpoint per 2 KiB of them: the
// spacing in versions depends on the rows each version appends.
//
//state:contract
//state:growth append bound=1024
//state:owner session
//state:checkpoint budget=2<<10 keep=4
type Spool struct {
	Events []uint64
}

// Ring appends without a bound and a budget so large that the runtime's
// cap on the versions between two checkpoints decides the spacing.
//
//state:contract
//state:growth append bound=unbounded reason="trimmed by its reader"
//state:owner process
//state:checkpoint budget=1<<20 keep=2
type Ring struct {
	Events []uint64
}
