// Package link joins runtime/state, the package users name, to the store
// that implements it (runtime/state/internal/store), which imports
// runtime/state. Each side sets in its init the functions the other calls,
// so that neither exports them.
package link

import "github.com/gpustate/gpustate/runtime/device"

var (
	// NewPool makes a store pool from a state.PoolOptions; the store sets
	// it. A program without the store (no generated handles, no import of
	// runtime/stateimpl) leaves it nil.
	NewPool func(b device.Backend, opt any) (any, error)
	// Pool returns the store pool behind a *state.Pool (nil for nil);
	// runtime/state sets it.
	Pool func(p any) any
	// Table wraps a store block table as a *state.BlockTable; runtime/state
	// sets it.
	Table func(t any) any
)
