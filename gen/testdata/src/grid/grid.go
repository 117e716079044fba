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

// scratch is the step's private scratch space: an unexported state type
// gets unexported handles.
//
//state:contract
//state:growth append bound=256
//state:owner step
//state:snapshot none
type scratch struct {
	flags []uint8
}
