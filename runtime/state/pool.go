package state

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

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

	mu       sync.Mutex
	slabs    []device.Ptr
	slabLen  map[device.Ptr]int64 // blocks carved from each slab
	reserved int64
	// sizeClass is the class of the pool's own block size; classes holds
	// it and the classes of the block sizes layouts chose.
	*sizeClass
	classes map[int]*sizeClass
	// rowSized: the pool was made with BlockBytes 0, and each layout's
	// block size follows its rows (see blockBytesFor).
	rowSized     bool
	pendingBytes int64                      // bytes of blocks freed but waiting for stream events
	batches      map[chan struct{}]struct{} // closed when their pending blocks are free
	staging      [][]byte                   // free page-locked staging buffers (AppendAsync)
	tables       map[*BlockTable]struct{}   // live block tables, each a backend allocation
	live         map[handle]struct{}
	nextID       uint64

	logical atomic.Int64
	history atomic.Int64 // bytes of delta blocks held by histories
	calib   calibration

	cache prefixCache // shared prefix blocks (NewSharedHead)

	evictor      Evictor
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
	own := newSizeClass(bb)
	return &Pool{
		evictor:    ev,
		slabLen:    make(map[device.Ptr]int64),
		b:          b,
		blockBytes: bb,
		maxBytes:   opt.MaxBytes,
		telemetry:  opt.Telemetry,
		sizeClass:  own,
		classes:    map[int]*sizeClass{bb: own},
		rowSized:   opt.BlockBytes == 0,
		live:       make(map[handle]struct{}),
	}, nil
}

// Backend returns the pool's backend.
func (p *Pool) Backend() device.Backend { return p.b }

// BlockBytes returns the pool's own block size: PoolOptions.BlockBytes,
// or DefaultBlockBytes for a pool whose blocks follow its layouts' rows.
func (p *Pool) BlockBytes() int { return p.blockBytes }

// Stats returns the pool's memory figures.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	var physical, blocks, free int64
	for _, c := range p.classes {
		physical += c.inUse * int64(c.bytes)
		blocks += c.inUse
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
	st.CachedBytes = p.cache.cachedBytes()
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
	defer p.mu.Unlock()
	if p.closed {
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
	for _, s := range p.slabs {
		if err := p.b.Free(s); err != nil {
			errs = append(errs, fmt.Errorf("state: pool close: %w", err))
		}
	}
	p.slabs, p.live, p.slabLen = nil, nil, nil
	p.cache.reset()
	for bb := range p.classes {
		p.classes[bb] = newSizeClass(bb)
	}
	p.sizeClass = p.classes[p.blockBytes]
	p.reserved, p.pendingBytes = 0, 0
	p.logical.Store(0)
	p.history.Store(0)
	return errors.Join(errs...)
}

// enter starts a handle call: it read-holds closeMu until the returned
// function runs, and fails when the pool is closed.
func (p *Pool) enter() (func(), error) {
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
// holds one class per block size its layouts use; every slab is carved
// into blocks of one class. Its fields are guarded by the pool's mu.
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
// only then does the pool take a new slab from the backend.
func (p *Pool) alloc(owner Owner, n int, zero bool) ([]*block, error) {
	return p.allocIn(nil, p.sizeClass, owner, n, zero)
}

// allocAppend is alloc appending to buf[:0], to spare the caller an
// allocation; the result shares buf's array when it has room.
func (p *Pool) allocAppend(buf []*block, owner Owner, n int, zero bool) ([]*block, error) {
	return p.allocIn(buf, p.sizeClass, owner, n, zero)
}

// allocIn is alloc of blocks of class c appending to buf[:0]. When the
// pool or the device is full, it reclaims (see reclaim) and tries again
// while reclaiming frees blocks, or while other calls free them (a few
// times: they may take them again first).
func (p *Pool) allocIn(buf []*block, c *sizeClass, owner Owner, n int, zero bool) ([]*block, error) {
	if n <= 0 {
		return buf[:0], nil
	}
	if err := p.fits(c, n); err != nil {
		return buf[:0], err
	}
	for raced := 0; ; {
		out, err := p.allocOnce(buf, c, owner, n, zero)
		if err == nil || !errors.Is(err, ErrNoMemory) {
			return out, err
		}
		if got, room := p.reclaim(c, n); got == 0 {
			if raced++; raced > 8 || !room {
				return out, err
			}
		}
	}
}

// allocOnce is one try of allocIn, with no reclaim.
func (p *Pool) allocOnce(buf []*block, c *sizeClass, owner Owner, n int, zero bool) ([]*block, error) {
	out := buf[:0]
	if cap(out) < n {
		out = make([]*block, 0, n)
	}
	var wipe []*block // taken from a dirty list: to zero before use
	p.mu.Lock()
	if !zero {
		out = c.takeFree(&out, owner, n)
	}
	if len(out) < n {
		k := min(len(c.clean), n-len(out))
		out = appendPopped(out, c.clean[len(c.clean)-k:])
		clear(c.clean[len(c.clean)-k:])
		c.clean = c.clean[:len(c.clean)-k]
	}
	if len(out) < n {
		before := len(out)
		out = c.takeFree(&out, owner, n)
		for o := range c.dirty {
			if len(out) == n {
				break
			}
			out = c.takeFree(&out, o, n)
		}
		wipe = out[before:]
	}
	var growErr error
	if len(out) < n {
		if growErr = p.growLocked(c, n-len(out)); growErr == nil {
			k := n - len(out)
			out = appendPopped(out, c.clean[len(c.clean)-k:])
			clear(c.clean[len(c.clean)-k:])
			c.clean = c.clean[:len(c.clean)-k]
		}
	}
	if len(out) < n {
		c.putLocked(out)
		free, reserved, pending := c.nfree, p.reserved, p.pendingBytes
		p.mu.Unlock()
		if growErr != nil && !errors.Is(growErr, ErrNoMemory) {
			return nil, growErr
		}
		return nil, fmt.Errorf("state: %d blocks of %d bytes wanted, %d free, %d bytes pending for streams, %d bytes reserved (%s): %w",
			n, c.bytes, free, pending, reserved, p.capString(), growErr)
	}
	c.nfree -= int64(n)
	c.inUse += int64(n)
	p.mu.Unlock()
	for i, b := range wipe {
		if err := p.b.Memset(b.ptr, 0, c.bytes); err != nil {
			for _, w := range wipe[:i] {
				w.zeroed = true // nobody's rows: back to the clean list
			}
			p.mu.Lock()
			c.inUse -= int64(n)
			c.nfree += int64(n)
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
func (c *sizeClass) takeFree(out *[]*block, o Owner, n int) []*block {
	fl := c.listLocked(o)
	if fl == nil {
		return *out
	}
	list := fl.blocks
	k := min(len(list), n-len(*out))
	if k <= 0 {
		return *out
	}
	*out = appendPopped(*out, list[len(list)-k:])
	clear(list[len(list)-k:])
	fl.blocks = list[:len(list)-k]
	return *out
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
	for _, b := range list {
		if b.zeroed {
			c.clean = append(c.clean, b)
		} else {
			c.putDirtyLocked(b)
		}
	}
}

// growLocked takes a new slab from the backend for at least want blocks
// of class c (up to a slab's worth, MaxBytes permitting), zeroes it
// unless the backend says fresh memory reads as zeros (device.AllocZeroer),
// and puts its blocks on the clean list. Its error wraps ErrNoMemory when
// the cap or the device is exhausted.
func (p *Pool) growLocked(c *sizeClass, want int) error {
	bb := int64(c.bytes)
	nb := max(int64(want), int64(slabBlocks))
	if nb*bb > maxSlabBytes {
		nb = max(int64(want), maxSlabBytes/bb)
	}
	if p.maxBytes > 0 {
		left := (p.maxBytes - p.reserved) / bb
		if left < int64(want) {
			return ErrNoMemory
		}
		// At most an eighth of the cap per slab, so that the first size
		// class a pool serves does not take the room of the others.
		nb = min(nb, left, max(int64(want), p.maxBytes/bb/8))
	}
	if nb*bb > int64(maxInt) {
		return ErrNoMemory
	}
	ptr, err := p.b.Alloc(int(nb * bb))
	if err != nil && nb > int64(want) && errors.Is(err, device.ErrOutOfMemory) {
		nb = int64(want) // the device may have room for less
		ptr, err = p.b.Alloc(int(nb * bb))
	}
	if err != nil {
		if errors.Is(err, device.ErrOutOfMemory) {
			return fmt.Errorf("%w: %w", ErrNoMemory, err)
		}
		return fmt.Errorf("state: taking a slab of %d bytes: %w", nb*bb, err)
	}
	if z, ok := p.b.(device.AllocZeroer); ok && z.AllocZeroes() {
		// Fresh memory reads as zeros already: touching it would only
		// fault its pages in.
	} else if err := p.b.Memset(ptr, 0, int(nb*bb)); err != nil {
		if ferr := p.b.Free(ptr); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return fmt.Errorf("state: zeroing a new slab: %w", err)
	}
	p.slabs = append(p.slabs, ptr)
	p.slabLen[ptr] = nb
	p.reserved += nb * bb
	for i := nb - 1; i >= 0; i-- {
		c.clean = append(c.clean, &block{ptr: ptr + device.Ptr(i*bb), slab: ptr, cls: c, zeroed: true})
	}
	c.nfree += nb
	return nil
}

const maxInt = int(^uint(0) >> 1)

// free gives blocks whose reference count reached zero back to the free
// lists of their classes. Blocks a recorded stream used wait as pending
// for that stream's work first (see RecordStream); free itself never waits.
func (p *Pool) free(list []*block) {
	if len(list) == 0 {
		return
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
			b.streams = nil
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
