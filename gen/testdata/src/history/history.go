// Package history holds state types whose past versions are kept: the
// report charts each one's checkpoint memory against reconstruction cost.
package history

// Side is the grid's side.
const Side = 32

// Heat is a simulation's temperature grid, rewritten by every step, with
// a budget for its checkpoint memory.
//
//state:contract purpose="temperature grid of one run"
//state:growth mutable bound=Side*Side
//state:owner run
//state:rollback descendants=keep
//state:checkpoint every=4 keep=3 budget=64<<10
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

// Tiny is a budget smaller than one checkpoint: no placement fits.
//
//state:contract
//state:growth mutable bound=256
//state:owner step
//state:checkpoint every=2 keep=2 budget=100
type Tiny struct {
	V []float64
}
