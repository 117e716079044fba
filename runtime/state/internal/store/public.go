package store

import (
	"github.com/gpustate/gpustate/runtime/evict"
	"github.com/gpustate/gpustate/runtime/state"
)

// The values users see are runtime/state's: the store names them here.
type (
	Owner        = state.Owner
	Version      = state.Version
	Domain       = state.Domain
	Stats        = state.Stats
	Plan         = state.Plan
	Candidate    = state.Candidate
	TableColumn  = state.TableColumn
	PoolOptions  = state.PoolOptions
	PoolStats    = state.PoolStats
	DeviceMemory = state.DeviceMemory
	DeviceStats  = state.DeviceStats
	Evictor      = evict.Evictor
	Victim       = evict.Victim
)

// DefaultBlockBytes is runtime/state's.
const DefaultBlockBytes = state.DefaultBlockBytes
