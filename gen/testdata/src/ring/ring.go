// Package ring holds window states: a replay buffer that keeps its last
// rows, with snapshots, and a trace without them.
package ring

const capacity = 1 << 12

// Transition is one step of experience.
//
//state:contract purpose="experience replay"
//state:growth append window=capacity
//state:owner learner
//state:retention optional
//state:block rows=256
type Transition struct {
	Obs    []float32 `state:"width=4"`
	Action []int32
	Reward []float32
}

// Trace keeps the last 64 samples of a probe, without snapshots.
//
//state:contract
//state:growth append window=64
//state:owner probe
//state:snapshot none
type Trace struct {
	Value []float64
}
