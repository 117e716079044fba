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
	// slabBlocks is how many blocks a slab holds, MaxBytes permitting.
	slabBlocks = 256
	// maxSlabBytes caps the size of one slab for large blocks.
	maxSlabBytes = 64 << 20
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

// block is one fixed-size block of device memory. Its reference count
// counts the tree leaves that hold it; owner is the owner whose rows it
// holds (or last held, when free). zeroed says the block reads as zeros
// and holds nobody's rows: a block fresh from a slab or zeroed since its
// owner gave it back. It is the only mark of a clean block: no owner, the
// empty one included, stands for "zeroed".
type block struct {
	ptr    device.Ptr
	slab   device.Ptr // the allocation the block was carved from
	rc     atomic.Int32
	owner  Owner
	zeroed bool // reads as zeros; only free blocks on the clean list
	delta  bool // holds a delta of a history
	cls    *sizeClass
	// streams are the device streams whose work may use the block
	// (RecordStream); guarded by the pool's mu, cleared when it is freed.
	streams []device.Stream
	// cache is the prefix cache that holds a reference to the block, nil
	// when none; counted says the block is in its count of the bytes only
	// it holds (guarded by its mu).
	cache   atomic.Pointer[prefixCache]
	counted bool
}

// Pool hands out fixed-size blocks of device memory carved from slabs. It
// is safe for concurrent use.
type Pool struct {
	b          device.Backend
	blockBytes int
	maxBytes   int64
	telemetry  func() (DeviceMemory, error)

	// closeMu is read-held by every handle call and write-held by Close,
	// so that Close never frees memory a call is using.
	closeMu sync.RWMutex
	closed  bool // written under closeMu and mu

	mu     sync.Mutex
	slabs  []*slab // every class carves its blocks from every slab
	slabOf map[device.Ptr]*slab
	// loose is the bytes of the slabs' free extents: reserved, carved into
	// no block.
	loose    int64
	reserved int64
	// own is the class of the pool's own block size; classes holds it and
	// the classes of the block sizes layouts chose.
	own     *sizeClass
	classes map[int]*sizeClass
	// rowSized: the pool was made with BlockBytes 0, and each layout's
	// block size follows its rows (see blockBytesFor).
	rowSized     bool
	pendingBytes int64                      // bytes of blocks freed but waiting for stream events
	batches      map[chan struct{}]struct{} // closed when their pending blocks are free
	staging      [][]byte                   // free page-locked staging buffers (AppendAsync)
	stagingBusy  []stagingUse               // staging buffers queued copies may still read (async.go)
	tables       map[*BlockTable]struct{}   // live block tables, each a backend allocation
	live         map[handle]struct{}
	nextID       uint64

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
	own := newSizeClass(bb)
	return &Pool{
		evictor:     ev,
		pendingWait: wait,
		slabOf:      make(map[device.Ptr]*slab),
		b:           b,
		blockBytes:  bb,
		maxBytes:    opt.MaxBytes,
		telemetry:   opt.Telemetry,
		own:         own,
		classes:     map[int]*sizeClass{bb: own},
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
	p.mu.Lock()
	var physical, blocks, free int64
	for _, c := range p.classes {
		n := c.inUse
		if c.hot.Load() != nil {
			n-- // free, kept for its owner (see sizeClass.hot)
			free++
		}
		physical += n * int64(c.bytes)
		blocks += n
		free += c.nfree
	}
	st := PoolStats{
		LogicalBytes:  p.logical.Load(),
		PhysicalBytes: physical,
		ReservedBytes: p.reserved,
		Live:          len(p.live),
		BlockBytes:    p.blockBytes,
		Blocks:        blocks,
		FreeBlocks:    free,
		Slabs:         len(p.slabs),
		HistoryBytes:  p.history.Load(),
		EvictedBytes:  p.evictedBytes.Load(),
		RebuiltBytes:  p.rebuiltBytes.Load(),
		Evictions:     p.evictions.Load(),
		AdoptCalls:    p.adoptCalls.Load(),
		AdoptHits:     p.adoptHits.Load(),
		AdoptedRows:   p.adoptedRows.Load(),
		PendingBytes:  p.pendingBytes,
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
	slabs := p.slabs
	p.slabs, p.live, p.slabOf = nil, nil, nil
	p.cache.reset()
	p.groups.reset()
	for bb := range p.classes {
		p.classes[bb] = newSizeClass(bb)
	}
	p.own = p.classes[p.blockBytes]
	p.reserved, p.pendingBytes, p.loose = 0, 0, 0
	p.mu.Unlock()
	if _, err := p.freeSlabs(slabs, "pool close"); err != nil {
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

// sizeClass is the blocks of one size: its free lists and counts. A pool
// holds one class per block size its layouts use; every class carves its
// blocks from the pool's shared slabs (slab.go). Its fields are guarded by
// the pool's mu.
type sizeClass struct {
	bytes   int
	clean   []*block            // zeroed blocks (block.zeroed)
	dirty   map[Owner]*freeList // free blocks not zeroed, by the owner whose rows they held
	sweepAt int                 // the size of dirty at which empty lists are swept
	// lastOwner's free list is lastList: the last one looked up.
	lastOwner Owner
	lastList  *freeList
	nfree     int64
	inUse     int64
	// hot is the last block freed alone, kept for its owner's next
	// one-block allocation: both take no lock (free, allocIn). It counts
	// in inUse until a locked path drains it to a free list (drainHot).
	hot atomic.Pointer[block]
}

// drainHotLocked puts c's hot block, if any, on its owner's free list, so
// that locked paths see every free block. p.mu is held.
func (c *sizeClass) drainHotLocked() {
	if c.hot.Load() == nil {
		return
	}
	if b := c.hot.Swap(nil); b != nil {
		c.putDirtyLocked(b)
		c.nfree++
		c.inUse--
	}
}

func newSizeClass(bytes int) *sizeClass {
	return &sizeClass{bytes: bytes, dirty: make(map[Owner]*freeList)}
}

// class returns the size class of blocks of bb bytes, making it.
func (p *Pool) class(bb int) *sizeClass {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.classes[bb]
	if c == nil {
		c = newSizeClass(bb)
		p.classes[bb] = c
	}
	return c
}

// alloc returns n blocks of the pool's own size for owner, each with
// reference count 1. With zero they read as zeros; without, a block may
// hold rows the same owner wrote before. Blocks that held another owner's
// rows are always zeroed first. It takes all n or none: on failure every
// block taken goes back.
//
// Free blocks are used in this order: the owner's own (unless zero is
// asked), zeroed ones, the owner's own zeroed now, other owners' zeroed now;
// only then does the class grow (growLocked: the slabs' free extents, a new
// slab, the free blocks of other classes).
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
		if b := c.hot.Load(); b != nil && b.owner == owner && c.hot.CompareAndSwap(b, nil) {
			b.rc.Store(1)
			return append(buf[:0], b), nil
		}
	}
	if err := p.fits(c, n); err != nil {
		return buf[:0], err
	}
	for tries := 0; ; tries++ {
		out, err := p.allocOnce(buf, c, owner, n, zero)
		if err == nil || !errors.Is(err, ErrNoMemory) || tries == maxAllocTries {
			return out, err
		}
		if !p.reclaim(c, n, errors.Is(err, device.ErrOutOfMemory)) {
			return out, err
		}
	}
}

// maxAllocTries bounds the reclaims of one allocation: each one made room,
// but other calls may take it first.
const maxAllocTries = 8

// allocNoReclaim is alloc with no reclaim: it answers ErrNoMemory rather
// than wait for pending blocks or evict anything. Calibration allocates
// through it, so that measuring never takes another state's memory.
func (p *Pool) allocNoReclaim(owner Owner, n int, zero bool) ([]*block, error) {
	if n <= 0 {
		return nil, nil
	}
	if err := p.fits(p.own, n); err != nil {
		return nil, err
	}
	return p.allocOnce(nil, p.own, owner, n, zero)
}

// allocOnce is one try of allocIn, with no reclaim: it takes free blocks,
// and grows the class (growLocked) when they are too few.
func (p *Pool) allocOnce(buf []*block, c *sizeClass, owner Owner, n int, zero bool) ([]*block, error) {
	out := buf[:0]
	if cap(out) < n {
		out = make([]*block, 0, n)
	}
	var wipe []*block // taken from a dirty list: to zero before use
	p.mu.Lock()
	c.drainHotLocked()
	if !zero {
		out = c.takeFree(out, owner, n) // the owner's own: the common case
		c.nfree -= int64(len(out))
	}
	if len(out) < n {
		out, wipe = c.takeLocked(out, wipe, owner, n, zero)
	}
	var growErr error
	for grows := 0; len(out) < n && growErr == nil && grows < 3; grows++ {
		if growErr = p.growLocked(c, n-len(out)); growErr == nil {
			out, wipe = c.takeLocked(out, wipe, owner, n, zero)
		}
	}
	if len(out) < n {
		c.putLocked(out)
		free, reserved, pending := c.nfree, p.reserved, p.pendingBytes
		p.mu.Unlock()
		if growErr != nil && !errors.Is(growErr, ErrNoMemory) {
			return nil, growErr
		}
		if growErr == nil {
			growErr = ErrNoMemory // other calls took what the growths made
		}
		return nil, fmt.Errorf("state: %d blocks of %d bytes wanted, %d free, %d bytes pending for streams, %d bytes reserved (%s): %w",
			n, c.bytes, free, pending, reserved, p.capString(), growErr)
	}
	c.inUse += int64(n)
	p.mu.Unlock()
	for i, b := range wipe {
		if err := p.b.Memset(b.ptr, 0, c.bytes); err != nil {
			for _, w := range wipe[:i] {
				w.zeroed = true // nobody's rows: back to the clean list
			}
			p.mu.Lock()
			c.inUse -= int64(n)
			c.putLocked(out)
			p.mu.Unlock()
			return nil, fmt.Errorf("state: zeroing a reused block: %w", err)
		}
	}
	for _, b := range out {
		b.owner, b.zeroed = owner, false
		b.rc.Store(1)
	}
	return out, nil
}

// takeLocked moves free blocks of c to out, up to n in all, in the order
// alloc documents, and appends to wipe those that must be zeroed before
// use. p.mu is held.
func (c *sizeClass) takeLocked(out, wipe []*block, owner Owner, n int, zero bool) ([]*block, []*block) {
	before := len(out)
	if !zero {
		out = c.takeFree(out, owner, n)
	}
	if len(out) < n {
		k := min(len(c.clean), n-len(out))
		out = appendPopped(out, c.clean[len(c.clean)-k:])
		clear(c.clean[len(c.clean)-k:])
		c.clean = c.clean[:len(c.clean)-k]
	}
	if len(out) < n {
		dirty := len(out)
		out = c.takeFree(out, owner, n)
		for o := range c.dirty {
			if len(out) == n {
				break
			}
			out = c.takeFree(out, o, n)
		}
		wipe = append(wipe, out[dirty:]...)
	}
	c.nfree -= int64(len(out) - before)
	return out, wipe
}

// freeList holds the free blocks one owner's rows were in. Empty lists
// stay in the class's map, so that an owner's alloc and free cycle costs
// no map insertions; they are swept when they outnumber the others.
type freeList struct{ blocks []*block }

// listLocked returns owner o's free list, nil when it has none. The last
// list looked up is remembered: an owner's blocks go and come back in
// turns.
func (c *sizeClass) listLocked(o Owner) *freeList {
	if c.lastList != nil && c.lastOwner == o {
		return c.lastList
	}
	fl := c.dirty[o]
	if fl != nil {
		c.lastOwner, c.lastList = o, fl
	}
	return fl
}

// fits fails with ErrNoMemory, before anything is taken, when n blocks
// of class c are more than the pool could ever hold.
func (p *Pool) fits(c *sizeClass, n int) error {
	bb := int64(c.bytes)
	if int64(n) > int64(maxInt)/bb {
		return fmt.Errorf("state: %d blocks of %d bytes: %w", n, bb, ErrNoMemory)
	}
	return p.fitsBytes(int64(n) * bb)
}

// fitsBytes fails with ErrNoMemory when want bytes are more than the pool
// could ever hold: past MaxBytes or, with no cap and over 64 MiB, past the
// device's total memory.
func (p *Pool) fitsBytes(want int64) error {
	if want < 0 {
		return fmt.Errorf("state: more bytes than an int64 holds: %w", ErrNoMemory)
	}
	if p.maxBytes > 0 {
		if want > p.maxBytes {
			return fmt.Errorf("state: %d bytes wanted, the pool's cap is %d: %w", want, p.maxBytes, ErrNoMemory)
		}
		return nil
	}
	if want > 64<<20 {
		if _, total, err := p.b.MemInfo(); err == nil && uint64(want) > total {
			return fmt.Errorf("state: %d bytes wanted, the device has %d: %w", want, total, ErrNoMemory)
		}
	}
	return nil
}

// takeFree moves free blocks of owner o from its free list to out, up to
// n in all.
func (c *sizeClass) takeFree(out []*block, o Owner, n int) []*block {
	fl := c.listLocked(o)
	if fl == nil {
		return out
	}
	list := fl.blocks
	k := min(len(list), n-len(out))
	if k <= 0 {
		return out
	}
	out = appendPopped(out, list[len(list)-k:])
	clear(list[len(list)-k:])
	fl.blocks = list[:len(list)-k]
	return out
}

// appendPopped appends the top of a free list to out in the order a stack
// pops it: the last element first. Free lists are pushed so that this
// order walks memory upwards, which lets neighbouring blocks be copied in
// one call.
func appendPopped(out, top []*block) []*block {
	for i := len(top) - 1; i >= 0; i-- {
		out = append(out, top[i])
	}
	return out
}

// putDirtyLocked puts b on the free list of the owner whose rows it holds.
func (c *sizeClass) putDirtyLocked(b *block) {
	fl := c.listLocked(b.owner)
	if fl == nil {
		if len(c.dirty) >= c.sweepAt {
			c.sweepLocked()
		}
		fl = &freeList{}
		c.dirty[b.owner] = fl
	}
	fl.blocks = append(fl.blocks, b)
}

// sweepLocked forgets the empty free lists, so that the map grows with
// the owners that have free blocks, not with every owner ever seen. It runs
// when the map has doubled since the last sweep: O(1) per list, amortized.
func (c *sizeClass) sweepLocked() {
	for o, fl := range c.dirty {
		if len(fl.blocks) == 0 {
			delete(c.dirty, o)
		}
	}
	c.lastOwner, c.lastList = "", nil
	c.sweepAt = max(64, 2*len(c.dirty))
}

func (p *Pool) capString() string {
	if p.maxBytes == 0 {
		return "no cap"
	}
	return fmt.Sprintf("max %d", p.maxBytes)
}

// putLocked returns blocks that alloc took but did not hand out: zeroed
// ones to the clean list, the others to the free list of the owner whose
// rows they hold.
func (c *sizeClass) putLocked(list []*block) {
	c.nfree += int64(len(list))
	for _, b := range list {
		if b.zeroed {
			c.clean = append(c.clean, b)
		} else {
			c.putDirtyLocked(b)
		}
	}
}

const maxInt = int(^uint(0) >> 1)

// free gives blocks whose reference count reached zero back to the free
// lists of their classes. Blocks a recorded stream used wait as pending
// for that stream's work first (see RecordStream); free itself never waits.
func (p *Pool) free(list []*block) {
	if len(list) == 0 {
		return
	}
	if len(list) == 1 {
		// Kept hot for its owner's next one-block allocation, no lock
		// taken; a block with history or stream work goes the long way.
		if b := list[0]; !b.delta && len(b.streams) == 0 && b.cls.hot.CompareAndSwap(nil, b) {
			return
		}
	}
	var fenced []*block
	var streams []device.Stream
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	// Pushed last first, so that they pop in the order they came.
	for i := len(list) - 1; i >= 0; i-- {
		b := list[i]
		if b.delta {
			b.delta = false
			p.history.Add(-int64(b.cls.bytes))
		}
		if len(b.streams) > 0 {
			for _, st := range b.streams {
				if !hasStream(streams, st) {
					streams = append(streams, st)
				}
			}
			clear(b.streams)
			b.streams = b.streams[:0] // its next recording reuses the array
			fenced = append(fenced, b)
			p.pendingBytes += int64(b.cls.bytes)
			b.cls.inUse--
			continue
		}
		b.cls.putDirtyLocked(b)
		b.cls.nfree++
		b.cls.inUse--
	}
	var done chan struct{}
	if len(fenced) > 0 {
		done = p.addBatchLocked()
	}
	p.mu.Unlock()
	if len(fenced) > 0 {
		wait := p.fence(streams)
		go func() {
			wait()
			p.unfence(fenced, done)
		}()
	}
}

// follows reports whether b lies right after a in the same allocation, so
// that one copy may span both: neighbouring addresses in two allocations
// are not one range to a backend.
func (b *block) follows(a *block, blockBytes int) bool {
	return b.slab == a.slab && b.ptr == a.ptr+device.Ptr(blockBytes)
}
