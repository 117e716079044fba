package store

import (
	"bytes"
	"errors"
	"hash/maphash"
	"slices"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
)

// Declared prefix sharing (Layout.ShareKey, the contract's //state:share
// prefix key=FIELD). A head made by NewSharedHead in a non-empty domain
// registers each full block it appends in the pool's prefix cache, under a
// hash of the key column's values in that block chained with the hash of
// the block before it, so that the hash of block i stands for the keys of
// rows [0, (i+1)*rows per block). A later head of the same layout and
// domain adopts the longest chain of cached blocks whose keys match its
// own (AdoptPrefix): its tree points at the cached blocks, read only, as a
// branch's points at its parent's, so they count once in the pool's
// physical bytes and a write past them never touches them (append growth:
// a full block is never written again).
//
// Isolation. The cache is one table per layout and domain: a head looks
// up only its own, so blocks never cross domains and the empty domain
// shares with nobody. A table is found by the Layout pointer its heads
// were made from (generated code has one per type), so two types that look
// alike never share, and by what that layout held when each head copied
// it: columns, sizes and rows per block. A Layout value reused after a
// change (a wider column) therefore finds a table of its own, never blocks
// of the old size, whose rows it would read past. A hash match is
// not trusted: an entry keeps its parent and its keys, and adoption
// compares both, so a collision costs a comparison, never a wrong row. A
// block keeps the owner that wrote it; when the last reference to it goes,
// it returns to that owner's free list and is zeroed before any other
// owner gets it, as every block is (docs/GUIDE.md, "Owners").
//
// Retention. An entry holds one reference to each of its blocks, so a
// cached prefix outlives the heads that wrote and adopted it. An entry no
// head holds (its blocks referenced by the cache alone) and with no cached
// block after it is a victim of optional retention: the pool's Evictor
// ranks it with the optional heads and snapshots under memory pressure
// (share_evict.go keeps them in a list, least recently used first, and
// offers the front of it). Evicting leaves first keeps the head of a
// chain, the part most prompts share, longest. An entry some head holds
// has every entry before it held too (heads hold prefixes), so eviction
// never breaks a held chain.
//
// Lock order: a head's mu, then the cache's mu, then the pool's mu.

// join returns the table of key k, of layout type typ, making it, for a
// new head that registers in it; the head leaves it at its release. clock
// is the pool's use clock.
func (c *prefixCache) join(k tableKey, typ string, clock *atomic.Uint64) *prefixTable {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tables == nil {
		c.tables = make(map[tableKey]*prefixTable)
		c.seed = maphash.MakeSeed()
	}
	c.clock = clock
	t := c.tables[k]
	if t == nil {
		t = &prefixTable{key: k, typ: typ, buckets: make(map[uint64][]*prefixEntry)}
		c.tables[k] = t
	}
	t.heads++
	return t
}

// leave is join's undoing, at a head's release: a table with neither
// heads nor entries goes, so that the tables follow the domains in use,
// not every domain ever seen.
func (c *prefixCache) leave(t *prefixTable) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.heads--
	c.dropEmptyLocked(t)
}

// dropEmptyLocked forgets t when nothing uses it. c.mu is held.
func (c *prefixCache) dropEmptyLocked(t *prefixTable) {
	if t.heads == 0 && t.n == 0 && c.tables[t.key] == t {
		delete(c.tables, t.key)
	}
}

// chainHash is the hash of a block whose keys are keys after the chain
// whose hash is parent.
func (c *prefixCache) chainHash(parent uint64, keys []byte) uint64 {
	if c.hash != nil {
		return c.hash(parent, keys)
	}
	return chainHash(c.seed, parent, keys)
}

// hashOf is the chain hash of parent, 0 for the start of a chain.
func hashOf(parent *prefixEntry) uint64 {
	if parent == nil {
		return 0
	}
	return parent.hash
}

// lookupLocked returns the entry of t after parent whose keys are keys,
// nil when none.
func (c *prefixCache) lookupLocked(t *prefixTable, parent *prefixEntry, keys []byte) *prefixEntry {
	for _, e := range t.buckets[c.chainHash(hashOf(parent), keys)] {
		if e.parent == parent && bytes.Equal(e.keys, keys) {
			return e
		}
	}
	return nil
}

// adopt is AdoptPrefix's work on h, whose place s is and whose mu is
// held: the chain of cached blocks (then of the host tier's) that keys
// match, set in h's tree as a new version.
func (s *sharing) adopt(h *Head, keys []byte) (int, error) {
	if len(keys)%s.ks != 0 {
		return 0, h.errorf("AdoptPrefix", "%d bytes of keys, not a multiple of the key's %d bytes: %w", len(keys), s.ks, ErrShape)
	}
	if h.r.rows != 0 {
		return 0, h.errorf("AdoptPrefix", "the head has %d rows; a prefix is adopted by an empty head: %w", h.r.rows, ErrRange)
	}
	if s.tab == nil {
		return 0, nil
	}
	per := h.perBlock[0]
	n := len(keys) / s.ks / per
	if b := h.l.Bound; b > 0 {
		n = min(n, b/per)
	}
	h.pool.cache.pollWaiting(s.tab, h)
	chain := h.pool.cache.adopt(s.tab, keys, per*s.ks, n)
	if len(chain) < n && h.pool.tier != nil && h.pool.tierPx.has(s.tab.key) {
		chain = s.adoptFromTier(h, keys, per*s.ks, n, chain)
	}
	h.pool.adopted(len(chain) * per)
	if len(chain) == 0 {
		return 0, nil
	}
	var freed []*block
	r := h.r.own(&freed)
	for i, e := range chain {
		for c, b := range e.blks {
			r.cols[c].set(i, b, &freed) // takes over adopt's reference
		}
	}
	r.rows = len(chain) * per
	h.r = r
	h.commitVersion()
	h.pool.free(freed)
	s.reg, s.last, s.tail, s.known = len(chain), chain[len(chain)-1], s.tail[:0], r.rows
	h.committed(written{to: r.rows})
	return r.rows, nil
}

// adoptFromTier goes on with chain, the entries of s's table that
// prefixCache.adopt found for h, with the blocks of the host tier that
// follow it: each comes back to device memory, is cached again as the
// entries after chain's last, and is the caller's as adopt's are. It stops
// at the first block the tier does not hold or cannot bring back (the
// caller computes the rest). h.mu is held, no cache lock.
func (s *sharing) adoptFromTier(h *Head, keys []byte, blockKeys, n int, chain []*prefixEntry) []*prefixEntry {
	p, t := h.pool, s.tab
	for i := len(chain); i < n; i++ {
		x := p.tierPx.take(t.key, keys[:(i+1)*blockKeys])
		if x == nil {
			break
		}
		blks, err := p.tier.prefixBlocks(&h.shape, x)
		if err != nil {
			p.tierPx.add(p.tier, x) // it stays in the tier
			break
		}
		var parent *prefixEntry
		if i > 0 {
			parent = chain[i-1]
		}
		e, _ := p.cache.register(t, parent, x.key, keys[i*blockKeys:(i+1)*blockKeys], blockKeys, [][]*block{blks}, x.owner)
		if e == nil || e.gone || len(e.blks) != len(blks) || e.blks[0] != blks[0] {
			// Cached again meanwhile, or its chain forgotten: the tier's
			// copy goes, and so do the blocks it came back to.
			var back []*block
			for _, b := range blks {
				releaseBlock(b, &back)
			}
			p.free(back)
			break
		}
		p.tier.in.Add(x.img.bytes)
		chain = append(chain, e)
	}
	return chain
}

// adopt returns the longest chain of at most n entries of t whose keys are
// keys, blockKeys bytes per block, taking one reference to each of their
// blocks for the caller: they leave the list of free entries.
func (c *prefixCache) adopt(t *prefixTable, keys []byte, blockKeys, n int) []*prefixEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var chain []*prefixEntry
	var parent *prefixEntry
	for i := range n {
		e := c.lookupLocked(t, parent, keys[i*blockKeys:(i+1)*blockKeys])
		if e == nil {
			break
		}
		chain = append(chain, e)
		parent = e
	}
	for _, e := range chain {
		for _, b := range e.blks {
			c.holdBlockLocked(e, b)
			b.Retain()
		}
	}
	return chain
}

// appended registers the blocks that rows appended from the host to h
// filled: keys are the key column's bytes of rows [from, h.r.rows). h.mu
// is held.
func (s *sharing) appended(h *Head, from int, keys []byte) {
	if s.tab == nil {
		return
	}
	if from == s.known {
		s.tail = append(s.tail, keys...)
		s.known = h.r.rows
	}
	s.full(h)
}

// full registers the full blocks of h's version past those matched
// already, reading back from the device the keys it does not hold (rows a
// kernel wrote). Registration is a cache's: when the keys cannot be read
// back, the blocks stay unregistered and the next call tries again. h.mu
// is held, and no copy of h's is in flight.
func (s *sharing) full(h *Head) { s.fullIf(h, true) }

// fullIf is full; with arm false it records no new batch of events
// (readable): the caller is not the writer, whose kernels may not be
// queued yet (an adoption polling the table's waiting heads).
func (s *sharing) fullIf(h *Head, arm bool) {
	if s.registerFull(h, arm) {
		// The chain went on from another head's entry of the same keys,
		// which was evicted since: the head finds its place in the cache
		// again, by its own blocks, and registers from there, reading
		// back the keys it no longer holds. Its own entries are not
		// evicted while it holds their blocks, so once is enough. Its
		// version is the same: the events that say which rows the
		// kernels wrote still hold (rematch, not resync).
		s.rematch(h)
		s.registerFull(h, arm)
	}
}

// registerFull is fullIf's work; it reports that the chain's last entry
// was evicted, and registers nothing then.
func (s *sharing) registerFull(h *Head, arm bool) bool {
	if s.tab == nil || h.r == nil {
		return false
	}
	per := h.perBlock[0]
	full := h.r.rows / per
	if full <= s.reg || s.broken {
		return false
	}
	if s.known < full*per {
		// Rows a kernel writes join the cache only once the streams
		// recorded on the head are past that kernel.
		if full = min(full, max(s.known, s.readable(h, arm))/per); full <= s.reg {
			return false
		}
	}
	if end := full * per; s.known < end {
		buf := make([]byte, (end-s.known)*s.ks)
		if err := h.copyColumn(h.r, s.key, s.known, end, buf); err != nil {
			return false
		}
		s.tail = append(s.tail, buf...)
		s.known = end
	}
	blockKeys := per * s.ks
	blks := make([][]*block, full-s.reg)
	for i := range blks {
		blks[i] = make([]*block, len(h.r.cols))
		for c := range h.r.cols {
			blks[i][c] = h.r.cols[c].get(s.reg + i)
		}
	}
	last, lost := h.pool.cache.register(s.tab, s.last, s.key, s.tail[:len(blks)*blockKeys], blockKeys, blks, h.owner)
	if lost {
		return true
	}
	s.last = last
	s.tail = append(s.tail[:0], s.tail[len(blks)*blockKeys:]...)
	s.reg = full
	return false
}

// readable returns the rows of h's version whose keys may be read back:
// all of them when no stream was recorded on h (the caller wrote them, as
// AppendDevice's spans are the caller's until its next call), else the
// rows that completed batches of events cover. Events are polled, never
// waited for; a new batch is recorded, covering every row, when rows past
// the last batch fill a block (its kernels were queued before this call).
// h.mu is held.
func (s *sharing) readable(h *Head, arm bool) int {
	streams := h.async.streams.get()
	if len(streams) == 0 {
		return h.r.rows
	}
	for len(s.waits) > 0 {
		w := s.waits[0]
		done, failed := true, false
		for _, ev := range w.evs {
			d, err := ev.Done()
			done, failed = done && d, failed || err != nil
		}
		if !done {
			break
		}
		closeEvents(w.evs)
		s.waits = s.waits[1:]
		if failed {
			s.broken = true
			return s.ready
		}
		s.ready = max(s.ready, w.rows)
	}
	if len(s.waits) == 0 {
		h.pool.cache.waiting(s.tab, h, false)
	}
	if arm {
		s.markWritten(h, streams)
	}
	return s.ready
}

// markWritten records a batch of events on streams, covering every row of
// h's version, when rows past the last batch fill a block: the kernels
// writing them were queued before this call. RecordStream calls it too,
// so that a kernel queued before it is covered by an event from then on.
// h.mu is held.
func (s *sharing) markWritten(h *Head, streams []device.Stream) {
	last := max(s.ready, s.known)
	if n := len(s.waits); n > 0 {
		last = max(last, s.waits[n-1].rows)
	}
	per := h.perBlock[0]
	if h.r.rows/per > last/per && h.r.rows/per > s.reg {
		if evs, ok := recordAll(h.pool.b, streams); ok {
			s.waits = append(s.waits, shareWait{evs: evs, rows: h.r.rows})
			h.pool.cache.waiting(s.tab, h, true) // adoptions poll it (pollWaiting)
		}
	}
}

// recordAll records an event on each of streams of backend b; a closed
// stream has finished its work and needs none. ok is false when one fails.
func recordAll(b device.Backend, streams []device.Stream) (evs []device.Event, ok bool) {
	sb := b.(device.Streams) // streams were recorded, so it has them
	for _, st := range streams {
		ev, err := sb.Record(st)
		switch {
		case err == nil:
			evs = append(evs, ev)
		case !errors.Is(err, device.ErrStreamClosed):
			closeEvents(evs)
			return nil, false
		}
	}
	return evs, true
}

func closeEvents(evs []device.Event) {
	for _, ev := range evs {
		ev.Close() // nothing waits for it
	}
}

// dropWaits forgets the batches of events of a shared head: at its
// release, and when its version changes other than by an append (the
// rows they covered are other rows then). h.mu is held.
func (s *sharing) dropWaits() {
	for _, w := range s.waits {
		closeEvents(w.evs)
	}
	s.waits, s.ready, s.broken = nil, 0, false
}

// register adds the blocks blks[i] (one per column), whose keys are
// keys[i*blockKeys:(i+1)*blockKeys], as the entries after parent,
// and returns the entry of the last. A block whose chain and keys are
// cached already is not added twice: the chain goes on from the cached
// entry. A block that some entry holds already is not cached twice
// either: the chain ends there. lost reports that parent was evicted
// meanwhile (it held another head's blocks of the same keys): nothing is
// added, and the caller finds its chain again (sharing.resync).
func (c *prefixCache) register(t *prefixTable, parent *prefixEntry, key int, keys []byte, blockKeys int, blks [][]*block, owner Owner) (last *prefixEntry, lost bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if parent != nil && parent.gone {
		// Forgotten, what follows it cannot be adopted; evicted, it can,
		// from another chain.
		return parent, parent.epoch == t.forgets
	}
	for i, bs := range blks {
		k := keys[i*blockKeys : (i+1)*blockKeys]
		if e := c.lookupLocked(t, parent, k); e != nil {
			parent = e
			continue
		}
		for _, b := range bs {
			if _, ok := c.refs[b]; ok {
				return &prefixEntry{gone: true, epoch: -1}, false // the chain stops: nothing follows it
			}
		}
		e := &prefixEntry{
			tab: t, hash: c.chainHash(hashOf(parent), k), parent: parent,
			keys: bytes.Clone(k), blks: bs, key: key, owner: owner, epoch: t.forgets,
		}
		for _, b := range bs {
			b.Retain() // the head holds it too: the entry is not free
		}
		c.addLocked(e)
		parent = e
	}
	return parent, false
}

// resync finds again, after h's version changed other than by an append
// (Rollback, Merge, a rebuild), how many of its blocks are the entries of
// one cached chain. The keys of the rows after them are read back when
// their blocks fill. h.mu is held.
func (s *sharing) resync(h *Head) {
	if s.tab == nil {
		return
	}
	s.dropWaits()
	s.rematch(h)
}

// rematch is resync for a version that has not changed (its chain's last
// entry was evicted): the batches of events recorded on its streams, and
// the rows they cover, still hold. h.mu is held.
func (s *sharing) rematch(h *Head) {
	s.reg, s.last, s.tail, s.known = 0, nil, s.tail[:0], 0
	if h.r == nil {
		return
	}
	c := &h.pool.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	full := h.r.rows / h.perBlock[0]
	for s.reg < full {
		e := c.refs[h.r.cols[s.key].get(s.reg)].e
		if e == nil || e.tab != s.tab || e.parent != s.last || !e.holds(h.r, s.reg) {
			break
		}
		s.reg, s.last = s.reg+1, e
	}
	s.known = s.reg * h.perBlock[0]
}

// holds reports whether e's blocks are the blocks at index i of r.
func (e *prefixEntry) holds(r *root, i int) bool {
	for c, b := range e.blks {
		if r.cols[c].get(i) != b {
			return false
		}
	}
	return true
}

// cloneInto copies s into c for a branch of a head of pool p, and returns c; the
// branch registers in the same table.
func (s *sharing) cloneInto(p *Pool, c *sharing) *sharing {
	if s == nil {
		return nil
	}
	*c = *s
	c.tail = bytes.Clone(s.tail)
	c.waits = nil // the parent closes its events; the branch records its own
	if c.tab != nil {
		p.cache.mu.Lock()
		c.tab.heads++
		p.cache.mu.Unlock()
	}
	return c
}

// forget takes every entry of domain d out of the cache, and returns
// their blocks, whose references the cache holds still: the caller gives
// them up, as c.mu is not held then.
func (c *prefixCache) forget(d Domain) []*block {
	var gone []*block
	c.mu.Lock()
	for k, t := range c.tables {
		if k.d != d {
			continue
		}
		for _, bucket := range t.buckets {
			for _, e := range bucket {
				for _, b := range e.blks {
					c.forgetLocked(b)
				}
				gone = append(gone, e.blks...)
				c.free.remove(e)
				e.kids, e.gone = 0, true
			}
		}
		// A table heads still register in stays: the blocks they fill
		// after the forgotten ones start no chain in it.
		clear(t.buckets)
		t.n = 0
		t.forgets++ // and entries evicted before, which heads' chains may end at
		c.dropEmptyLocked(t)
	}
	c.mu.Unlock()
	return gone
}

// reset forgets every entry; Pool.Close calls it, as it frees every slab.
func (c *prefixCache) reset() {
	c.mu.Lock()
	c.tables, c.refs, c.free = nil, nil, entryList{}
	c.unheld.Store(0)
	c.held.Store(0)
	c.mu.Unlock()
}

// prepare registers, with c.share and no copy in flight, the blocks that
// rows a kernel wrote filled.
func (s *sharing) prepare(h *Head, c call) error {
	if c.share && len(h.async.inflight) == 0 {
		s.full(h)
	}
	return nil
}

// committed registers the blocks an Append filled (w.key is its batch's
// key column).
func (s *sharing) committed(h *Head, w written) {
	if w.host {
		s.appended(h, w.from, w.key)
	}
}

// changed: the blocks a new root holds are registered by committed,
// moved and prepare.
func (s *sharing) changed(*Head) {}

// moved finds h's place in its table again.
func (s *sharing) moved(h *Head) { s.resync(h) }

// branched gives c its own place in h's table.
func (s *sharing) branched(h, c *Head) { c.share = s.cloneInto(h.pool, &c.shareMem) }

// release registers, if the streams recorded on h are past them already
// (Release never waits), the blocks a kernel filled, and leaves the table.
func (s *sharing) release(h *Head, freed []*block) []*block {
	if s.tab == nil {
		return freed
	}
	if len(h.async.inflight) == 0 {
		s.full(h)
	}
	s.dropWaits()
	h.pool.cache.waiting(s.tab, h, false)
	h.pool.cache.leave(s.tab)
	return freed
}

// waiting adds h to, or takes it out of, t's heads whose kernel-filled
// blocks wait for events.
func (c *prefixCache) waiting(t *prefixTable, h *Head, add bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(t.waiting, poller((*sharedHead)(h)))
	switch {
	case add && i < 0:
		t.waiting = append(t.waiting, (*sharedHead)(h))
	case !add && i >= 0:
		t.waiting = slices.Delete(t.waiting, i, i+1)
	}
}

// pollWaiting registers, for an adoption by h from t, the blocks of t's
// other waiting heads whose events have completed, so that a writer that
// went idle after its kernel's prefill is adopted from all the same.
func (c *prefixCache) pollWaiting(t *prefixTable, h *Head) {
	c.mu.Lock()
	others := slices.Clone(t.waiting)
	c.mu.Unlock()
	for _, o := range others {
		if o != poller((*sharedHead)(h)) {
			o.poll()
		}
	}
}

// sharedHead is a shared head as its table's list of waiting heads holds
// it (prefixTable.waiting): a poller, whose poll is its sharing's.
type sharedHead Head

func (x *sharedHead) poll() {
	h := (*Head)(x)
	h.share.poll(h) // set before h joined the list, and never changed
}

// poll registers the kernel-filled blocks of h, the head whose place s
// is, whose recorded events have completed, when h is free (try-lock: a
// busy head registers at its own call), recording no new events.
func (s *sharing) poll(h *Head) {
	if !h.mu.TryLock() {
		return
	}
	defer h.mu.Unlock()
	if !h.released && len(s.waits) > 0 && len(h.async.inflight) == 0 {
		s.fullIf(h, false)
	}
}
