package growth

//state:contract
//state:growth append // want `append growth of NoBound has no bound; add bound=N`
//state:owner session
type NoBound struct{ X []int32 }

//state:contract
//state:growth append bound=unbounded // want `bound=unbounded on NoReason has no reason; add reason=`
//state:owner session
type NoReason struct{ X []int32 }

//state:contract
//state:growth append bound=unbounded reason="" // want `bound=unbounded on EmptyReason has no reason`
//state:owner session
type EmptyReason struct{ X []int32 }

//state:contract
//state:growth append bound=64
//state:owner session
//state:checkpoint every=8 // want `checkpoint history of NoKeep has no keep, so it grows without limit; add keep=K`
type NoKeep struct{ X []int32 }

//state:contract
//state:growth mutable bound=64
//state:owner step
//state:checkpoint budget=64<<10 // want `checkpoint history of NoKeepBudget has no keep, so it grows without limit; add keep=K`
type NoKeepBudget struct{ X []int32 }

// BothSpacings has a contract error (every and budget both): stcontract
// reports it, and stgrowth says nothing about its missing keep.
//
//state:contract
//state:growth mutable bound=64
//state:owner step
//state:checkpoint every=8 budget=64<<10
type BothSpacings struct{ X []int32 }

// Cascade has a contract error (no owner): stcontract reports it, and
// stgrowth says nothing about its missing bound.
//
//state:contract
//state:growth append
type Cascade struct{ X []int32 }

// Fine is bounded; Drained is unbounded by a reasoned decision.
//
//state:contract
//state:growth append bound=64
//state:owner session
//state:checkpoint every=8 keep=4
type Fine struct{ X []int32 }

// FineBudget spaces its checkpoints by bytes written and keeps four.
//
//state:contract
//state:growth mutable bound=64
//state:owner step
//state:checkpoint budget=64<<10 keep=4
type FineBudget struct{ X []int32 }

//state:contract
//state:growth append bound=unbounded reason="drained by the exporter every second"
//state:owner process
type Drained struct{ X []int32 }

//state:contract
//state:growth mutable bound=16
//state:owner step
type Mutable struct{ X []int32 }

// Absurd has a bound no device can hold: stcontract reports it at the
// bound, and stgrowth says nothing about its checkpoint history either.
//
//state:contract
//state:growth append bound=1<<62
//state:owner session
//state:checkpoint every=8
type Absurd struct{ X []int64 }

// Sized names its bound and width as constant expressions: it is bounded.
//
//state:contract
//state:growth append bound="4 * Rows"
//state:owner session
//state:checkpoint every=8 keep=2
type Sized struct {
	X []int64 `state:"width=Rows / 64"`
}

// Rows is the row count Sized is built from.
const Rows = 1 << 10
