// Package stownership defines the analyzer that the statevet dataflow
// analyzers share: it infers the ownership facts of plain Go functions
// (acquirer, takes, releases, writes) and runs the obligation analysis once
// per package, as golang.org/x/tools keeps ctrlflow apart from the checkers
// that read its graphs. It reports nothing: stcleanup reports the leaks of
// its Result; stalias and streleased read its oracle and function bodies.
//
// The obligation analysis of one function body (obligation.go) tracks, per
// acquired resource and per parameter whose release is being inferred,
// whether it may still be outstanding and which local variables may hold
// it: a forward may-dataflow over the body's CFG whose transfer functions
// are assign.go, calls.go, escape.go, transfer.go and branch.go over the
// variables vars.go indexes. What a call does to its operands is the
// oracle's (package ownership); calls whose callee's facts are unknown
// borrow (docs/analyzers/stcleanup.md).
package stownership
