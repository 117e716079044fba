// Package snapres declares a snapshot type with a read-only view.
package snapres

// Snap is an immutable snapshot.
//
//state:snapshot
type Snap struct{ rows []float32 }

// Rows aliases the snapshot's rows: read only.
//
//state:view
func (v *Snap) Rows() []float32 { return v.rows }
