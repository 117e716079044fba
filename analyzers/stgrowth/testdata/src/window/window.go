// Package window checks that a window is a bound on memory: stgrowth asks a
// window state for nothing more, while the same state without its window
// is a finding.
package window

const W = 128

// Ring keeps its last W rows: silent.
//
//state:contract
//state:growth append window=W
//state:owner session
//state:block rows=32
type Ring struct{ X []float32 }

// RingTwin is Ring without its window.
//
//state:contract
//state:growth append // want `append growth of RingTwin has no bound; add bound=N`
//state:owner session
//state:block rows=32
type RingTwin struct{ X []float32 }

// BadWindow has a contract error (window with bound=): stcontract reports
// it, and stgrowth adds nothing.
//
//state:contract
//state:growth append bound=8 window=W
//state:owner session
type BadWindow struct{ X []float32 }
