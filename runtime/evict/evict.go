// Package evict is the hand-off between the state store and the policy
// that picks which optional state goes first under memory pressure. The
// store (package runtime/state) finds the states it may evict and how much
// each holds; an Evictor only orders them. It imports nothing of the
// store, so that a policy needs nothing but this package.
package evict

// Victim is one state the store may evict, as a policy sees it.
type Victim struct {
	// ID identifies the state within one ranking.
	ID uint64
	// Owner and Type name the state's owner and its state type.
	Owner, Type string
	// Snapshot is true for a snapshot, false for a head.
	Snapshot bool
	// Cached is true for a block of a shared prefix that the store keeps
	// for heads to adopt and no head holds now (Owner is the owner that
	// wrote it). Evicting it costs a later head the prefill of its rows.
	Cached bool
	// Bytes are the bytes of the blocks the state references (shared ones
	// included: evicting it frees at most these).
	Bytes int64
	// LastUse is the pool's use clock at the state's last call: larger is
	// more recent. The clock counts calls, not time.
	LastUse uint64
}

// Evictor ranks victims: Rank reorders vs in place so that the first is
// evicted first. The store evicts in that order until it has the memory it
// needs; a policy that wants a state spared puts it last.
type Evictor interface {
	Rank(vs []Victim)
}
