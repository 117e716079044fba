// Package grid is a simulation field: mutable rows, no snapshots, no branches.
package grid

const side = 64

// Field is a 64x64 grid of cells, four float64 per cell.
//
//state:contract purpose="heat field of one simulation step"
//state:growth mutable bound=side*side
//state:owner step
//state:snapshot none
//state:cleanup on=step-end
type Field struct {
	Cells []float64 `state:"width=4"`
}
