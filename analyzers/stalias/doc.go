// Package stalias defines an Analyzer that reports writes to immutable
// gpustate snapshots.
//
// # Analyzer stalias
//
// stalias: report writes through views of immutable snapshots
//
// A snapshot type (one whose doc comment holds //state:snapshot) is
// immutable. stalias reports two ways of breaking that:
//
// A call of a //state:mutates or //state:appends method on a snapshot value.
//
// A write through a view of a snapshot: the first result of a //state:view
// method called on a snapshot aliases the snapshot's memory, and so does
// every value derived from it by assignment, field selection, indexing,
// slicing and range. Writes are index assignments, ++, -- and op-assign on
// such a location, stores through a pointer, copy or clear into it, append
// to a sub-slice of it, and passing it to a parameter that is written: one
// named by //state:writes, or one inferred to be written because the
// function assigns through it or passes it to a writer, in any package
// (slices.Sort(view) is a write).
//
// The write is reported where it happens, or at the call that writes.
package stalias
