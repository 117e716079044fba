package state

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
)

// The host tier (docs/INTERNALS.md, "The host tier"): a second store, in
// host memory, that optional state moves to where the pool would evict it,
// and comes back from on its next use. Its memory is slabs of host memory
// (page-locked from the backend's HostAlloc where it has one, else the Go
// heap), carved into extents by first fit; an extent keeps the owner whose
// bytes it last held, and is zeroed when it is handed to another owner.

// tierSlabBytes is the most one slab of the tier takes: the tier grows a
// slab at a time up to PoolOptions.HostTier.
const tierSlabBytes = 64 << 20

// tierAlign is the granule of the tier's extents.
const tierAlign = 256

// tierMixed tags a free extent whose bytes several owners left: it is
// zeroed for whoever takes it. The empty tag is clean memory.
const tierMixed = "\x00"

// hostTier is the pool's host tier. Its lock is the last of the pool's:
// it is never held while a handle's lock is taken.
type hostTier struct {
	max  int64
	host device.Streams // the backend's page-locked memory, nil: the Go heap

	mu    sync.Mutex
	slabs []*tierSlab
	held  int64 // bytes of the slabs
	used  int64 // bytes of the extents handed out
	// owned is the bytes handed out per owner (checkTier).
	owned map[string]int64

	// landing is the images copied back whose copies may still run, in
	// the order they were queued (tier_stream.go); landingBytes their
	// bytes, which used counts until they are given back.
	landing      []tierLanding
	landingBytes int64

	// smu guards the tier's stream: st, made on first use, and the
	// streams retired after a failure, closed with the tier.
	smu  sync.Mutex
	st   device.Stream
	dead []device.Stream

	// out, in and dropped are PoolStats's TierOut, TierIn and TierDropped.
	out, in, dropped atomic.Int64
}

// tierSlab is one host allocation of the tier and its free extents, by
// offset, neighbours merged.
type tierSlab struct {
	mem    []byte
	pinned bool // from host.HostAlloc: given back with HostFree
	free   []tierExtent
}

// tierExtent is a range of a slab: free, tagged with the owner whose bytes
// it holds ("" clean, tierMixed several), or handed out.
type tierExtent struct {
	off, n int
	owner  string
}

// tierSpan is a range of a slab handed out to an image.
type tierSpan struct {
	slab   *tierSlab
	off, n int
}

func (s tierSpan) bytes() []byte { return s.slab.mem[s.off : s.off+s.n] }

// tierImage is a state's version in the tier: what its root was, block by
// block, and where the blocks' bytes lie. The tree itself is not kept:
// bringing back makes it again from the image (bringBack).
type tierImage struct {
	owner Owner
	rows  int
	cols  []tierCol
	spans []tierSpan // the blocks' bytes, column after column, in block order
	bytes int64
}

// tierCol is one column of an image: the tree held blocks [lo, n).
type tierCol struct{ lo, n int }

func newHostTier(b device.Backend, max int64) *hostTier {
	t := &hostTier{max: max, owned: map[string]int64{}}
	if sb, ok := b.(device.Streams); ok {
		t.host = sb
	}
	return t
}

// alloc hands out n bytes (a multiple of tierAlign) for owner, in one or
// more spans, growing a slab when the free extents fall short; false when
// the tier has no room. Bytes another owner left are zeroed first.
func (t *hostTier) alloc(n int64, owner Owner) ([]tierSpan, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.landing) > 0 {
		t.reapLocked(false)
	}
	var free int64
	for _, s := range t.slabs {
		for _, e := range s.free {
			free += int64(e.n)
		}
	}
	for free < n && t.held < t.max {
		size := min(t.max-t.held, tierSlabBytes) &^ (tierAlign - 1)
		if size <= 0 {
			break
		}
		s, err := t.newSlab(int(size))
		if err != nil {
			break
		}
		t.slabs = append(t.slabs, s)
		t.held += size
		free += size
	}
	if free < n {
		return nil, false
	}
	var out []tierSpan
	left := int(n)
	for _, s := range t.slabs {
		for left > 0 && len(s.free) > 0 {
			e := &s.free[0]
			k := min(e.n, left)
			sp := tierSpan{slab: s, off: e.off, n: k}
			if e.owner != "" && e.owner != string(owner) {
				clear(sp.bytes()) // isolation: another owner's bytes never reach this one
			}
			out = append(out, sp)
			left -= k
			if e.n == k {
				s.free = s.free[1:]
			} else {
				e.off += k
				e.n -= k
			}
		}
		if left == 0 {
			break
		}
	}
	t.used += n
	t.owned[string(owner)] += n
	return out, true
}

// tierLanding is an image copied back whose copies may still run: its
// memory is the tier's again once ev completed.
type tierLanding struct {
	img *tierImage
	st  device.Stream
	ev  device.Event
}

// stream returns the tier's stream, made on first use; nil where the
// backend has no streams or makes none (the copies are synchronous then).
func (t *hostTier) stream() device.Stream {
	if t.host == nil {
		return nil
	}
	t.smu.Lock()
	defer t.smu.Unlock()
	if t.st == nil {
		st, err := t.host.NewStream()
		if err != nil {
			return nil
		}
		t.st = st
	}
	return t.st
}

// streamFor returns the tier's stream for copies of img, nil where they
// are synchronous: without streams, or where img lies in memory that is
// not page-locked (an async copy must not read the Go heap).
func (t *hostTier) streamFor(img *tierImage) device.Stream {
	for _, sp := range img.spans {
		if !sp.slab.pinned {
			return nil
		}
	}
	return t.stream()
}

// broken retires st after its work failed (a stream keeps its first
// failure): later copies take a new stream, and st is closed with the
// tier.
func (t *hostTier) broken(st device.Stream) {
	t.smu.Lock()
	defer t.smu.Unlock()
	if t.st == st {
		t.st = nil
		t.dead = append(t.dead, st)
	}
}

// await waits until the work queued on st so far has completed, and
// answers its failure; a failed stream is retired.
func (t *hostTier) await(st device.Stream) error {
	var err error
	if ev, rerr := t.host.Record(st); rerr == nil {
		err = ev.Wait()
		ev.Close()
	} else {
		err = errors.Join(rerr, st.Sync())
	}
	if err != nil {
		t.broken(st)
	}
	return err
}

// land keeps img's memory until ev completed.
func (t *hostTier) land(img *tierImage, st device.Stream, ev device.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.landing = append(t.landing, tierLanding{img: img, st: st, ev: ev})
	t.landingBytes += img.bytes
}

// reapLocked gives back the memory of the images whose copies back have
// completed, polling their events without waiting: one stream runs them
// in order, so the first not done ends the poll. t.mu is held.
func (t *hostTier) reapLocked(wait bool) {
	n := 0
	for _, l := range t.landing {
		var err error
		if wait {
			err = l.ev.Wait()
		} else if done, derr := l.ev.Done(); !done { // a failed copy is over too
			break
		} else {
			err = derr
		}
		if err != nil {
			t.broken(l.st)
		}
		l.ev.Close()
		t.landingBytes -= l.img.bytes
		t.freeLocked(l.img)
		n++
	}
	t.landing = append(t.landing[:0], t.landing[n:]...)
	clear(t.landing[len(t.landing):cap(t.landing)])
}

// drain waits for every copy back, and gives their images' memory back:
// Pool.Close calls it before device memory goes.
func (t *hostTier) drain() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reapLocked(true)
}

// closeStreams closes the tier's streams.
func (t *hostTier) closeStreams() error {
	t.smu.Lock()
	defer t.smu.Unlock()
	var errs []error
	if t.st != nil {
		errs = append(errs, t.st.Close())
	}
	for _, st := range t.dead {
		errs = append(errs, st.Close())
	}
	t.st, t.dead = nil, nil
	return errors.Join(errs...)
}

// newSlab takes size bytes of host memory: page-locked where the backend
// has it, so that copies to and from the device run at the bus's rate.
func (t *hostTier) newSlab(size int) (*tierSlab, error) {
	s := &tierSlab{free: []tierExtent{{off: 0, n: size}}}
	if t.host != nil {
		if mem, err := t.host.HostAlloc(size); err == nil {
			// Page-locked memory may hold anything: zeroed as it is
			// handed out, as another owner's bytes are.
			s.mem, s.pinned = mem, true
			s.free[0].owner = tierMixed
			return s, nil
		}
	}
	s.mem = make([]byte, size)
	return s, nil
}

// free gives an image's spans back, tagged with its owner.
func (t *hostTier) free(img *tierImage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.freeLocked(img)
}

// freeLocked is free with t.mu held.
func (t *hostTier) freeLocked(img *tierImage) {
	for _, sp := range img.spans {
		sp.slab.put(tierExtent{off: sp.off, n: sp.n, owner: string(img.owner)})
	}
	img.spans = nil
	t.used -= img.bytes
	if t.owned[string(img.owner)] -= img.bytes; t.owned[string(img.owner)] == 0 {
		delete(t.owned, string(img.owner))
	}
}

// put returns e to s's free extents, merged with its neighbours (the tag of
// a merge of two owners' bytes is tierMixed).
func (s *tierSlab) put(e tierExtent) {
	i, _ := slices.BinarySearchFunc(s.free, e.off, func(x tierExtent, off int) int { return x.off - off })
	s.free = slices.Insert(s.free, i, e)
	merge := func(a, b tierExtent) tierExtent {
		switch {
		case a.owner == b.owner || b.owner == "":
		case a.owner == "":
			a.owner = b.owner
		default:
			a.owner = tierMixed
		}
		a.n += b.n
		return a
	}
	if i+1 < len(s.free) && s.free[i].off+s.free[i].n == s.free[i+1].off {
		s.free[i] = merge(s.free[i], s.free[i+1])
		s.free = slices.Delete(s.free, i+1, i+2)
	}
	if i > 0 && s.free[i-1].off+s.free[i-1].n == s.free[i].off {
		s.free[i-1] = merge(s.free[i-1], s.free[i])
		s.free = slices.Delete(s.free, i, i+1)
	}
}

// close gives every slab back; the tier holds nothing after.
func (t *hostTier) close() error {
	t.drain()
	errs := []error{t.closeStreams()}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.slabs {
		if s.pinned {
			if err := t.host.HostFree(s.mem); err != nil {
				errs = append(errs, fmt.Errorf("state: pool close: host tier: %w", err))
			}
		}
	}
	t.slabs, t.held, t.used = nil, 0, 0
	clear(t.owned)
	return errors.Join(errs...)
}

// usedBytes returns the bytes of the images the tier holds.
func (t *hostTier) usedBytes() int64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.used - t.landingBytes
}

// check checks the tier's accounting: its extents, free and handed out,
// tile its slabs, and the bytes handed out are the sum of owned. want is the
// bytes of the images the live handles hold.
func (t *hostTier) check(want int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var free, sum int64
	for _, s := range t.slabs {
		end := 0
		for _, e := range s.free {
			if e.off < end || e.n <= 0 || e.off+e.n > len(s.mem) {
				return fmt.Errorf("host tier: free extent [%d, %d) overlaps or leaves its slab of %d", e.off, e.off+e.n, len(s.mem))
			}
			end = e.off + e.n
			free += int64(e.n)
		}
	}
	for _, n := range t.owned {
		sum += n
	}
	switch {
	case free+t.used != t.held:
		return fmt.Errorf("host tier: %d bytes free and %d used in slabs of %d", free, t.used, t.held)
	case sum != t.used:
		return fmt.Errorf("host tier: owners hold %d bytes, the tier counts %d", sum, t.used)
	case t.used != want+t.landingBytes:
		return fmt.Errorf("host tier: live handles' images hold %d bytes and %d are landing, the tier counts %d", want, t.landingBytes, t.used)
	case t.held > t.max:
		return fmt.Errorf("host tier: %d bytes of slabs over its %d", t.held, t.max)
	}
	return nil
}

// wholly reports whether r and every node and block under it are held by
// r's holder alone, and lists the blocks, column after column, in block
// order: the victims the tier takes (a block a snapshot, a branch, a
// history or a cache holds too stays in device memory).
func wholly(r *root, out []*block) ([]*block, bool) {
	if r == nil || r.rc.Load() != 1 {
		return out, false
	}
	for _, t := range r.cols {
		if t.root == nil {
			continue
		}
		var ok bool
		if out, ok = whollyNode(t.root, out); !ok {
			return out, false
		}
	}
	return out, true
}

func whollyNode(n *node, out []*block) ([]*block, bool) {
	if n.rc.Load() != 1 {
		return out, false
	}
	for _, k := range n.kids {
		if k != nil {
			var ok bool
			if out, ok = whollyNode(k, out); !ok {
				return out, false
			}
		}
	}
	for _, b := range n.blks {
		if b != nil {
			if b.Refs() != 1 {
				return out, false
			}
			out = append(out, b)
		}
	}
	return out, true
}

// tierPrefixes is the host tier's part of the prefix cache: the cached
// blocks the pool moved there instead of dropping them, one record per
// entry, found by its table and the keys of its whole chain from the
// first block (so that a record is never taken for another chain's, whatever
// the hashes). Its lock comes after the cache's.
type tierPrefixes struct {
	mu sync.Mutex
	m  map[tableKey]map[string]*tierPrefix
}

// tierPrefix is one cached entry in the tier: its blocks, one per column,
// the owner they keep and the pool's use clock when it moved.
type tierPrefix struct {
	tk    tableKey
	chain string // the key column's bytes of every block of the chain, this one last
	key   int    // the key column
	owner Owner
	used  uint64
	img   *tierImage
}

// add records x.
func (tp *tierPrefixes) add(x *tierPrefix) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.m == nil {
		tp.m = map[tableKey]map[string]*tierPrefix{}
	}
	byChain := tp.m[x.tk]
	if byChain == nil {
		byChain = map[string]*tierPrefix{}
		tp.m[x.tk] = byChain
	}
	byChain[x.chain] = x
}

// take removes and returns the record of chain in tk's table, if any.
func (tp *tierPrefixes) take(tk tableKey, chain []byte) *tierPrefix {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	byChain := tp.m[tk]
	x := byChain[string(chain)]
	if x != nil {
		tp.removeLocked(x)
	}
	return x
}

// has reports whether tk's table has records in the tier.
func (tp *tierPrefixes) has(tk tableKey) bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.m[tk]) > 0
}

// removeLocked removes x. tp.mu is held.
func (tp *tierPrefixes) removeLocked(x *tierPrefix) bool {
	byChain := tp.m[x.tk]
	if byChain[x.chain] != x {
		return false
	}
	delete(byChain, x.chain)
	if len(byChain) == 0 {
		delete(tp.m, x.tk)
	}
	return true
}

// list returns every record.
func (tp *tierPrefixes) list() []*tierPrefix {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []*tierPrefix
	for _, byChain := range tp.m {
		for _, x := range byChain {
			out = append(out, x)
		}
	}
	return out
}

// forget removes the records of domain d (every one when all) and returns
// them.
func (tp *tierPrefixes) forget(d Domain, all bool) []*tierPrefix {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []*tierPrefix
	for tk, byChain := range tp.m {
		if !all && tk.d != d {
			continue
		}
		for _, x := range byChain {
			out = append(out, x)
		}
		delete(tp.m, tk)
	}
	return out
}
