// Package state is the versioned store behind the typed handles that
// stategen generates: rows of fixed-size columns kept in device memory in
// fixed-size blocks, with immutable snapshots, isolated branches, fastforward
// merge and rollback, all by copy-on-write of exactly the blocks written.
//
// A Pool takes device memory from a device.Backend in large slabs and carves
// fixed-size blocks from them. A Head is a mutable state of one Layout and
// one Owner; a Snap is an immutable version of it. Every column of a version
// is a persistent radix tree of reference-counted block references, and a
// version is a reference-counted root over those trees: a snapshot shares the
// root (O(1) whatever the number of rows or blocks), and a later write copies
// the path from the root to the blocks it writes, and those blocks only.
//
// The store is byte-level: a batch is one []byte per column, and Bytes and
// Rows convert typed slices without copying. Generated code adds the types
// and names of a state's fields on top of this API and nothing else.
//
// Every method is safe for concurrent use. A Head serializes its writers; a
// Snap may be read from many goroutines while its head is written. Errors
// wrap the package's sentinel errors (ErrBound, ErrShape, ...) so that
// errors.Is tells them apart; no method panics on bad input. A call that
// fails changes nothing: not the rows, not the version, not the statistics,
// and memory taken for it is given back.
package state
