// Package window holds window growth and block lines: each faulty contract
// has a silent twin that differs only in the fault.
package window

const W = 256

// Replay keeps the last 4*W transitions, 64 rows to a block: silent.
//
//state:contract
//state:growth append window=4*W
//state:owner process
//state:retention optional
//state:block rows=64
type Replay struct {
	Obs    []float32 `state:"width=8"`
	Reward []float32
}

//state:contract
//state:growth mutable window=W // want `window applies only to append growth, and MutableWindow is mutable`
//state:owner step
type MutableWindow struct{ X []int32 }

// MutableTwin is MutableWindow with bound=: silent.
//
//state:contract
//state:growth mutable bound=W
//state:owner step
type MutableTwin struct{ X []int32 }

//state:contract
//state:growth append bound=64 window=W // want `growth of BoundAndWindow has both bound= and window=; a window already bounds memory`
//state:owner session
type BoundAndWindow struct{ X []int32 }

//state:contract
//state:growth append window=W reason="ring" // want `reason applies only to bound=unbounded, and the window of WindowReason already bounds it`
//state:owner session
type WindowReason struct{ X []int32 }

//state:contract
//state:growth append window=0 // want `window "0" of ZeroWindow is 0; a window must be a positive number of rows`
//state:owner session
type ZeroWindow struct{ X []int32 }

//state:contract
//state:growth append window=Missing // want `window "Missing" of NoConst .*write a positive integer constant`
//state:owner session
type NoConst struct{ X []int32 }

//state:contract
//state:growth append window=W
//state:owner session
//state:checkpoint every=4 keep=2 // want `//state:checkpoint of WindowHistory cannot keep the history of a window`
type WindowHistory struct{ X []int32 }

// HistoryTwin is WindowHistory with a bound: silent.
//
//state:contract
//state:growth append bound=W
//state:owner session
//state:checkpoint every=4 keep=2
type HistoryTwin struct{ X []int32 }

//state:contract
//state:growth append window=W
//state:owner session
//state:block // want `//state:block of NoRows needs rows=N`
type NoRows struct{ X []int32 }

//state:contract
//state:growth append window=W
//state:owner session
//state:block rows=-4 // want `block rows "-4" of NegRows is -4; rows per block must be between 1 and`
type NegRows struct{ X []int32 }

// BlockTwin is a bounded state with a block line: silent.
//
//state:contract
//state:growth append bound=W
//state:owner session
//state:block rows=16
type BlockTwin struct{ X []int32 }
