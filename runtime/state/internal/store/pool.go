package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/evict/lru"
	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// defaultPendingWait is PoolOptions.PendingWait's default.
const defaultPendingWait = time.Second

// Pool hands out fixed-size blocks of device memory carved from slabs. It
// is safe for concurrent use.
type Pool struct {
	b          device.Backend
	blockBytes int
	telemetry  func() (DeviceMemory, error)

	// closeMu is read-held by every handle call and write-held by Close,
	// so that Close never frees memory a call is using.
	closeMu sync.RWMutex
	closed  bool // written under closeMu and mu

	// mem is the block allocator: size classes, slabs, free lists and
	// fences. own is the class of the pool's own block size.
	mem *blocks.Allocator
	own *sizeClass
	// rowSized: the pool was made with BlockBytes 0, and each layout's
	// block size follows its rows (see blockBytesFor).
	rowSized bool

	rec recorded // the streams recorded on blocks (stream.go)
	// freedLists holds the lists releases gather freed blocks in
	// (takeFreed): a released state frees all its blocks at once, and a
	// list grown afresh for each was most of what a serving loop that
	// renews its states allocated.
	freedLists sync.Pool
	// spares holds released heads' write buffers for new heads
	// (write_bufs.go).
	spares spareBufs

	mu      sync.Mutex            // guards what follows
	staging [][]byte              // free page-locked staging buffers (AppendAsync)
	busy    []stagingUse          // staging buffers queued copies may still read (async.go)
	tables  map[releaser]struct{} // live block tables, each a backend allocation
	// tableMem is the memory of tables moved or released, kept for the
	// next ones (tableAlloc).
	tableMem []tableMem
	live     map[handle]struct{}

	logical atomic.Int64
	history atomic.Int64 // bytes of delta blocks held by histories
	calib   calibration

	tier   *hostTier    // the host tier (tier.go); nil without PoolOptions.HostTier
	tierPx tierPrefixes // cached prefix blocks in the host tier (share.go)
	cache  prefixCache  // shared prefix blocks (NewSharedHead)
	groups groupCache   // registered group states (NewSharedGroup)

	evictor      Evictor
	pendingWait  time.Duration // PoolOptions.PendingWait, defaulted
	clock        atomic.Uint64 // counts handle calls, for the Evictor
	evictedBytes atomic.Int64
	rebuiltBytes atomic.Int64
	// evictions, adoptCalls, adoptHits and adoptedRows are the totals of
	// PoolStats's fields of those names.
	evictions, adoptCalls, adoptHits, adoptedRows atomic.Int64
}

// tableMem is a backend allocation a block table's column held: its
// address and bytes (blocktable.go).
type tableMem struct {
	ptr   device.Ptr
	bytes int
}

// releaser is a live block table, as the pool knows it: Close releases
// the tables still live (blocktable.go).
type releaser interface{ Release() error }

// handle is what the pool knows of a live head or snapshot.
type handle interface {
	describe() string
	logicalBytes() int64
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
		blockBytes:  bb,
		telemetry:   opt.Telemetry,
		rowSized:    opt.BlockBytes == 0,
		live:        make(map[handle]struct{}),
	}
	// Growths are timed by calibration's clock: the cost model prices
	// them by those times once there are a few (estimate.go).
	p.mem = blocks.New(b, blocks.Options{MaxBytes: opt.MaxBytes, NoMemory: ErrNoMemory, Now: p.calibNow})
	p.own = p.mem.Class(bb)
	if opt.HostTier > 0 {
		p.tier = newHostTier(b, opt.HostTier)
	}
	return p, nil
}

// Backend returns the pool's backend.
func (p *Pool) Backend() device.Backend {
	if p == nil {
		return nil
	}
	return p.b
}

// enter starts a handle call: it read-holds closeMu until leave, and
// fails when the pool is closed. A nil error must be followed by leave.
func (p *Pool) enter() error {
	if p == nil {
		return errNilPool
	}
	p.closeMu.RLock()
	if p.closed {
		p.closeMu.RUnlock()
		return fmt.Errorf("state: pool closed: %w", ErrReleased)
	}
	return nil
}

// leave ends a call enter began.
func (p *Pool) leave() { p.closeMu.RUnlock() }

// isClosed reports whether p was closed: a handle of a closed pool reports
// no rows and no bytes, as a released one does.
func (p *Pool) isClosed() bool {
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	return p.closed
}

// register adds h to the live handles.
func (p *Pool) register(h handle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live[h] = struct{}{}
	p.logical.Add(h.logicalBytes())
}

// unregister removes h from the live handles.
func (p *Pool) unregister(h handle, logical int64) {
	p.mu.Lock()
	delete(p.live, h)
	p.mu.Unlock()
	p.logical.Add(-logical)
}

// WaitPending waits until the blocks pending now (released while a
// recorded stream's work could still use them) are free, and returns how
// many bytes were pending when it was called. Close waits the same way;
// releases never do.
func (p *Pool) WaitPending() int64 {
	if p == nil {
		return 0
	}
	return p.mem.WaitPending()
}

// evictable is a live handle, or a cached prefix block, the pool may
// evict.
type evictable interface {
	// victim describes the handle for ranking; false when it may not be
	// evicted now (mandatory, released, evicted already).
	victim(r Retention) (Victim, bool)
	// evict drops the blocks the handle may give up and returns the bytes
	// of those that reached no reference; false when it could not be evicted now (busy
	// with a call, or it would free nothing).
	evict() (int64, bool)
}

// touch marks a use of a handle for the Evictor. A handle whose mark is
// the clock's last tick is the most recently used already: a serving
// loop's calls on one head take no locked instruction here.
func (p *Pool) touch(at *atomic.Uint64) {
	if now := p.clock.Load(); now != 0 && at.Load() == now {
		return
	}
	at.Store(p.clock.Add(1))
}

// stagingUse is a staging buffer the copies queued on st before ev read.
type stagingUse struct {
	buf []byte
	st  device.Stream
	ev  device.Event
}

// adopted counts one AdoptPrefix call that looked a prefix up, of a head
// or of a group, and the rows it adopted (0: a miss): PoolStats's
// AdoptCalls, AdoptHits and AdoptedRows.
func (p *Pool) adopted(rows int) {
	p.adoptCalls.Add(1)
	if rows > 0 {
		p.adoptHits.Add(1)
		p.adoptedRows.Add(int64(rows))
	}
}
