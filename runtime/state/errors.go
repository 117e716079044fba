package state

import "errors"

// The sentinel errors. Every error the package returns wraps at most one of
// them (plus, for ErrNoMemory, the backend's own error when there is one),
// with context naming the state type and the call.
var (
	// ErrBound: an append past the layout's bound, or an append to a
	// mutable state (which has exactly Bound rows). Nothing is appended.
	ErrBound = errors.New("state: bound exceeded")
	// ErrShape: a batch whose columns hold different numbers of rows or a
	// length no multiple of a row, or a state whose row is larger than the
	// pool's blocks (the error names the remedy: a larger BlockBytes).
	ErrShape = errors.New("state: batch does not match the layout")
	// ErrRange: rows outside the state, or a write to an append-only state.
	ErrRange = errors.New("state: rows out of range")
	// ErrReleased: a call on a released handle or a closed pool.
	ErrReleased = errors.New("state: handle released")
	// ErrNotAncestor: a rollback target that is not an ancestor version of
	// the head (another lineage, or a version off the head's line).
	ErrNotAncestor = errors.New("state: not an ancestor version")
	// ErrOwner: a snapshot or branch of another owner, or a new head with
	// the empty owner (which would make isolation meaningless).
	ErrOwner = errors.New("state: another owner's state")
	// ErrDiverged: a fastforward merge whose parent changed since the
	// branch point (or a child of another lineage).
	ErrDiverged = errors.New("state: diverged since the branch point")
	// ErrInvalidated: a snapshot or branch taken from a line that a
	// rollback with Invalidate abandoned.
	ErrInvalidated = errors.New("state: invalidated by a rollback")
	// ErrNotRetained: a version that no retained checkpoint and deltas can
	// reconstruct, or At/Plan on a layout without a checkpoint policy.
	ErrNotRetained = errors.New("state: version not retained")
	// ErrEvicted: an optional head or snapshot the pool evicted under
	// memory pressure; every call but Release answers it.
	ErrEvicted = errors.New("state: evicted under memory pressure")
	// ErrExpired: rows of a window state below Len()-Window,
	// which are no longer held; indices stay stable, so a newer row is
	// still read at the index it was appended at.
	ErrExpired = errors.New("state: rows expired from the window")
	// ErrNoMemory: the pool's MaxBytes or the device is exhausted, and
	// nothing more could be evicted.
	ErrNoMemory = errors.New("state: out of memory")
	// ErrCoupled: Rollback, Merge or Release called on a member head that
	// a group holds; the group moves its members together, so the call is
	// made on the group (docs/GUIDE.md, "Coupled state").
	ErrCoupled = errors.New("state: member of a group")
	// ErrReplayDiverged: a reconstruction by replay whose rows hash
	// otherwise than the step recorded (a step function that is not
	// deterministic); nothing is kept.
	ErrReplayDiverged = errors.New("state: replay diverged from the recorded step")
)
