// Package field is the temperature field of a small heat simulation: a
// Side x Side grid of float32 cells, one state row per grid row, rewritten
// in place by every step. Its handles (field_state.go) are generated from
// the contract below, and past steps stay reconstructable from sparse
// checkpoints and the deltas between them.
package field

//go:generate go run github.com/gpustate/gpustate/cmd/stategen -report CONTRACTS.md

// Side is the grid's side in cells: the state's bound (rows) and the
// width of a row.
const Side = 64

// Field is one run's temperature field: row y of the state holds the Side
// cells of grid row y.
//
//state:contract purpose="temperature field of one simulation run"
//state:growth mutable bound=Side
//state:owner run
//state:snapshot immutable
//state:rollback descendants=invalidate
//state:checkpoint every=8 keep=4
//state:cleanup on=run-end
type Field struct {
	Cells []float32 `state:"width=64"` // Side cells
}
