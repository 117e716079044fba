package ignore

// Above is silenced by an ignore on the line above the finding.
//
//state:contract
//statevet:ignore stgrowth reason="grows with the request, which the server bounds"
//state:growth append
//state:owner session
type Above struct{ X []int32 }

// Same is silenced on the finding's own line, by an ignore naming two
// analyzers.
//
//state:appends
func (a *Above) Append(x int32) error { return nil }

func fill(a *Above, xs []int32) {
	for _, x := range xs {
		a.Append(x) //statevet:ignore stcleanup,stgrowth reason="Above's bound is checked by the caller"
		a.Append(x) // want `error of \(\*Above\).Append is discarded inside a loop`
	}
}

// NoReason is not silenced: an ignore needs a reason.
//
//state:contract
//statevet:ignore stgrowth // want `//statevet:ignore stgrowth has no reason, so it silences nothing`
//state:growth append // want `append growth of NoReason has no bound`
//state:owner session
type NoReason struct{ X []int32 }

// EmptyReason is not silenced either.
//
//state:contract
//statevet:ignore stgrowth reason=" " // want `has no reason`
//state:growth append // want `append growth of EmptyReason has no bound`
//state:owner session
type EmptyReason struct{ X []int32 }

// Unused has no stgrowth finding: its ignore silences nothing.
//
//state:contract
//statevet:ignore stgrowth reason="left over" // want `//statevet:ignore stgrowth silences nothing: no stgrowth finding on this line or the next`
//state:growth append bound=64
//state:owner session
type Unused struct{ X []int32 }

// TooFar is not silenced: the ignore is two lines above the finding.
//
//state:contract
//statevet:ignore stgrowth reason="too far away" // want `silences nothing`
//state:owner session
//state:growth append // want `append growth of TooFar has no bound`
type TooFar struct{ X []int32 }

// Other names another analyzer, which stgrowth neither honours nor checks.
//
//state:contract
//statevet:ignore stcleanup reason="another analyzer's business"
//state:growth append // want `append growth of Other has no bound`
//state:owner session
type Other struct{ X []int32 }

// Malformed comments are stcontract's to report; stgrowth ignores them.
//
//state:contract
//statevet:ignore
//state:growth append // want `append growth of Malformed has no bound`
//state:owner session
type Malformed struct{ X []int32 }

//statevetignore is not an ignore comment at all.
