package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/gpustate/gpustate/placement"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/evict"
	"github.com/gpustate/gpustate/runtime/state/internal/link"
)

// DefaultBlockBytes is the pool's own block size when it is made with
// BlockBytes 0 (its states' blocks then follow their rows; the pool's own
// size serves its cost model's measurements).
const DefaultBlockBytes = placement.DefaultBlockBytes

// Pool holds the device memory of the states made on it: it takes memory
// from a device.Backend in large slabs and hands out blocks of them, and it
// evicts optional state under pressure. It is safe for concurrent use.
// The generated constructors (NewTState) take a pool; Close releases it
// and every handle still live on it.
type Pool struct {
	impl poolImpl
}

// poolImpl is what the store's pool answers.
type poolImpl interface {
	Stats() PoolStats
	Close() error
	Trim() (int64, error)
	WaitPending() int64
	ForgetPrefixes(d Domain) int64
	Backend() device.Backend
}

// errNilPool answers a call on a nil pool.
var errNilPool = fmt.Errorf("state: nil pool: %w", ErrReleased)

// errNoStore answers NewPool in a program that links no state handles.
var errNoStore = errors.New("state: NewPool: no store is linked: the program imports no package of generated state handles")

func init() {
	link.Pool = func(p any) any {
		if pp, _ := p.(*Pool); pp != nil {
			return pp.impl
		}
		return nil
	}
	link.Table = func(t any) any { return &BlockTable{impl: t.(tableImpl)} }
}

// NewPool returns a pool over b. It takes no device memory until the first
// block is needed.
//
//state:acquire
func NewPool(b device.Backend, opt PoolOptions) (*Pool, error) {
	if link.NewPool == nil {
		return nil, errNoStore
	}
	impl, err := link.NewPool(b, opt)
	if err != nil {
		return nil, err
	}
	return &Pool{impl: impl.(poolImpl)}, nil
}

// Stats returns the pool's memory figures; a nil pool's are zero.
func (p *Pool) Stats() PoolStats {
	if p == nil {
		return PoolStats{}
	}
	return p.impl.Stats()
}

// Close waits for the work queued on the streams recorded on its blocks
// (RecordStream), then gives every slab back to the backend (the backend
// itself stays open: it is the caller's). Handles still live are released
// with it: their later calls answer ErrReleased, and the error returned
// names each of them by type and owner. Closing a closed pool does nothing.
//
//state:release
func (p *Pool) Close() error {
	if p == nil {
		return errNilPool
	}
	return p.impl.Close()
}

// Trim gives the slabs whose blocks are all free back to the device and
// returns the bytes it gave back. After every handle is released, Trim
// leaves ReservedBytes at zero, unless shared prefix blocks are cached:
// those are in use, kept for later states to adopt (PoolStats.CachedBytes),
// until memory pressure evicts them or ForgetPrefixes drops them. A closed
// pool holds nothing to trim.
func (p *Pool) Trim() (int64, error) {
	if p == nil {
		return 0, errNilPool
	}
	return p.impl.Trim()
}

// WaitPending waits until the blocks pending now (released while a
// recorded stream's work could still use them) are free, and returns how
// many bytes were pending when it was called. Close waits the same way;
// releases never do.
func (p *Pool) WaitPending() int64 {
	if p == nil {
		return 0
	}
	return p.impl.WaitPending()
}

// ForgetPrefixes takes out of the prefix cache every block of domain d
// (of every state type), as a tenant that leaves would: blocks no state
// holds go back to the pool, and blocks states hold stay theirs but can no
// longer be adopted. It returns the bytes given back to the pool.
func (p *Pool) ForgetPrefixes(d Domain) int64 {
	if p == nil {
		return 0
	}
	return p.impl.ForgetPrefixes(d)
}

// Backend returns the pool's backend; nil for a nil pool.
func (p *Pool) Backend() device.Backend {
	if p == nil {
		return nil
	}
	return p.impl.Backend()
}

// PoolOptions configures a Pool; zero fields take defaults.
type PoolOptions struct {
	// BlockBytes is the size of one block, rounded up to a multiple of 256,
	// for every column of every state type without a `//state:block rows=N` directive; a row of every
	// such column must fit a block. Zero lets each layout's blocks follow
	// its rows: about 1 KiB of rows per block, at
	// least one row, per column.
	BlockBytes int
	// MaxBytes caps the device memory the pool takes (its reserved bytes);
	// zero means no cap beyond the device's.
	MaxBytes int64
	// Telemetry, when set, reads the device's memory as the driver's own
	// tools see it, for Stats to show beside the pool's accounting: on the
	// CUDA backend, an NVML monitor (package runtime/device/nvml).
	Telemetry func() (DeviceMemory, error)
	// Evictor ranks the optional states to evict under memory pressure;
	// nil means least recently used first (package runtime/evict/lru).
	Evictor Evictor
	// PendingWait bounds how long an allocation that finds no room waits
	// for the work of recorded streams (RecordStream) that holds blocks
	// back, before it evicts and while it does (victims whose work outlasts
	// it are spared). Zero means one second, a negative value never waits.
	PendingWait time.Duration
	// HostTier is the bytes of host memory the pool may move optional
	// state to instead of evicting it (docs/GUIDE.md, "The host tier");
	// its next use brings it back with the same rows and version. Zero,
	// the default, turns the tier off.
	HostTier int64
}

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
	// the bytes eviction dropped (a move to the host tier counts once the
	// tier drops it), and those rebuilding reconstructable state took.
	EvictedBytes, RebuiltBytes int64
	// Evictions counts the evictions since the pool was made: heads,
	// snapshots and cached prefix blocks the Evictor's ranking dropped
	// (a move to the host tier is none).
	Evictions int64
	// TierBytes is the bytes the host tier holds; TierOut, TierIn and
	// TierDropped the bytes moved to it, back from it, and dropped from it
	// to make room, totals since the pool was made.
	TierBytes, TierOut, TierIn, TierDropped int64
	// AdoptCalls counts the AdoptPrefix calls that looked a prefix up
	// (those that failed aside), AdoptHits those that adopted rows, and
	// AdoptedRows the rows they adopted: totals since the pool was made.
	AdoptCalls, AdoptHits, AdoptedRows int64
	// CachedBytes is the part of PhysicalBytes that shared prefix blocks
	// no state holds take: kept for states to adopt, evicted first under
	// memory pressure.
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

// Evictor ranks the optional states a pool may evict; see package
// runtime/evict. PoolOptions.Evictor nil means least recently used first
// (package runtime/evict/lru).
type Evictor = evict.Evictor

// Victim is a state an Evictor ranks.
type Victim = evict.Victim
