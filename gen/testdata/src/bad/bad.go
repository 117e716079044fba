// Package bad has contracts with mistakes: nothing may be generated for it.
package bad

// Cache forgets its owner and misspells a verb.
//
//state:contract
//state:growth append bound=16
//state:snapshto immutable
type Cache struct {
	Rows []float32
}
