// Package stgrowth defines an Analyzer that reports state that may grow
// without a bound.
//
// # Analyzer stgrowth
//
// stgrowth: report state that may grow without a bound
//
// An append-only state type must say how far it may grow: bound=N rows, or
// an explicit decision to grow without a bound with its reason:
//
//	//state:growth append bound=4096
//	//state:growth append bound=unbounded reason="drained by the exporter every second"
//
// stgrowth reports, at the growth or checkpoint line: append growth with no
// bound and no unbounded decision; bound=unbounded without a reason; and a
// checkpoint line without keep=K, whose history grows without limit.
// Contracts with stcontract errors get no stgrowth finding.
//
// It also reports a call to an appends method (one whose doc holds
// //state:appends, such as a generated Append, AppendDevice or
// AdoptPrefix) inside a loop whose error result is dropped: discarded as an
// expression statement, or assigned to _, or assigned to a local variable
// that no path reads before it is assigned again or the function returns. A loop is any cycle of the
// function's control flow: for and range statements, and loops built with
// goto. Once the state reaches its bound every later append fails
// (state.ErrBound for generated handles), a full pool fails it too
// (state.ErrNoMemory), and AdoptPrefix fails on a state that has rows
// already; such a loop goes on without noticing:
//
//	for _, tok := range toks {
//		s.Append(kv(tok)) // reported: check the error
//		err = s.Append(kv(tok)) // reported too, when nothing reads err
//	}
//
// An error read on some path (checked in the loop, or returned after it) is
// not dropped; nor is one stored in a named result, or in a variable that a
// function literal reads or whose address is taken. A function literal's
// body is checked on its own: it runs when it is called, not per iteration
// of the loop around it.
package stgrowth
