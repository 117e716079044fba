// Package groupclash declares names stategen generates for a group.
package groupclash

//state:contract
//state:growth append bound=8
//state:owner session
type A struct{ X []int32 }

//state:contract
//state:growth append bound=8
//state:owner session
type B struct{ Y []int32 }

//state:group
//state:owner session
type Pair struct {
	A A
	B B
}

// NewPairState is the user's own: a clash.
func NewPairState() {}

// PairSnapshot is the user's own: a clash.
type PairSnapshot struct{}

// B is a method stategen generates on PairState: a clash.
func (p *PairState) B() {}
