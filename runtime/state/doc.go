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
// # Versions and lineages
//
// A head made by Pool.NewHead, its branches and their snapshots form a
// lineage: every write makes a version numbered above every version the
// lineage has seen. Rollback moves a head back to an ancestor version;
// with Invalidate, snapshots and branches taken from the line it leaves
// answer ErrInvalidated. Merge fastforwards a head to a branch when the
// head has not changed since the branch left it.
//
// # Checkpoints
//
// A layout with a CheckpointPolicy keeps, per head, the deltas of its
// writes (copies of the rows written, in pool blocks) and every Every
// versions (or every Budget bytes of deltas) a checkpoint: a snapshot,
// which costs one reference. At reconstructs a past version of the head's
// own line from a checkpoint and the deltas after it; Plan tells which
// checkpoint and at what cost, by a cost model the pool measures on its
// backend (Pool.CostModel). Keep bounds the checkpoints, and with them the
// history. Package placement chooses checkpoints for a chain of versions
// under a memory budget.
//
// # Memory
//
// Pool.Stats and the handles' Stats keep logical bytes (what the live
// versions would take unshared) and physical bytes (the blocks in use)
// apart, each counted as the store runs. Blocks are never shared across
// owners, and a block one owner used is zeroed before another gets it.
//
// # Concurrency and failure
//
// Every method is safe for concurrent use. A Head serializes its writers; a
// Snap may be read from many goroutines while its head is written. Errors
// wrap the package's sentinel errors (ErrBound, ErrShape, ...) so that
// errors.Is tells them apart; no method panics on bad input. A call that
// fails changes nothing: not the rows, not the version, not the statistics,
// and memory taken for it is given back.
package state
