// Package cascade has a state type whose contract has an error (no owner):
// stcontract reports it, and nothing is said about its handles.
package cascade

// Bad is a state type with a faulty contract.
//
//state:contract
//state:growth append bound=8
type Bad struct {
	X []int8
}

// BadState is the handle generated for Bad.
type BadState struct{}

// NewBadState acquires a handle.
//
//state:acquire
func NewBadState() *BadState { return &BadState{} }

// Release releases the handle.
//
//state:release
func (s *BadState) Release() error { return nil }

// Good is a state type with a valid contract.
//
//state:contract
//state:growth append bound=8
//state:owner session
type Good struct {
	X []int8
}

// GoodState is the handle generated for Good.
type GoodState struct{}

// NewGoodState acquires a handle.
//
//state:acquire
func NewGoodState() *GoodState { return &GoodState{} }

// Release releases the handle.
//
//state:release
func (s *GoodState) Release() error { return nil }

func leaks() {
	_ = NewBadState().Release
	b := NewBadState()
	_ = b
	g := NewGoodState() // want `GoodState acquired by NewGoodState is not released on every path`
	_ = g
}
