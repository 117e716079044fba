// Package buffer is the experience replay buffer of a small learner: it
// keeps the last Window transitions, and older ones expire. Its handles
// (transition_state.go) are generated from the contract below.
package buffer

//go:generate go run github.com/gpustate/gpustate/cmd/stategen -report CONTRACTS.md

// Window is how many transitions the buffer keeps.
const Window = 512

// BlockRows is the transitions of a field one block holds: a block of
// expired rows goes back to the pool every BlockRows appends.
const BlockRows = 64

// Transition is one step of experience: what the agent saw, what it did
// and the reward it got.
//
//state:contract purpose="experience replay of one learner"
//state:growth append window=Window
//state:block rows=BlockRows
//state:owner learner
//state:cleanup on=training-end
type Transition struct {
	Obs    []float32 `state:"width=4"`
	Action []int32
	Reward []float32
}
