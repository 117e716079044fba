package blocks

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

const (
	// SlabBlocks is how many blocks a slab holds, the cap permitting.
	SlabBlocks = 256
	// maxSlabBytes caps the size of one slab for large blocks.
	maxSlabBytes = 64 << 20
	maxInt       = int(^uint(0) >> 1)
)

// Options configures an Allocator.
type Options struct {
	// MaxBytes caps the device memory the allocator reserves; zero means
	// no cap beyond the device's.
	MaxBytes int64
	// NoMemory is the error every out-of-memory failure wraps (the store's
	// ErrNoMemory).
	NoMemory error
	// Now is the clock growths are timed by (FreeCounts); nil: time.Now.
	Now func() time.Time
}

// Allocator hands out blocks of device memory carved from slabs, in size
// classes that share the slabs. It is safe for concurrent use; its lock is
// a leaf: it calls nothing outside the package while holding it but the
// backend (and lets it go across the calls that may wait).
type Allocator struct {
	b        device.Backend
	maxBytes int64
	noMem    error
	now      func() time.Time
	// The fields above never change, and every append reads maxBytes
	// (FitsBytes): 64 bytes keep them off the line of mu, which every
	// allocation and free writes, from any goroutine.
	_ [64]byte

	mu     sync.Mutex
	closed bool
	slabs  []*slab // every class carves its blocks from every slab
	slabOf map[device.Ptr]*slab
	// loose is the bytes of the slabs' free extents: reserved, carved into
	// no block.
	loose    int64
	reserved int64
	classes  map[int]*Class
	// byBytes is a copy of classes that Class reads without mu: a
	// checkpointed decode step looks up its deltas' classes every row.
	// It is replaced, never changed, when classes is.
	byBytes atomic.Pointer[map[int]*Class]
	fences  // blocks freed while device work may use them (fence.go)
}

// New returns an allocator over b. It takes no device memory until the
// first block is needed.
func New(b device.Backend, opt Options) *Allocator {
	noMem := opt.NoMemory
	if noMem == nil {
		noMem = errors.New("out of memory")
	}
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	return &Allocator{
		b: b, maxBytes: opt.MaxBytes, noMem: noMem, now: now,
		slabOf:  make(map[device.Ptr]*slab),
		classes: make(map[int]*Class),
	}
}

// Class returns the size class of blocks of bb bytes, making it.
func (a *Allocator) Class(bb int) *Class {
	if m := a.byBytes.Load(); m != nil {
		if c := (*m)[bb]; c != nil {
			return c
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.classes[bb]
	if c == nil {
		c = newClass(bb)
		a.classes[bb] = c
		a.publishClassesLocked()
	}
	return c
}

// publishClassesLocked gives Class's lookups a copy of a.classes. a.mu
// is held.
func (a *Allocator) publishClassesLocked() {
	m := maps.Clone(a.classes)
	a.byBytes.Store(&m)
}

// TakeHot returns the block of class c freed last alone when owner freed
// it and it is still there, with reference count 1; nil otherwise. It
// takes no lock: an owner's one-block alloc and free cycle.
func (a *Allocator) TakeHot(c *Class, owner string) *Block {
	// The block is taken out of the slot before its owner is read: a
	// block in the slot may be drained and handed to another owner
	// meanwhile, who writes its owner.
	b := c.hot.Load()
	if b == nil || !c.hot.CompareAndSwap(b, nil) {
		return nil
	}
	if b.owner != owner {
		// Another owner's: back in the slot, or, when a block took the
		// slot meanwhile, on its owner's free list.
		if !c.hot.CompareAndSwap(nil, b) {
			a.mu.Lock()
			c.putDirtyLocked(b)
			c.nfree++
			c.inUse--
			a.mu.Unlock()
		}
		return nil
	}
	if want := fillUnknown << fillShift; b.flags.Load() != want { // touched, fill unknown
		b.flags.Store(want)
	}
	atomic.StoreInt32(&b.rc, 1)
	return b
}

// Alloc returns n blocks of class c for owner, appended to buf[:0], each
// with reference count 1. With zero they read as zeros; without, a block
// may hold rows the same owner wrote before. Blocks that held another
// owner's rows are always zeroed first. It takes all n or none: on failure
// every block taken goes back. It reclaims nothing: its error wraps
// Options.NoMemory when the cap or the device is full, and the caller
// decides what to give up before it tries again.
//
// Free blocks are used in this order: the owner's own (unless zero is
// asked), zeroed ones, the owner's own zeroed now, other owners' zeroed now;
// only then does the class grow (growLocked: the slabs' free extents, a new
// slab, the free blocks of other classes).
func (a *Allocator) Alloc(buf []*Block, c *Class, owner string, n int, zero bool) ([]*Block, error) {
	hand := Dirty
	if zero {
		hand = Zeroed
	}
	return a.AllocHand(buf, c, owner, n, hand)
}

// Hand says how Alloc hands its blocks out.
type Hand uint8

const (
	// Dirty blocks may hold rows the same owner wrote before; their fill
	// is unknown (Alloc with zero false).
	Dirty Hand = iota
	// Zeroed blocks read as zeros (Alloc with zero true).
	Zeroed
	// Filled blocks are Dirty ones whose fill is left as their last holder
	// set it, for a caller that sets the fill of every one (SetFill)
	// before anything else may hold it, which then writes no block whose
	// fill it keeps: a bulk append's blocks, mostly full ones of the same
	// owner again, each cost two locked instructions otherwise (the fill
	// made unknown here, then set), which wait for the stores before
	// them (docs/BENCHMARKS.md, "Serving paths").
	Filled
)

// AllocHand is Alloc, its blocks handed out as hand says.
func (a *Allocator) AllocHand(buf []*Block, c *Class, owner string, n int, hand Hand) ([]*Block, error) {
	zero := hand == Zeroed
	out := buf[:0]
	if n <= 0 {
		return out, nil
	}
	if cap(out) < n {
		out = make([]*Block, 0, n)
	}
	if zero && !c.zeroTaken.Load() {
		c.zeroTaken.Store(true)
	}
	// wipe lists the blocks taken from a dirty list, to zero before use:
	// in a buffer of the call's own for the usual few, so that taking
	// another owner's block allocates nothing.
	var wipeBuf [8]*Block
	wipe := wipeBuf[:0]
	a.mu.Lock()
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
		if growErr = a.growLocked(c, n-len(out)); growErr == nil {
			out, wipe = c.takeLocked(out, wipe, owner, n, zero)
		}
	}
	if len(out) < n && errors.Is(growErr, a.noMem) {
		// c's own free blocks, those out took included, may split the
		// free bytes of their slabs into runs too short for a block.
		c.putLocked(out)
		out, wipe = out[:0], wipe[:0]
		if a.regrowLocked(c, n) {
			growErr = nil
			out, wipe = c.takeLocked(out, wipe, owner, n, zero)
		}
	}
	if len(out) < n {
		c.putLocked(out)
		free, reserved, pending := c.nfree, a.reserved, a.pendingBytes
		a.mu.Unlock()
		if growErr != nil && !errors.Is(growErr, a.noMem) {
			return nil, growErr
		}
		if growErr == nil {
			growErr = a.noMem // other calls took what the growths made
		}
		return nil, fmt.Errorf("state: %d blocks of %d bytes wanted, %d free, %d bytes pending for streams, %d bytes reserved (%s): %w",
			n, c.bytes, free, pending, reserved, a.capString(), growErr)
	}
	c.inUse += int64(n)
	a.mu.Unlock()
	byAddress(out)
	if err := a.zero(wipe); err != nil {
		a.mu.Lock()
		c.inUse -= int64(n)
		c.putLocked(out)
		a.mu.Unlock()
		return nil, fmt.Errorf("state: zeroing a reused block: %w", err)
	}
	handOut(out, owner, hand)
	return out, nil
}

// zero zeroes the blocks of wipe, of one class, which held another
// owner's rows: one backend call for each run of neighbours, as a free
// list pops them (in address order), so that taking another owner's
// blocks costs a call a run, not a block. On failure every block goes
// back to its owner's free list, those zeroed before it too: the clean
// list holds memory no block used (Untouched), which these did.
func (a *Allocator) zero(wipe []*Block) error {
	if len(wipe) == 0 {
		return nil
	}
	byAddress(wipe)
	for i := 0; i < len(wipe); {
		j := i + 1
		for j < len(wipe) && wipe[j].Follows(wipe[j-1]) {
			j++
		}
		if err := a.b.Memset(wipe[i].ptr, 0, (j-i)*wipe[i].cls.bytes); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// handOut marks the blocks an allocation took as owner's, each with one
// reference: not zeroed, its fill unknown (kept, when hand is Filled);
// untouched when a zeroed allocation took it zeroed.
func handOut(out []*Block, owner string, hand Hand) {
	for _, b := range out {
		// Written only when they change: an atomic store is a locked
		// instruction, and a string's a write barrier while the
		// collector runs; a block mostly goes back to its last owner.
		f := b.flags.Load()
		want := fillUnknown << fillShift
		switch {
		case hand == Filled:
			want = f &^ flagBits
		case hand == Zeroed && f&zeroedFlag != 0:
			want |= untouchedFlag
		}
		if f != want {
			b.flags.Store(want)
		}
		if b.owner != owner {
			b.owner = owner
		}
		// A plain store: nothing holds a free block, and whoever reads
		// a count holds the block or the lock that keeps it from being
		// freed, so a stale read is a race the detector reports. The
		// locked store waited, per block, for a line the goroutine that
		// freed the block behind its fence last wrote: an AppendAsync of
		// 256 KiB ran 1.8x as long (docs/BENCHMARKS.md, "Serving paths").
		b.rc = 1
	}
}

// byAddress orders the blocks one allocation took by address, so that
// those that follow one another in a slab come out as runs: a caller that
// hands a column consecutive blocks copies each run in one call
// (Block.Follows). Free lists pop in address order when they were pushed
// so; blocks taken a row at a time for several columns come back
// interleaved (a key block, a value block, ...), and the sort joins each
// column's again. An allocation is mostly a few ascending stretches (one
// per free list it drew on): those are merged, in linear time; anything
// else is sorted.
func byAddress(list []*Block) {
	var cuts [9]int // where each ascending stretch ends
	n := 0
	for i := 1; i < len(list); i++ {
		if list[i].ptr >= list[i-1].ptr {
			continue
		}
		if n == len(cuts)-1 || len(list) <= 16 {
			slices.SortFunc(list, func(a, b *Block) int { return cmp.Compare(a.ptr, b.ptr) })
			return
		}
		cuts[n] = i
		n++
	}
	if n == 0 {
		return
	}
	cuts[n] = len(list)
	scratch, _ := mergeScratch.Get().(*[]*Block)
	if scratch == nil {
		scratch = new([]*Block)
	}
	tmp := slices.Grow((*scratch)[:0], len(list))
	for k := range n {
		tmp = mergeByAddress(tmp[:0], list[:cuts[k]], list[cuts[k]:cuts[k+1]])
		copy(list, tmp)
	}
	clear(tmp)
	*scratch = tmp[:0]
	mergeScratch.Put(scratch)
}

// mergeScratch holds byAddress's merge buffers between calls: an async
// bulk append's allocation merges thousands of blocks a call, and a
// buffer made each time was garbage for the collector.
var mergeScratch sync.Pool

// mergeByAddress appends to out the blocks of a and b, each in address
// order, in address order.
func mergeByAddress(out, a, b []*Block) []*Block {
	for len(a) > 0 && len(b) > 0 {
		if b[0].ptr < a[0].ptr {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	return append(append(out, a...), b...)
}

func (a *Allocator) capString() string {
	if a.maxBytes == 0 {
		return "no cap"
	}
	return fmt.Sprintf("max %d", a.maxBytes)
}

// Free gives blocks whose reference count reached zero back to the free
// lists of their classes; a block freed alone is kept hot for its owner's
// next one-block allocation (TakeHot), no lock taken. Blocks that device
// work may still use go through FreeAfter instead.
func (a *Allocator) Free(list []*Block) {
	if len(list) == 0 {
		return
	}
	if len(list) == 1 {
		if b := list[0]; b.cls.hot.CompareAndSwap(nil, b) {
			return
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	// Pushed last first, so that they pop in the order they came: a
	// stretch of one class and owner at a time, its free list looked up
	// once.
	for end := len(list); end > 0; {
		b := list[end-1]
		start := end - 1
		for start > 0 && list[start-1].cls == b.cls && list[start-1].owner == b.owner {
			start--
		}
		b.cls.putDirtyRunLocked(b.owner, list[start:end])
		b.cls.nfree += int64(end - start)
		b.cls.inUse -= int64(end - start)
		end = start
	}
}

// Stats are the allocator's figures.
type Stats struct {
	// InUseBytes and InUse are the bytes and the count of the blocks in
	// use; Free counts the free blocks (a hot one included).
	InUseBytes, InUse, Free int64
	// Reserved is the bytes of the slabs; Slabs counts them.
	Reserved int64
	Slabs    int
	// Pending is the bytes of the blocks freed behind a fence.
	Pending int64
}

// Stats returns the allocator's figures.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	var st Stats
	for _, c := range a.classes {
		n := c.inUse
		if c.hot.Load() != nil {
			n-- // free, kept for its owner (see Class.hot)
			st.Free++
		}
		st.InUseBytes += n * int64(c.bytes)
		st.InUse += n
		st.Free += c.nfree
	}
	st.Reserved, st.Slabs, st.Pending = a.reserved, len(a.slabs), a.pendingBytes
	return st
}

// Free is what a class has free, for a cost estimate (FreeCounts).
type Free struct {
	// Used counts the free blocks that held rows (the hot one counted),
	// which an allocation takes before memory new to the pool; Clean the
	// ones carved from slab space no block used (on the host backend,
	// pages not yet touched); Grow how many blocks one growth makes.
	Used, Clean, Grow int64
	// GrowTime is the median time of the class's last growths, zero
	// until it grew a few times: a moving measure of what Grow blocks
	// new to the pool cost besides their pages.
	GrowTime time.Duration
	// Next is the address of the clean block an allocation takes first
	// (Alloc pops the clean list's top, which walks memory upwards), when
	// HasNext: the cost model counts the pages the next new blocks touch
	// first from it.
	Next    device.Ptr
	HasNext bool
}

// FreeCounts returns what class c has free, in one hold of the lock.
func (a *Allocator) FreeCounts(c *Class) Free {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := Free{Clean: int64(len(c.clean)), Grow: a.growBlocks(c, 1), GrowTime: c.growTime()}
	f.Used = c.nfree - f.Clean
	if c.hot.Load() != nil {
		f.Used++
	}
	if len(c.clean) > 0 {
		f.Next, f.HasNext = c.clean[len(c.clean)-1].ptr, true
	}
	return f
}

// Clean returns the blocks on c's clean list, for tests.
func (a *Allocator) Clean(c *Class) []*Block {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*Block(nil), c.clean...)
}

// DirtyLists counts the owners c keeps a free list for, for tests.
func (a *Allocator) DirtyLists(c *Class) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(c.dirty)
}

// Check checks the allocator's books against the blocks in use (each with
// the references the caller counted to it): every class's free lists and
// counts, the slabs' free extents, and the reserved bytes. The store's
// invariant tests call it; it takes the lock, so nothing must allocate
// meanwhile.
func (a *Allocator) Check(refs map[*Block]int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	used := map[*Class]int64{}
	for b := range refs {
		if b.Zeroed() {
			return fmt.Errorf("block %#x in use is marked zeroed", b.ptr)
		}
		used[b.cls]++
	}
	var reserved int64
	for _, c := range a.classes {
		if err := c.check(refs, used[c]); err != nil {
			return err
		}
		reserved += (c.nfree + c.inUse) * int64(c.bytes)
	}
	reserved += a.loose        // the slabs' free extents
	reserved += a.pendingBytes // freed behind fences that have not returned
	if err := a.checkSlabs(); err != nil {
		return err
	}
	if reserved != a.reserved {
		return fmt.Errorf("classes hold %d bytes, %d bytes reserved", reserved, a.reserved)
	}
	return nil
}

// Trim returns every free block to its slab's extents and gives the
// wholly free slabs back to the backend; it returns the bytes given back.
func (a *Allocator) Trim(what string) (int64, error) {
	a.mu.Lock()
	a.takeBackLocked(nil)
	gone := a.dropWhollyFreeLocked()
	a.mu.Unlock()
	// Freed with the lock let go: a backend's Free may wait for work
	// queued on its streams, and other calls must not wait with it.
	return a.freeSlabs(gone, what)
}

// Close gives every slab back to the backend and forgets every block; the
// frees that come later do nothing. The caller waits for the fences first
// (WaitPending).
func (a *Allocator) Close(what string) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	slabs := a.slabs
	a.slabs, a.slabOf = nil, nil
	for bb := range a.classes {
		a.classes[bb] = newClass(bb)
	}
	a.publishClassesLocked()
	a.reserved, a.pendingBytes, a.loose = 0, 0, 0
	a.mu.Unlock()
	_, err := a.freeSlabs(slabs, what)
	return err
}
