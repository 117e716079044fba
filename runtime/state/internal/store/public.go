package store

import (
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/evict"
	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/internal/link"
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

// Bytes is state.Bytes, for the store's tests and callers.
func Bytes[T any](s []T) []byte { return state.Bytes(s) }

// Rows is state.Rows.
func Rows[T any](b []byte) []T { return state.Rows[T](b) }

func init() {
	link.NewPool = func(b device.Backend, opt any) (any, error) {
		p, err := NewPool(b, opt.(PoolOptions))
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// PoolOf returns the store pool behind p; nil for a nil p.
func PoolOf(p *state.Pool) *Pool {
	impl, _ := link.Pool(p).(*Pool)
	return impl
}

// PublicTable returns t as runtime/state's BlockTable; nil for a nil t.
func PublicTable(t *BlockTable) *state.BlockTable {
	if t == nil {
		return nil
	}
	return link.Table(t).(*state.BlockTable)
}
