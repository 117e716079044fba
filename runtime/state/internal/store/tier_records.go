package store

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// The host tier (docs/INTERNALS.md, "The host tier"): a second store, in
// host memory, that optional state moves to where the pool would evict it,
// and comes back from on its next use. Its memory is blocks of the block
// allocator (internal/blocks) over host memory (tierMem: page-locked from
// the backend's HostAlloc where it has one, else the Go heap), one host
// block per device block, of the same size: the allocator's rule, that a
// block handed to another owner is zeroed first, holds in the tier as in
// device memory.

// hostTier is the pool's host tier. Its lock is the last of the pool's:
// it is never held while a handle's lock is taken.
type hostTier struct {
	max  int64
	b    device.Backend // the pool's backend, which the copies go through
	rec  *recorded      // the pool's streams recorded on blocks (fence.go)
	host device.Streams // the backend's streams and page-locked memory, nil: none
	// memcpy: the backend's device memory is host memory, so the tier's
	// copies are made at once rather than queued (streamFor).
	memcpy bool
	hm     *tierMem
	mem    *blocks.Allocator // over hm, capped at max

	mu sync.Mutex
	// landing is the images copied back whose copies may still run, in
	// the order they were queued; landingBytes their bytes, which the
	// allocator counts in use until they are given back.
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

// tierImage is a state's version in the tier: what its root was, block by
// block, and the host blocks that hold the blocks' bytes. The tree itself
// is not kept: bringing back makes it again from the image (hostTier.back).
type tierImage struct {
	owner Owner
	rows  int
	cols  []tierCol
	blks  []*block // host blocks, one per device block, column after column, in block order
	bytes int64
	// seq is the commit order (entry.seq) of the version of a head that
	// keeps a checkpoint history, 0 where unknown: the history it comes
	// back with starts with it, so that a group's cuts stay in order.
	seq uint64
}

// tierCol is one column of an image: the tree held blocks [lo, n).
type tierCol struct{ lo, n int }

// newHostTier makes a host tier of max bytes for a pool of backend b,
// whose streams recorded on blocks are rec.
func newHostTier(b device.Backend, rec *recorded, max int64) *hostTier {
	t := &hostTier{max: max, b: b, rec: rec, memcpy: b.Name() == "host"}
	if sb, ok := b.(device.Streams); ok {
		t.host = sb
	}
	t.hm = &tierMem{host: t.host}
	t.mem = blocks.New(t.hm, blocks.Options{MaxBytes: max, NoMemory: errTierFull})
	return t
}

// errTierFull is what an allocation of the tier fails with when the tier
// is full.
var errTierFull = errors.New("state: the host tier is full")

// alloc takes a host block for each of blks, of its size, for owner: in
// img.blks, or false when the tier has no room (nothing taken then).
// Blocks another owner left are zeroed first (blocks.Allocator.Alloc).
func (t *hostTier) alloc(img *tierImage, blks []*block) bool {
	t.mu.Lock()
	if len(t.landing) > 0 {
		t.reapLocked(false)
	}
	t.mu.Unlock()
	out := make([]*block, 0, len(blks))
	for i := 0; i < len(blks); {
		j := i + 1
		for j < len(blks) && blks[j].Bytes() == blks[i].Bytes() {
			j++
		}
		got, err := t.mem.Alloc(nil, t.mem.Class(blks[i].Bytes()), string(img.owner), j-i, false)
		if err != nil {
			t.give(out)
			return false
		}
		out = append(out, got...)
		i = j
	}
	img.blks = out
	return true
}

// give gives host blocks back to the tier's allocator.
func (t *hostTier) give(list []*block) {
	var freed []*block
	for _, b := range list {
		releaseBlock(b, &freed)
	}
	t.mem.Free(freed)
}

// tierMem is host memory as the block allocator's backend: slabs of the
// backend's page-locked memory (or the Go heap where it has none), each
// at an address of its own in a made-up space, which bytes maps back.
type tierMem struct {
	host device.Streams

	mu    sync.Mutex
	slabs []tierSlab // by address
	next  device.Ptr
}

// tierSlab is one host allocation of the tier.
type tierSlab struct {
	at     device.Ptr
	mem    []byte
	pinned bool // from host.HostAlloc: given back with HostFree
}

// tierGap keeps the tier's slabs apart in their address space.
const tierGap = 1 << 20

func (m *tierMem) Name() string { return "host tier" }

// Alloc takes n bytes of host memory: page-locked where the backend has
// it, so that copies to and from the device run at the bus's rate.
func (m *tierMem) Alloc(n int) (device.Ptr, error) {
	s := tierSlab{}
	if m.host != nil {
		if mem, err := m.host.HostAlloc(n); err == nil {
			s.mem, s.pinned = mem, true
		}
	}
	if s.mem == nil {
		s.mem = make([]byte, n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next == 0 {
		m.next = tierGap
	}
	s.at = m.next
	m.next += device.Ptr(n+tierGap-1) &^ (tierGap - 1)
	m.next += tierGap
	m.slabs = append(m.slabs, s)
	return s.at, nil
}

// Free gives the slab at p back.
func (m *tierMem) Free(p device.Ptr) error {
	m.mu.Lock()
	i, ok := slices.BinarySearchFunc(m.slabs, p, func(s tierSlab, p device.Ptr) int { return cmp.Compare(s.at, p) })
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("state: host tier: no slab at %#x", p)
	}
	s := m.slabs[i]
	m.slabs = slices.Delete(m.slabs, i, i+1)
	m.mu.Unlock()
	if s.pinned {
		return m.host.HostFree(s.mem)
	}
	return nil
}

// slab returns the slab p lies in and p's offset there.
func (m *tierMem) slab(p device.Ptr) (tierSlab, int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, _ := slices.BinarySearchFunc(m.slabs, p, func(s tierSlab, p device.Ptr) int { return cmp.Compare(s.at, p) })
	if i < len(m.slabs) && m.slabs[i].at == p {
		return m.slabs[i], 0, true
	}
	if i == 0 {
		return tierSlab{}, 0, false
	}
	s := m.slabs[i-1]
	off := int(p - s.at)
	return s, off, off < len(s.mem)
}

// bytes returns the n bytes of host memory at p.
func (m *tierMem) bytes(p device.Ptr, n int) []byte {
	s, off, ok := m.slab(p)
	if !ok || off+n > len(s.mem) {
		panic(fmt.Sprintf("state: host tier: %d bytes at %#x lie in no slab", n, p))
	}
	return s.mem[off : off+n : off+n]
}

// pinned reports whether b lies in page-locked memory.
func (m *tierMem) pinned(b *block) bool {
	s, _, ok := m.slab(b.Ptr())
	return ok && s.pinned
}

func (m *tierMem) Memset(dst device.Ptr, v byte, n int) error {
	b := m.bytes(dst, n)
	for i := range b {
		b[i] = v
	}
	return nil
}

var errTierMem = errors.New("state: host tier memory: not a device")

func (m *tierMem) CopyHtoD(device.Ptr, []byte) error          { return errTierMem }
func (m *tierMem) CopyDtoH([]byte, device.Ptr) error          { return errTierMem }
func (m *tierMem) CopyDtoD(device.Ptr, device.Ptr, int) error { return errTierMem }
func (m *tierMem) Sync() error                                { return nil }
func (m *tierMem) MemInfo() (free, total uint64, err error)   { return 0, 0, errTierMem }
func (m *tierMem) Close() error                               { return nil }

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
// are synchronous: without streams, where img lies in memory that is not
// page-locked (an async copy must not read the Go heap), or where device
// memory is host memory (the host backend), whose copies are memmoves that
// a stream would only delay (1.8x a raw copy for a return of 1 MiB,
// against 1.06x done at once).
func (t *hostTier) streamFor(img *tierImage) device.Stream {
	if t.memcpy {
		return nil
	}
	for _, b := range img.blks {
		if !t.hm.pinned(b) {
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
		t.free(l.img)
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

// free gives an image's host blocks back.
func (t *hostTier) free(img *tierImage) {
	t.give(img.blks)
	img.blks = nil
}

// close gives every slab back; the tier holds nothing after.
func (t *hostTier) close() error {
	t.drain()
	return errors.Join(t.closeStreams(), t.mem.Close("pool close: host tier"))
}

// usedBytes returns the bytes of the images the tier holds.
func (t *hostTier) usedBytes() int64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mem.Stats().InUseBytes - t.landingBytes
}

// check checks the tier's accounting: want is the bytes of the images the
// live handles hold; the allocator's blocks in use are those and the
// images still landing, in slabs of at most max bytes.
func (t *hostTier) check(want int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.mem.Stats()
	switch {
	case st.InUseBytes != want+t.landingBytes:
		return fmt.Errorf("host tier: live handles' images hold %d bytes and %d are landing, the tier counts %d", want, t.landingBytes, st.InUseBytes)
	case st.Reserved > t.max:
		return fmt.Errorf("host tier: %d bytes of slabs over its %d", st.Reserved, t.max)
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

// rootBlocks lists every block r holds, column after column, in block
// order, whoever else holds them too, and reports whether every column
// holds each of its blocks [lo, n): the blocks of an image that copies r
// whole (a head that keeps a history, tierHead.historyBlocksLocked).
func rootBlocks(r *root, out []*block) ([]*block, bool) {
	for c := range r.cols {
		t := &r.cols[c]
		k := 0
		for b := range t.heldIn(t.lo, t.n) {
			out = append(out, b)
			k++
		}
		if k != t.n-t.lo {
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

// add records x, in place of a record of the same chain, whose image
// it gives back to t.
func (tp *tierPrefixes) add(t *hostTier, x *tierPrefix) {
	tp.mu.Lock()
	if tp.m == nil {
		tp.m = map[tableKey]map[string]*tierPrefix{}
	}
	byChain := tp.m[x.tk]
	if byChain == nil {
		byChain = map[string]*tierPrefix{}
		tp.m[x.tk] = byChain
	}
	old := byChain[x.chain]
	byChain[x.chain] = x
	tp.mu.Unlock()
	if old != nil {
		// The chain was cached again (a head appended the same rows)
		// and moved here again: one image of it is enough.
		t.free(old.img)
	}
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
