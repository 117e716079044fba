package store

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// defaultPendingWait is PoolOptions.PendingWait's default.
const defaultPendingWait = time.Second

// Pool hands out fixed-size blocks of device memory carved from slabs. It
// is safe for concurrent use.
type Pool struct {
	b          device.Backend
	blockSizes // the block sizes of layouts' columns (blocksize.go)
	// shapes keeps the shapes of the layouts the pool has seen, by the
	// caller's layout (cachedShape, shape.go): a *shape each.
	shapes struct {
		sync.Mutex
		m map[*Layout]any
	}
	telemetry func() (DeviceMemory, error)

	// closed is set by Close, under the gate and mu; read under either,
	// or alone where a call asks only whether the pool is closed
	// (isClosed). Every call reads it: it lies among fields no call
	// writes.
	closed atomic.Bool
	// gate is held by every handle call, in shards, and shut by Close,
	// so that Close never frees memory a call is using (gate.go).
	gate gate

	allocator // blocks, free lists and reclaim (alloc.go)

	rec recorded // the streams recorded on blocks (stream.go)
	// spares holds released heads' write buffers for new heads
	// (write_bufs.go), a stock for each shard of the gate.
	spares spareStocks

	staging staging    // page-locked staging buffers (AppendAsync; async.go)
	tables  poolTables // live block tables and their kept memory (blocktable.go)

	mu sync.Mutex // guards Close's work
	// live lists the live heads and snapshots, in the gate's shards: a
	// snapshot a draft takes and releases joins and leaves its head's
	// shard's list, which no other goroutine's sessions write but by
	// chance, with no allocation.
	live [gateShards]liveShard

	// steps keeps step records released histories left, for new ones, a
	// stock for each shard of the gate.
	steps   [gateShards]stepStock
	deltaSt deltaStream // the stream of delta copies after work on several streams (checkpoint.go)
	calib   calibration

	tier   *hostTier    // the host tier (tier.go); nil without PoolOptions.HostTier
	tierPx tierPrefixes // cached prefix blocks in the host tier (share.go)
	cache  prefixCache  // shared prefix blocks (NewSharedHead)
	groups groupCache   // registered group states (NewSharedGroup)

	evictor     Evictor
	pendingWait time.Duration // PoolOptions.PendingWait, defaulted
	// clock counts handle calls, for the Evictor: a call on another
	// handle than the last one writes it, from any goroutine, so that it
	// has a cache line of its own.
	_            [64]byte
	clock        atomic.Uint64
	_            [56]byte
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

// Backend returns the pool's backend.
func (p *Pool) Backend() device.Backend {
	if p == nil {
		return nil
	}
	return p.b
}

// enter starts a pool call that belongs to no handle (NewHead, Trim): it
// read-holds the gate's shard 0 until leave, and fails when the pool is
// closed. A nil error must be followed by leave.
func (p *Pool) enter() error { return p.enterAt(0) }

// leave ends a call enter began.
func (p *Pool) leave() { p.gate.runlock(0) }

// enterAt starts a call of a handle of the gate's shard k: it read-holds
// the shard until leaveAt(k), and fails when the pool is closed.
func (p *Pool) enterAt(k uint8) error {
	if p == nil {
		return errNilPool
	}
	p.gate.rlock(k)
	if p.closed.Load() {
		p.gate.runlock(k)
		return fmt.Errorf("state: pool closed: %w", ErrReleased)
	}
	return nil
}

// leaveAt ends a call enterAt(k) began.
func (p *Pool) leaveAt(k uint8) { p.gate.runlock(k) }

// addLogical adds d to the pool's logical bytes, in the gate's shard k.
func (p *Pool) addLogical(k uint8, d int64) { p.gate.add(k, d) }

// isClosed reports whether p was closed: a handle of a closed pool reports
// no rows and no bytes, as a released one does. It takes no lock: a call
// that asks it while Close runs sees the pool open or closed, as it would
// had it run before or after, and reads nothing Close frees.
func (p *Pool) isClosed() bool {
	return p.closed.Load()
}

// liveShard lists the live heads and snapshots of one shard of the gate,
// on cache lines of its own (gateShard), through links in the handles
// themselves.
type liveShard struct {
	_    [64]byte
	mu   sync.Mutex
	list members[liveLink]
	n    int
}

// liveLink is a live handle's place in its shard's list.
type liveLink struct {
	member[liveLink]
	h handle // the handle whose link it is
}

func liveOf(l *liveLink) *member[liveLink] { return &l.member }

// initLive readies the shards' lists of live handles, for makePool.
func (p *Pool) initLive() {
	for i := range p.live {
		p.live[i].list.link = liveOf
	}
}

// register adds h to the live handles, through l, its place in the
// list of k, its shard of the gate, and its logical bytes to the pool's.
//
// The bytes count before the handle is listed: an eviction that lists it
// may evict it at once, dropping its bytes from the pool's.
func (p *Pool) register(h handle, k uint8, l *liveLink) {
	p.addLogical(k, h.logicalBytes())
	s := &p.live[k]
	s.mu.Lock()
	l.h = h
	s.list.add(l)
	s.n++
	s.mu.Unlock()
}

// unregister removes the handle listed at l, of shard k, from the live
// handles, and logical bytes from the pool's.
func (p *Pool) unregister(k uint8, l *liveLink, logical int64) {
	s := &p.live[k]
	s.mu.Lock()
	s.unlist(l)
	s.mu.Unlock()
	p.addLogical(k, -logical)
}

// unlist takes l out of s, if it is listed. s.mu is held.
func (s *liveShard) unlist(l *liveLink) {
	if l.in {
		s.list.remove(l)
		l.h = nil
		s.n--
	}
}

// liveHandles returns the live heads and snapshots, shard by shard.
func (p *Pool) liveHandles() []handle {
	var hs []handle
	for i := range p.live {
		s := &p.live[i]
		s.mu.Lock()
		hs = slices.Grow(hs, s.n)
		for l := s.list.first; l != nil; l = l.next {
			hs = append(hs, l.h)
		}
		s.mu.Unlock()
	}
	return hs
}

// liveCount returns how many heads and snapshots are live.
func (p *Pool) liveCount() int {
	n := 0
	for i := range p.live {
		s := &p.live[i]
		s.mu.Lock()
		n += s.n
		s.mu.Unlock()
	}
	return n
}

// forgetLive empties the lists of live handles, for Close: the handles
// stay live to their holders, whose calls answer ErrReleased.
func (p *Pool) forgetLive() {
	for i := range p.live {
		s := &p.live[i]
		s.mu.Lock()
		for s.list.first != nil {
			s.unlist(s.list.first)
		}
		s.mu.Unlock()
	}
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

type calibration struct {
	mu      sync.Mutex
	done    bool
	model   CostModel          // of the pool's own size class
	classes map[int]*CostModel // of other size classes (bytes), measured on first use
	fits    map[int]*fit       // the model against measured reconstructions, per size class (bytes)
	now     func() time.Time   // the clock of calibration; nil: time.Now
}

// calibNow reads the calibration's clock.
func (p *Pool) calibNow() time.Time {
	if f := p.calib.now; f != nil {
		return f()
	}
	return time.Now()
}

// CostModel is what a pool measured of its backend, to estimate
// reconstruction costs (docs/GUIDE.md, "The cost model"): a
// device-to-device copy of n bytes costs CopyFixed + n*CopyPerByte, a block
// taken (copied on write or added) costs Block besides its copy, applying
// one column of one delta costs PerDelta besides its copies, and every
// reconstruction Fixed. Those figures are of one size class, BlockBytes
// (a pool measures each class its states' largest blocks are of, on first
// use). Copies between the host and the device cost HtoD and DtoH, and
// memory the pool takes new (never touched before: on the host backend the
// first touch of its pages) NewPerByte. The figures are measured on the
// retained history of the head first planned, as it lies then (a past
// version not read lately finds it cold), and on free blocks of the pool
// (calibrate.go).
type CostModel struct {
	CopyFixed   time.Duration
	CopyPerByte float64 // nanoseconds per byte
	Block       time.Duration
	PerDelta    time.Duration
	Fixed       time.Duration
	// Node is the cost of copying one node of a state's block tree on the
	// path to a block taken (path copying takes a reference to each of
	// its children).
	Node time.Duration
	// CopyAlone is the fixed cost of a copy that no copy just before it
	// prepared: the first after the CPU's caches were emptied, whose
	// source, destination and the backend's records of them are all cold,
	// as a reconstruction's seed copy from a block far from the one it
	// copied last is. Copies in a row, each from the block after the
	// last, cost CopyFixed.
	CopyAlone time.Duration
	// BlockBytes is the size class the figures above were measured on.
	BlockBytes int
	// HtoD and DtoH are copies from and to the host.
	HtoD, DtoH Transfer
	// NewPerByte is the cost of a byte of memory new to the pool, in
	// nanoseconds (its first touch), and NewGrowth that of one growth of
	// the pool (a backend allocation and the records of the blocks it
	// makes); NewKnown says they were measured: only a calibration that
	// found clean blocks enough (memory new to the pool) measures them.
	NewPerByte float64
	NewGrowth  time.Duration
	NewKnown   bool
	// NewReadPerByte is the cost of the first read of a byte of memory
	// the pool carved but nothing wrote (a mutable state's rows still
	// zero): on the host backend, pages the kernel maps on that read.
	NewReadPerByte float64
}

// Transfer is the cost of one direction of copy: Fixed + n*PerByte for n
// bytes.
type Transfer struct {
	Fixed   time.Duration
	PerByte float64 // nanoseconds per byte
}
