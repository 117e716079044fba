package store

import (
	"errors"
	"fmt"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/evict/lru"
	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
	"github.com/gpustate/gpustate/runtime/state/internal/link"
)

// The store's side of the link to runtime/state (NewPool for state.NewPool,
// and the conversions stateimpl makes for generated code), and the pool's
// constructor, which joins the parts: the top of the store's files.

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

// makePool returns a pool over b. It takes no device memory until the first
// block is needed.
//
//state:acquire
func makePool(b device.Backend, opt PoolOptions) (*Pool, error) {
	if b == nil {
		return nil, errors.New("state: NewPool with a nil backend")
	}
	if opt.BlockBytes < 0 || opt.MaxBytes < 0 {
		return nil, fmt.Errorf("state: NewPool with block bytes %d and max bytes %d: neither may be negative", opt.BlockBytes, opt.MaxBytes)
	}
	if opt.HostTier < 0 {
		return nil, fmt.Errorf("state: NewPool with host tier %d: it may not be negative", opt.HostTier)
	}
	bb := opt.BlockBytes
	if bb == 0 {
		bb = DefaultBlockBytes
	}
	if bb > maxBlockBytes {
		return nil, fmt.Errorf("state: NewPool with block bytes %d: at most 1 GiB", bb)
	}
	bb = (bb + blockAlign - 1) &^ (blockAlign - 1)
	if opt.MaxBytes != 0 && opt.MaxBytes < int64(bb) {
		return nil, fmt.Errorf("state: NewPool with max bytes %d below one block of %d bytes", opt.MaxBytes, bb)
	}
	ev := opt.Evictor
	if ev == nil {
		ev = lru.New()
	}
	wait := opt.PendingWait
	if wait == 0 {
		wait = defaultPendingWait
	}
	p := &Pool{
		evictor:     ev,
		pendingWait: wait,
		b:           b,
		blockSizes:  blockSizes{blockBytes: bb, rowSized: opt.BlockBytes == 0},
		telemetry:   opt.Telemetry,
	}
	p.initLive()
	p.room = eviction{p} // evict.go
	p.be, p.fences = b, &p.rec
	// Growths are timed by calibration's clock: the cost model prices
	// them by those times once there are a few (estimate.go).
	p.mem = blocks.New(b, blocks.Options{MaxBytes: opt.MaxBytes, NoMemory: ErrNoMemory, Now: p.calibNow})
	p.own = p.mem.Class(bb)
	if opt.HostTier > 0 {
		p.tier = newHostTier(b, &p.rec, opt.HostTier)
	}
	return p, nil
}
