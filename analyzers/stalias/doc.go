// Package stalias defines an Analyzer that reports writes to immutable
// gpustate snapshots and through device spans that are not the caller's to
// write.
//
// # Analyzer stalias
//
// stalias: report writes through views of snapshots and through read-only or stale device spans
//
// A snapshot type (one whose doc comment holds //state:snapshot) is
// immutable, and the blocks of a state are shared between its head, its
// snapshots and its branches. stalias reports the ways of breaking that:
//
// A call of a //state:mutates or //state:appends method on a snapshot value.
//
// A write through a view of a snapshot: the first result of a //state:view
// method called on a snapshot aliases the snapshot's memory, and so does
// every value derived from it by assignment, field selection, indexing,
// slicing, range, address arithmetic and composite literals of device
// spans. Writes are index assignments, ++, -- and op-assign on such a
// location, stores through a pointer, copy or clear into it, append to a
// sub-slice of it, and passing it to a parameter that is written: one named
// by //state:writes (a kernel launcher), the dst of a device-layer copy
// (CopyHtoD, CopyDtoD, Memset), or one inferred to be written because the
// function assigns through it or passes it to a writer, in any package
// (slices.Sort(view) is a write; so is a wrapper that hands a span's Ptr to
// Memset).
//
// A write through the device spans (values holding device.Span) that a
// //state:view method of a head returns, such as the generated Spans: they
// are read only, by contract, since their blocks may be shared with
// snapshots and branches, and, for a state with declared prefix sharing,
// with the heads of other owners that adopted them (AdoptPrefix). Rows are
// written through the spans AppendDevice or WriteDevice return.
//
// A write through the spans a //state:appends or //state:mutates method of
// a head returns (AppendDevice, WriteDevice) after a later call on the same
// head: a method with a directive (Snapshot, Branch, Append, AdoptPrefix,
// another AppendDevice, Release) or a function that releases it. Those spans are the
// caller's only until that call; after a Snapshot the blocks are the
// snapshot's too. The same head is the same value under any name: a call
// through a local variable that was assigned the head, or a copy of it
// (g := h, x := s.cache, a copy of a struct that holds it, append(hs, h)),
// counts on every path where the variable may hold it; a call through a
// variable that was assigned another head (a = b, the result of a call) on
// every path since does not. A head stored into a field (s.cache = h),
// returned by a function, passed as an argument into a function or
// literal, or reached through a pointer to the variable that holds it is
// known by that operand only, and a reassignment made inside a function
// literal is not seen after the literal runs.
//
// A function literal is checked where it runs: at its definition, where a
// variable bound to it is called, and, for a deferred call, at each exit of
// the function; a view it captures is a view inside it.
//
// The write is reported where it happens, or at the call that writes.
package stalias
