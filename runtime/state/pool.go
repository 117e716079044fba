package state

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpustate/gpustate/placement"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/evict/lru"
	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// Default pool geometry.
const (
	// DefaultBlockBytes is the pool's own block size when it is made with
	// BlockBytes 0 (its layouts' blocks then follow their rows; the pool's
	// own size serves its calibration).
	DefaultBlockBytes = placement.DefaultBlockBytes
	// blockAlign aligns block sizes, so that every row of every element
	// type starts at an address aligned for it when rows pack a block.
	blockAlign = 256
)

// PoolOptions configures a Pool; zero fields take defaults.
type PoolOptions struct {
	// BlockBytes is the size of one block, rounded up to a multiple of 256,
	// for every column of every layout without BlockRows; a row of every
	// such column must fit a block. Zero lets each layout's blocks follow
	// its rows (see Layout.BlockRows): about 1 KiB of rows per block, at
	// least one row, per column.
	BlockBytes int
	// MaxBytes caps the device memory the pool takes (its reserved bytes);
	// zero means no cap beyond the device's.
	MaxBytes int64
	// Telemetry, when set, reads the device's memory as the driver's own
	// tools see it, for Stats to show beside the pool's accounting: on the
	// CUDA backend, a reading of an NVML monitor (package
	// runtime/device/nvml, which needs cgo and so is not linked here).
	Telemetry func() (DeviceMemory, error)
	// Evictor ranks the optional states to evict under memory pressure;
	// nil means least recently used first (package runtime/evict/lru).
	Evictor Evictor
	// PendingWait bounds how long an allocation that finds no room waits
	// for pending blocks (released while a recorded stream's work may
	// still use them, see RecordStream) when they would make it succeed,
	// before it evicts anything: zero means one second, a negative value
	// never waits.
	PendingWait time.Duration
}

// defaultPendingWait is PoolOptions.PendingWait's default.
const defaultPendingWait = time.Second

// DeviceMemory is one reading of a device's memory from outside the
// store, in bytes: the device's total, used and free memory, and what this
// process holds on it.
type DeviceMemory struct {
	Total, Used, Free, Process uint64
}

// PoolStats describes a pool's memory. LogicalBytes and PhysicalBytes are
// kept by the store as it runs, never derived from one another.
type PoolStats struct {
	// LogicalBytes sums the sizes of the live heads and snapshots: what
	// they would take with no sharing.
	LogicalBytes int64
	// PhysicalBytes is the bytes of the blocks in use: shared blocks count
	// once.
	PhysicalBytes int64
	// ReservedBytes is the device memory the pool holds, in use or free.
	ReservedBytes int64
	// Live counts the live heads and snapshots.
	Live int
	// BlockBytes is the pool's block size.
	BlockBytes int
	// Blocks and FreeBlocks count the blocks in use and the blocks carved
	// from slabs and free.
	Blocks, FreeBlocks int64
	// Slabs counts the backend allocations the pool holds.
	Slabs int
	// PendingBytes is the bytes of the blocks released while work queued on
	// a recorded stream may still use them (RecordStream): neither in use
	// nor free, until that work's events complete.
	PendingBytes int64
	// HistoryBytes is the part of PhysicalBytes that holds the deltas of
	// checkpointed heads (checkpoints share their blocks with versions and
	// count as those do).
	HistoryBytes int64
	// EvictedBytes and RebuiltBytes are totals since the pool was made:
	// the bytes of the blocks eviction freed, and of the blocks rebuilding
	// reconstructable state took.
	EvictedBytes, RebuiltBytes int64
	// Evictions counts the evictions since the pool was made: heads,
	// snapshots and cached prefix blocks the Evictor's ranking took.
	Evictions int64
	// AdoptCalls counts the AdoptPrefix calls that looked a prefix up
	// (those that failed aside), AdoptHits those that adopted rows, and
	// AdoptedRows the rows they adopted: totals since the pool was made.
	AdoptCalls, AdoptHits, AdoptedRows int64
	// CachedBytes is the part of PhysicalBytes that shared prefix blocks
	// no head holds take (Pool.NewSharedHead): kept for heads to adopt,
	// and evicted first-class with optional state under memory pressure.
	CachedBytes int64
	// Device holds the backend's own figures; nil when it cannot give them.
	Device *DeviceStats
}

// DeviceStats are the backend's own figures, as evidence beside the pool's.
type DeviceStats struct {
	// Backend names the backend; Free and Total are its MemInfo.
	Backend     string
	Free, Total uint64
	// Telemetry is the reading of PoolOptions.Telemetry; nil without one,
	// or when it failed.
	Telemetry *DeviceMemory
}

// block and sizeClass are the allocator's (package internal/blocks).
type (
	block     = blocks.Block
	sizeClass = blocks.Class
)

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

	mu      sync.Mutex               // guards what follows
	staging [][]byte                 // free page-locked staging buffers (AppendAsync)
	busy    []stagingUse             // staging buffers queued copies may still read (async.go)
	tables  map[*BlockTable]struct{} // live block tables, each a backend allocation
	live    map[handle]struct{}
	nextID  uint64

	logical atomic.Int64
	history atomic.Int64 // bytes of delta blocks held by histories
	calib   calibration

	cache  prefixCache // shared prefix blocks (NewSharedHead)
	groups groupCache  // registered group states (NewSharedGroup)

	evictor      Evictor
	pendingWait  time.Duration // PoolOptions.PendingWait, defaulted
	clock        atomic.Uint64 // counts handle calls, for the Evictor
	evictedBytes atomic.Int64
	rebuiltBytes atomic.Int64
	// evictions, adoptCalls, adoptHits and adoptedRows are the totals of
	// PoolStats's fields of those names.
	evictions, adoptCalls, adoptHits, adoptedRows atomic.Int64
}

// handle is what the pool knows of a live head or snapshot.
type handle interface {
	describe() string
	logicalBytes() int64
}

// NewPool returns a pool over b. It takes no device memory until the first
// block is needed.
//
//state:acquire
func NewPool(b device.Backend, opt PoolOptions) (*Pool, error) {
	if b == nil {
		return nil, errors.New("state: NewPool with a nil backend")
	}
	if opt.BlockBytes < 0 || opt.MaxBytes < 0 {
		return nil, fmt.Errorf("state: NewPool with block bytes %d and max bytes %d: neither may be negative", opt.BlockBytes, opt.MaxBytes)
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
	mem := blocks.New(b, blocks.Options{MaxBytes: opt.MaxBytes, NoMemory: ErrNoMemory})
	return &Pool{
		evictor:     ev,
		pendingWait: wait,
		b:           b,
		blockBytes:  bb,
		telemetry:   opt.Telemetry,
		mem:         mem,
		own:         mem.Class(bb),
		rowSized:    opt.BlockBytes == 0,
		live:        make(map[handle]struct{}),
	}, nil
}

// Backend returns the pool's backend.
func (p *Pool) Backend() device.Backend {
	if p == nil {
		return nil
	}
	return p.b
}

// BlockBytes returns the pool's own block size: PoolOptions.BlockBytes,
// or DefaultBlockBytes for a pool whose blocks follow its layouts' rows.
func (p *Pool) BlockBytes() int {
	if p == nil {
		return 0
	}
	return p.blockBytes
}

// Stats returns the pool's memory figures.
func (p *Pool) Stats() PoolStats {
	if p == nil {
		return PoolStats{}
	}
	ms := p.mem.Stats()
	p.mu.Lock()
	st := PoolStats{
		LogicalBytes:  p.logical.Load(),
		PhysicalBytes: ms.InUseBytes,
		ReservedBytes: ms.Reserved,
		Live:          len(p.live),
		BlockBytes:    p.blockBytes,
		Blocks:        ms.InUse,
		FreeBlocks:    ms.Free,
		Slabs:         ms.Slabs,
		HistoryBytes:  p.history.Load(),
		EvictedBytes:  p.evictedBytes.Load(),
		RebuiltBytes:  p.rebuiltBytes.Load(),
		Evictions:     p.evictions.Load(),
		AdoptCalls:    p.adoptCalls.Load(),
		AdoptHits:     p.adoptHits.Load(),
		AdoptedRows:   p.adoptedRows.Load(),
		PendingBytes:  ms.Pending,
	}
	closed := p.closed
	p.mu.Unlock()
	st.CachedBytes = p.cache.cachedBytes() + p.groups.cachedBytes()
	if !closed {
		if free, total, err := p.b.MemInfo(); err == nil {
			st.Device = &DeviceStats{Backend: p.b.Name(), Free: free, Total: total}
			if p.telemetry != nil {
				if m, err := p.telemetry(); err == nil {
					st.Device.Telemetry = &m
				}
			}
		}
	}
	return st
}

// Close waits for the stream events of pending blocks (RecordStream), then
// gives every slab back to the backend (the backend itself stays open: it
// is the caller's). Handles still live are released with it: their
// later calls answer ErrReleased, and the error returned names each of them
// by type and owner. Closing a closed pool does nothing.
//
//state:release
func (p *Pool) Close() error {
	if p == nil {
		return errNilPool
	}
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	p.WaitPending() // no handle call runs, so no block turns pending now
	var errs []error
	if !p.closed {
		if err := p.releaseLiveTables(); err != nil {
			errs = append(errs, fmt.Errorf("state: pool close: %w", err))
		}
		p.WaitPending() // tables whose streams were recorded
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if len(p.live) > 0 {
		names := make([]string, 0, len(p.live))
		for h := range p.live {
			names = append(names, h.describe())
		}
		sort.Strings(names)
		errs = append(errs, fmt.Errorf("state: pool closed with %d live handles: %s", len(names), strings.Join(names, "; ")))
	}
	if err := p.freeStagingLocked(); err != nil {
		errs = append(errs, fmt.Errorf("state: pool close: %w", err))
	}
	p.live = nil
	p.cache.reset()
	p.groups.reset()
	p.forgetRecorded()
	p.mu.Unlock()
	if err := p.mem.Close("pool close"); err != nil {
		errs = append(errs, err)
	}
	p.logical.Store(0)
	p.history.Store(0)
	return errors.Join(errs...)
}

// enter starts a handle call: it read-holds closeMu until the returned
// function runs, and fails when the pool is closed.
func (p *Pool) enter() (func(), error) {
	if p == nil {
		return nil, errNilPool
	}
	p.closeMu.RLock()
	if p.closed {
		p.closeMu.RUnlock()
		return nil, fmt.Errorf("state: pool closed: %w", ErrReleased)
	}
	return p.closeMu.RUnlock, nil
}

// register adds h to the live handles.
func (p *Pool) register(h handle) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	p.live[h] = struct{}{}
	p.logical.Add(h.logicalBytes())
	return p.nextID
}

// unregister removes h from the live handles.
func (p *Pool) unregister(h handle, logical int64) {
	p.mu.Lock()
	delete(p.live, h)
	p.mu.Unlock()
	p.logical.Add(-logical)
}

// alloc returns n blocks of the pool's own size for owner, each with
// reference count 1 (see blocks.Allocator.Alloc for which free blocks it
// takes), reclaiming when the pool is full.
func (p *Pool) alloc(owner Owner, n int, zero bool) ([]*block, error) {
	return p.allocIn(nil, p.own, owner, n, zero)
}

// allocIn is alloc of blocks of class c appending to buf[:0]. When the
// pool or the device is full, it reclaims (see reclaim) and tries again
// while reclaiming makes room (a few times: other calls may take it
// first).
func (p *Pool) allocIn(buf []*block, c *sizeClass, owner Owner, n int, zero bool) ([]*block, error) {
	if n <= 0 {
		return buf[:0], nil
	}
	if n == 1 && !zero {
		// The owner's block freed last, if it is still hot: no lock.
		if b := p.mem.TakeHot(c, string(owner)); b != nil {
			return append(buf[:0], b), nil
		}
	}
	if err := p.mem.Fits(c, n); err != nil {
		return buf[:0], err
	}
	for tries := 0; ; tries++ {
		out, err := p.mem.Alloc(buf, c, string(owner), n, zero)
		if err == nil || !errors.Is(err, ErrNoMemory) || tries == maxAllocTries {
			return out, err
		}
		if !p.reclaim(c, n, errors.Is(err, device.ErrOutOfMemory)) {
			return out, err
		}
	}
}

const maxInt = int(^uint(0) >> 1)

// maxAllocTries bounds the reclaims of one allocation: each one made room,
// but other calls may take it first.
const maxAllocTries = 8

// allocOnce is one try of allocIn, with no reclaim: it answers
// ErrNoMemory rather than wait for pending blocks or evict anything.
// Calibration allocates through it, so that measuring never takes another
// state's memory.
func (p *Pool) allocOnce(buf []*block, c *sizeClass, owner Owner, n int, zero bool) ([]*block, error) {
	return p.mem.Alloc(buf, c, string(owner), n, zero)
}

// free gives blocks whose reference count reached zero back to the
// allocator. Blocks a recorded stream used wait behind a fence for that
// stream's work first (see RecordStream); free itself never waits.
func (p *Pool) free(list []*block) {
	if len(list) == 0 {
		return
	}
	list = p.fenceRecorded(list)
	p.mem.Free(list)
}
