// Package dims holds constants that contracts in other packages name.
package dims

const (
	Head  = 64      // elements per head
	Rows  = 1 << 12 // rows of a table
	Half  = 0.5
	Limit = 1<<63 - 1
)

// Var is not a constant.
var Var = 3
