package store

import (
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/internal/link"
)

// The store's side of the link to runtime/state: NewPool for state.NewPool,
// and the conversions stateimpl makes for generated code.

func init() {
	link.NewPool = func(b device.Backend, opt any) (any, error) {
		p, err := makePool(b, opt.(PoolOptions))
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
