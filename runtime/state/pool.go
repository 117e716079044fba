package state

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpustate/gpustate/placement"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/evict"
	"github.com/gpustate/gpustate/runtime/evict/lru"
	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// Default pool geometry.
const (
	// DefaultBlockBytes is the pool's own block size when it is made with
	// BlockBytes 0 (its layouts' blocks then follow their rows; the pool's
	// own size serves its calibration).
	DefaultBlockBytes = placement.DefaultBlockBytes
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
	// before it evicts anything; and, when it evicts, for the work queued
	// on the streams recorded on its victims' blocks (victims whose work
	// outlasts the wait are spared) and for the blocks eviction itself
	// freed behind a fence. Zero means one second, a negative value never
	// waits.
	PendingWait time.Duration
	// HostTier is the bytes of host memory the pool may keep optional
	// state in when device memory is short (docs/GUIDE.md, "The host
	// tier"): where the pool would evict an optional head, snapshot or
	// group, it moves it there, and its next use brings it back with the
	// same rows and version. Zero, the default, turns the tier off.
	HostTier int64
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
	// BlockBytes is the pool's own block size: PoolOptions.BlockBytes, or
	// DefaultBlockBytes for a pool whose blocks follow its layouts' rows.
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
	// the bytes of the blocks eviction dropped (from device memory, or
	// from the host tier: state moved to the tier is not counted until
	// the tier drops it), and of the blocks rebuilding reconstructable
	// state took.
	EvictedBytes, RebuiltBytes int64
	// Evictions counts the evictions since the pool was made: heads,
	// snapshots and cached prefix blocks the Evictor's ranking dropped
	// (a move to the host tier is none).
	Evictions int64
	// TierBytes is the bytes of state blocks the host tier holds
	// (PoolOptions.HostTier), counted as PhysicalBytes counts device
	// blocks. TierOut and TierIn are the bytes moved to the tier and back,
	// TierDropped the bytes the tier dropped to make room: totals since
	// the pool was made.
	TierBytes, TierOut, TierIn, TierDropped int64
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

// Evictor ranks the optional states a pool may evict; see package
// runtime/evict. PoolOptions.Evictor nil means least recently used first
// (package runtime/evict/lru).
type Evictor = evict.Evictor

// Victim is a state an Evictor ranks.
type Victim = evict.Victim

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
