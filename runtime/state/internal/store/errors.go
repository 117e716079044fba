package store

import (
	"fmt"

	"github.com/gpustate/gpustate/runtime/state"
)

// The sentinel errors are runtime/state's, which users match with errors.Is.
var (
	ErrBound          = state.ErrBound
	ErrShape          = state.ErrShape
	ErrRange          = state.ErrRange
	ErrReleased       = state.ErrReleased
	ErrNotAncestor    = state.ErrNotAncestor
	ErrOwner          = state.ErrOwner
	ErrDiverged       = state.ErrDiverged
	ErrInvalidated    = state.ErrInvalidated
	ErrNotRetained    = state.ErrNotRetained
	ErrEvicted        = state.ErrEvicted
	ErrExpired        = state.ErrExpired
	ErrNoMemory       = state.ErrNoMemory
	ErrCoupled        = state.ErrCoupled
	ErrReplayDiverged = state.ErrReplayDiverged
)

// errNilPool answers a call on a nil pool, or through a handle of none.
var errNilPool = fmt.Errorf("state: nil pool: %w", ErrReleased)

// errNil answers a call on a nil handle as on a released one (docs/INTERNALS.md:
// no method panics on a nil receiver).
func errNil(typ, op string) error {
	return fmt.Errorf("state: %s on a nil *%s: %w", op, typ, ErrReleased)
}

// groupErrorf returns an error of a group's call op.
func groupErrorf(op, format string, args ...any) error {
	return fmt.Errorf("state: group.%s: "+format, append([]any{op}, args...)...)
}
