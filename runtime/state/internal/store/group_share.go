package store

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/gpustate/gpustate/runtime/device"
)

// Group prefix sharing (docs/GUIDE.md, "Coupled state"): hybrid prefix
// caching. A group made by NewSharedGroup in a non-empty domain has one
// shared member, the first whose layout has a ShareKey. When an Append of
// that member ends at a block boundary, the group registers, under the key
// column's values of every row so far, the state of every member as it is
// at that call (their versions' roots, copy-on-write, as snapshots hold
// them). A later group of the same layouts and domain adopts, with
// Group.AdoptPrefix, the longest registered prefix of its keys: every
// member takes its registered state, and the caller computes only the
// rows after it. A prefix is registered only where every member can be
// restored; a member busy with a call of its own at that moment (its lock
// held) makes the group skip the block, as a cache may.
//
// The registrations are the pool's group cache, one table per layouts and
// domain, apart from the prefix cache of single heads: its entries hold
// whole states, not blocks. A table is a tree of chains, as the prefix
// cache's: an entry per block of the shared member's rows, found by the
// hash of its keys chained with its parent's, keeping its own block's keys
// only, and the state registered at its end, if any. A registration reads
// back only the keys of the blocks since the group's last one (its tip),
// once it has checked that the shared member still begins with the tip's
// chain: the tip's registered root and the member's root share their
// blocks up to where they part (firstDiff), so a rollback or a merge
// costs the walk of a path or two, not a read of every key. A decode step
// therefore costs the same whatever the context's length, and a table's
// keys take the bytes of its distinct blocks, not of every prefix again.
//
// The registered states are optional retention: under memory
// pressure the Evictor ranks them with the other optional state (Victim
// Cached), and PoolStats.CachedBytes counts the blocks only they hold.
// Evicting a state leaves its entry while entries follow it, so the
// chains past it stay whole. ForgetPrefixes forgets a domain's. The
// shared member is made by NewHead, not NewSharedHead, so that its own
// AdoptPrefix adopts nothing: a member that adopted its rows alone would
// leave the others behind.
//
// Lock order: a member's mu (the group's members by try-lock only), then
// the group cache's mu, then the pool's mu.

// groupKeyOf is the key of the table of a group of heads made from the
// caller's layouts, in domain d.
func groupKeyOf(heads []*Head, layouts []*Layout, d Domain) groupKey {
	var b strings.Builder
	for i, h := range heads {
		k := h.shareKey(layouts[i], d)
		fmt.Fprintf(&b, "%p %s\n", k.l, k.sig)
	}
	return groupKey{members: b.String(), d: d}
}

// table returns the group table of g's key, making it when create is
// set; nil when none. c.mu is held.
func (c *groupCache) table(g *Group, create bool) *groupTable {
	if t := c.tables[g.key]; t != nil || !create {
		return t
	}
	if c.tables == nil {
		c.tables = make(map[groupKey]*groupTable)
		c.seed = maphash.MakeSeed()
	}
	t := &groupTable{key: g.key, buckets: make(map[uint64][]*groupEntry)}
	c.tables[g.key] = t
	return t
}

// chainHash is the hash of a block whose keys are keys after parent's
// chain (nil: the start of one).
func (c *groupCache) chainHash(parent *groupEntry, keys []byte) uint64 {
	var ph uint64
	if parent != nil {
		ph = parent.hash
	}
	if c.hash != nil {
		return c.hash(ph, keys)
	}
	return chainHash(c.seed, ph, keys)
}

// findLocked returns the entry of t after parent whose keys are keys, nil
// when none. A hash match is not trusted: the parent and the keys are
// compared. c.mu is held.
func (c *groupCache) findLocked(t *groupTable, parent *groupEntry, keys []byte) *groupEntry {
	for _, e := range t.buckets[c.chainHash(parent, keys)] {
		if e.parent == parent && bytes.Equal(e.keys, keys) {
			return e
		}
	}
	return nil
}

// addLocked adds to t the entry after parent of a block whose keys are
// keys, ending at rows. c.mu is held.
func (c *groupCache) addLocked(t *groupTable, parent *groupEntry, keys []byte, rows int) *groupEntry {
	e := &groupEntry{tab: t, parent: parent, hash: c.chainHash(parent, keys), keys: bytes.Clone(keys), rows: rows}
	t.buckets[e.hash] = append(t.buckets[e.hash], e)
	t.n++
	if parent != nil {
		parent.kids++
	}
	return e
}

// tipLocked returns the entry of the chain from e (a group's tip) that
// the shared member's rows begin with, nil when none: cur is its key
// column's tree, per its rows per block. The nearest entry up the chain
// that holds a state shows, by the blocks its root shares with cur, how
// much of the chain is the member's still. c.mu is held.
func tipLocked(e *groupEntry, shared, key int, cur *tree, per int) *groupEntry {
	// An entry in its table has every entry before it there too (pruning
	// takes out only entries nothing follows).
	for e != nil && !e.gone && e.roots == nil {
		e = e.parent
	}
	if e == nil || e.gone {
		return nil
	}
	same := firstDiff(&e.roots[shared].cols[key], cur) * per
	for e != nil && e.rows > same {
		e = e.parent
	}
	return e
}

// cut returns every member's root, one reference each, when h is the
// group's shared member and its rows end at a block boundary, and every
// member can be registered now, with the streams recorded on the members
// and those of h's copies in flight (their queued work may still write
// the rows); nil otherwise. A member whose last call made rows a kernel
// writes, or with copies in flight, cannot be registered until its next
// call. h.mu is held; the other members are taken by try-lock, so that
// no lock is awaited out of order.
func (g *Group) cut(h *Head) ([]*root, []device.Stream) {
	if g.domain == "" || g.shared < 0 || g.heads[g.shared] != h || h.r == nil {
		return nil, nil
	}
	if per, rows := h.perBlock[0], h.r.rows; rows == 0 || rows%per != 0 {
		return nil, nil
	}
	roots := make([]*root, len(g.heads))
	var streams []device.Stream
	var locked []*Head
	defer func() {
		for _, m := range locked {
			m.mu.Unlock()
		}
	}()
	for i, m := range g.heads {
		if m != h {
			if !m.mu.TryLock() {
				return nil, nil
			}
			locked = append(locked, m)
			if len(m.async.inflight) > 0 || m.deviceRows {
				return nil, nil
			}
		}
		if m.released || m.evicted || m.invalid.Load() || m.r == nil {
			return nil, nil
		}
		roots[i] = m.r
		for _, st := range m.async.streams.get() {
			if !slices.Contains(streams, st) {
				streams = append(streams, st)
			}
		}
	}
	// h's own copies in flight (an earlier AppendAsync on another stream,
	// a return from the host tier) may still write the rows: the cut's
	// registration waits for them too, not only for the call that took it.
	for _, f := range h.async.inflight {
		if !slices.Contains(streams, f.st) {
			streams = append(streams, f.st)
		}
	}
	for i, r := range roots {
		r.retain()
		// The registered state holds each member's version as a
		// snapshot would: a rollback past it must not write on in the
		// tail block whose rows it reads (lowerTails).
		m := g.heads[i]
		m.lin.mu.Lock()
		pin(m.pos)
		m.lin.mu.Unlock()
	}
	return roots, streams
}

// register registers roots, a cut of g's members (one reference each,
// which register takes over), at the end of the shared member's rows in
// it, chained after g's tip. h, the shared member, is locked.
func (g *Group) register(h *Head, roots []*root) {
	keep := false
	defer func() {
		if !keep {
			var freed []*block
			for _, r := range roots {
				r.release(&freed)
			}
			g.pool.free(freed)
		}
	}()
	key, per := h.l.shareColumn(), h.perBlock[0]
	cur := roots[g.shared]
	rows := cur.rows
	c := &g.pool.groups
	c.mu.Lock()
	parent := tipLocked(g.tip, g.shared, key, &cur.cols[key], per)
	c.mu.Unlock()
	from := 0
	if parent != nil {
		from = parent.rows
	}
	// The keys of the blocks past the tip's chain, read outside the
	// cache's lock: a device copy.
	blockKeys := per * h.l.Columns[key].ElemSize
	keys := make([]byte, (rows-from)/per*blockKeys)
	if len(keys) > 0 {
		if err := h.copyColumn(cur, key, from, rows, keys); err != nil {
			return // a cache: the block goes unregistered
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.table(g, true)
	if parent != nil && (parent.gone || parent.tab != t) {
		return // forgotten meanwhile; the next registration starts over
	}
	e := parent
	for i := range len(keys) / blockKeys {
		k := keys[i*blockKeys : (i+1)*blockKeys]
		next := c.findLocked(t, e, k)
		if next == nil {
			next = c.addLocked(t, e, k, from+(i+1)*per)
		}
		e = next
	}
	if e == nil {
		return
	}
	g.tip = e
	if e.roots == nil {
		e.roots, e.owner, keep = roots, g.owner, true
	}
	c.usedLocked(e, g.pool)
}

// usedLocked stamps e, which holds a state, with p's use clock, and puts
// it at the back of the list of states. c.mu is held.
func (c *groupCache) usedLocked(e *groupEntry, p *Pool) {
	e.used = p.clock.Add(1)
	c.states.remove(e)
	c.states.pushBack(e)
}

// lookup returns the entry of g's table at the longest prefix of keys, in
// blocks of blockKeys bytes, that holds a state, and its roots, taking one
// reference to each for the caller; nil when none.
func (c *groupCache) lookup(g *Group, keys []byte, blockKeys int) (*groupEntry, []*root) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.table(g, false)
	if t == nil {
		return nil, nil
	}
	var found, e *groupEntry
	for i := range len(keys) / blockKeys {
		if e = c.findLocked(t, e, keys[i*blockKeys:(i+1)*blockKeys]); e == nil {
			break
		}
		if e.roots != nil {
			found = e
		}
	}
	if found == nil {
		return nil, nil
	}
	c.usedLocked(found, g.pool)
	for _, r := range found.roots {
		r.retain()
	}
	return found, slices.Clone(found.roots)
}

// dropStateLocked gives back e's registered state, appending the blocks
// only it held to freed, and takes out of the table the entries that
// neither hold a state nor lead to one any more. c.mu is held.
func (c *groupCache) dropStateLocked(e *groupEntry, freed *[]*block) {
	for _, r := range e.roots {
		r.release(freed)
	}
	e.roots = nil
	c.states.remove(e)
	for e != nil && !e.gone && e.roots == nil && e.kids == 0 {
		e.gone = true
		t := e.tab
		b := t.buckets[e.hash]
		if i := slices.Index(b, e); i >= 0 {
			b = slices.Delete(b, i, i+1)
		}
		if len(b) == 0 {
			delete(t.buckets, e.hash)
		} else {
			t.buckets[e.hash] = b
		}
		t.n--
		if t.n == 0 && c.tables[t.key] == t {
			delete(c.tables, t.key) // the tables follow the domains in use
		}
		if e.parent != nil {
			e.parent.kids--
		}
		e = e.parent
	}
}

// stateBytes is the bytes of the blocks only e's state holds. c.mu is
// held.
func stateBytes(e *groupEntry) int64 {
	var n int64
	for _, r := range e.roots {
		n += exclusiveBytes(r)
	}
	return n
}

// cachedBytes is the bytes of the blocks only registered states hold,
// each counted once whichever states hold it (onlyBlocks): what
// evicting every state frees. PoolStats.CachedBytes and reclaim's
// freeable read it.
func (c *groupCache) cachedBytes() int64 {
	var n int64
	c.freeBlocks(func(b *block) { n += int64(b.Bytes()) })
	return n
}

// freeBlocks calls f once with every block only registered states hold.
func (c *groupCache) freeBlocks(f func(*block)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	refs, _ := c.frontRootsLocked(-1)
	onlyBlocks(refs, f)
}

// freeable returns the bytes evicting the least recently used registered
// states would free, jointly (onlyBlocks), taking from the front of the
// list twice as many states each time until they free need or every
// state is taken: a reclaim asks whether eviction can make its room, and
// the answer costs about the states that make it, not every state. The
// blocks the front states hold alone are counted first: where they make
// need, so do the blocks the states hold jointly, which are more.
func (c *groupCache) freeable(need int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var alone int64
	for e := c.states.front; e != nil && alone < need; e = e.next {
		alone += stateBytes(e)
	}
	if alone >= need {
		return alone
	}
	for k := maxGroupVictims; ; k *= 2 {
		refs, all := c.frontRootsLocked(k)
		var n int64
		onlyBlocks(refs, func(b *block) { n += int64(b.Bytes()) })
		if n >= need || all {
			return n
		}
	}
}

// frontRootsLocked returns the roots the k least recently used states
// hold (every state's for k < 0), and whether that is every state. c.mu
// is held.
func (c *groupCache) frontRootsLocked(k int) ([]*root, bool) {
	var refs []*root
	e := c.states.front
	for ; e != nil && k != 0; e = e.next {
		refs = append(refs, e.roots...)
		k--
	}
	return refs, e == nil
}

// forget drops the registered states of domain d; Pool.ForgetPrefixes
// calls it. It returns the blocks to free.
func (c *groupCache) forget(d Domain) []*block {
	c.mu.Lock()
	defer c.mu.Unlock()
	var freed []*block
	for k, t := range c.tables {
		if k.d != d {
			continue
		}
		delete(c.tables, k)
		for _, b := range t.buckets {
			for _, e := range b {
				for _, r := range e.roots {
					r.release(&freed)
				}
				c.states.remove(e)
				e.roots, e.gone = nil, true
			}
		}
		t.buckets, t.n = nil, 0
	}
	return freed
}

// maxGroupVictims bounds the registered states one reclaim round ranks: a
// state's bytes are a walk of its members' unshared nodes, where a cached
// prefix entry's are its blocks'.
const maxGroupVictims = 16

// victims lists, as optional victims, the least recently used registered
// states that would free something, maxGroupVictims at most: a reclaim
// round reads the front of the list, never the whole of it. A state whose
// every block another state holds too is left for a later round: of the
// states that share blocks along a chain, the one registered last holds
// its last block alone, and once it goes the blocks it shared are the
// others' alone (freeable counts them so from the start).
func (c *groupCache) victims(p *Pool) []evictable {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []evictable
	for e := c.states.front; e != nil && len(out) < maxGroupVictims; e = e.next {
		bytes := stateBytes(e)
		if bytes == 0 {
			continue // every block is held elsewhere too: evicting frees nothing now
		}
		if e.typ == "" {
			e.typ = fmt.Sprintf("group state at %d rows", e.rows)
		}
		out = append(out, groupVictim{p: p, e: e, v: Victim{
			Owner: string(e.owner), Type: e.typ, Cached: true, Bytes: bytes, LastUse: e.used,
		}})
	}
	return out
}

// groupVictim is a registered state as an evictable.
type groupVictim struct {
	p *Pool
	e *groupEntry
	v Victim
}

func (x groupVictim) victim(r Retention) (Victim, bool) { return x.v, r == Optional }

// exclusiveBlocks lists the blocks only the registered state holds.
func (x groupVictim) exclusiveBlocks(f func(*block)) {
	c := &x.p.groups
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range x.e.roots {
		exclusiveBlocks(r, f)
	}
}

func (x groupVictim) evict() (int64, bool) {
	c := &x.p.groups
	c.mu.Lock()
	if x.e.roots == nil {
		c.mu.Unlock()
		return 0, false
	}
	var freed []*block
	c.dropStateLocked(x.e, &freed)
	c.mu.Unlock()
	x.p.free(freed)
	return blockBytes(freed), len(freed) > 0
}

// reset forgets every registered state; Pool.Close calls it, as it frees
// every slab.
func (c *groupCache) reset() {
	c.mu.Lock()
	c.tables, c.states = nil, lruList[groupEntry, *groupEntry]{}
	c.mu.Unlock()
}
