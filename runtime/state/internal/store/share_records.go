package store

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// The records of prefix sharing: the pool's caches of shared blocks
// (share.go, share_evict.go, group_share.go) and a head's place in one.
// They are declared apart from the code that uses them, below the pool and
// the heads that hold them.

// prefixCache is a pool's cache of shared prefix blocks.
type prefixCache struct {
	mu     sync.Mutex
	seed   maphash.Seed
	tables map[tableKey]*prefixTable
	// refs records every block an entry holds (share_evict.go), free
	// lists the free entries, least recently used first, and clock is the
	// pool's use clock, which stamps an entry as it joins free.
	refs  map[*block]cacheRef
	free  entryList
	clock *atomic.Uint64
	// held is the number of blocks in refs, read without mu by settle.
	held atomic.Int64
	// unheld is the bytes of the cached blocks only the cache holds
	// (PoolStats.CachedBytes); written under mu.
	unheld atomic.Int64
	// hook is the release hook set on every cached block, which calls
	// settle when a block's references drop to one.
	hook *blocks.Hook
	// hash, when set, replaces the chain hash (tests make it collide).
	hash func(parent uint64, keys []byte) uint64
}

type tableKey struct {
	l   *Layout // the caller's layout, as identity
	sig string  // the content of the layout its heads copied (shape.shareSig)
	d   Domain
}

// prefixTable holds the cached blocks of one layout in one domain, by the
// hash of their chain.
type prefixTable struct {
	key     tableKey
	typ     string
	buckets map[uint64][]*prefixEntry
	n       int // entries
	heads   int // live heads that register in it
	// forgets counts the ForgetPrefixes calls that emptied it: an entry
	// added before the last one was forgotten (prefixEntry.epoch).
	forgets int
	// waiting lists the heads with blocks a kernel filled whose events
	// are recorded but not yet seen complete, which adoptions poll
	// (sharedHead).
	waiting []poller
}

// prefixEntry is one cached block of every column: block index depth of
// the chain that parent ends.
type prefixEntry struct {
	tab    *prefixTable
	hash   uint64
	parent *prefixEntry
	keys   []byte   // the key column's bytes in the block
	blks   []*block // per column; the entry holds one reference to each
	key    int      // the key column
	kids   int      // entries whose parent it is
	owner  Owner    // the owner that registered it
	used   uint64   // the pool's use clock when it last joined the free list
	gone   bool     // taken out of the cache (evicted or forgotten)
	// epoch is its table's forgets when it was added: one below the
	// table's now was forgotten, and nothing registers after it (-1 for
	// the entry that stands for a block another chain holds). An entry
	// evicted for room since the last forget is gone but not forgotten:
	// a head whose chain ran through it finds its place again
	// (sharing.fullIf).
	epoch int
	// busy counts e's reasons to stay out of the cache's list of free
	// entries: its blocks a head holds, and the entries after it that are
	// not free. listed says it is in the list, between prev and next.
	busy int
	lruLinks[prefixEntry]
}

func (e *prefixEntry) links() *lruLinks[prefixEntry] { return &e.lruLinks }

// cacheRef is the cache's record of one block it holds a reference to.
type cacheRef struct {
	e *prefixEntry
	// counted: the block's references fell to the cache's own, and it is
	// in the count of the bytes only the cache holds.
	counted bool
}

// entryList is the cache's list of free entries, least recently freed
// first (share_evict.go).
type entryList = lruList[prefixEntry, *prefixEntry]

// lruList is a list of entries linked through their lruLinks, least
// recently used first: the caches' lists of victims, read from the front.
type lruList[E any, P linked[E]] struct {
	front, back P
	n           int
}

// linked is a pointer to an entry of an lruList.
type linked[E any] interface {
	*E
	links() *lruLinks[E]
}

// lruLinks is an entry's place in an lruList: listed says it is in one,
// between prev and next.
type lruLinks[E any] struct {
	prev, next *E
	listed     bool
}

func (l *lruList[E, P]) pushBack(e P) {
	k := e.links()
	k.prev, k.next, k.listed = l.back, nil, true
	if l.back != nil {
		l.back.links().next = e
	} else {
		l.front = e
	}
	l.back = e
	l.n++
}

func (l *lruList[E, P]) remove(e P) {
	k := e.links()
	if !k.listed {
		return
	}
	if k.prev != nil {
		P(k.prev).links().next = k.next
	} else {
		l.front = k.next
	}
	if k.next != nil {
		P(k.next).links().prev = k.prev
	} else {
		l.back = k.prev
	}
	k.prev, k.next, k.listed = nil, nil, false
	l.n--
}

// sharing is a shared head's place in its table.
type sharing struct {
	tab  *prefixTable // nil: the empty domain, or a head made by NewHead
	key  int          // the key column
	ks   int          // bytes of one key
	reg  int          // blocks of the head's version matched to entries
	last *prefixEntry // the entry of block reg-1; nil when reg is 0
	// tail holds the keys of rows [reg*per, known): those appended from
	// the host. Rows past known were written on the device (AppendDevice,
	// AppendAsync); their keys are read back when their blocks are full.
	tail  []byte
	known int
	// waits are the batches of events recorded on the head's recorded
	// streams once rows a kernel wrote filled a block, oldest first; ready
	// is the rows the completed ones cover. broken: a stream that wrote
	// rows failed, so none past reg is registered until the version
	// changes other than by an append.
	waits  []shareWait
	ready  int
	broken bool
}

// shareWait is one event per recorded stream: rows [0, rows) are written
// once each has completed.
type shareWait struct {
	evs  []device.Event
	rows int
}

// groupCache is a pool's cache of registered group states.
type groupCache struct {
	mu     sync.Mutex
	tables map[groupKey]*groupTable
	// waiting lists, per key, the groups with registrations waiting for
	// kernels, which AdoptPrefix polls (group_pending.go).
	waiting map[groupKey][]poller
	seed    maphash.Seed
	// hash, when set, replaces the chain hash (tests make it collide).
	hash func(parent uint64, keys []byte) uint64
	// states lists the entries that hold a state, least recently
	// registered or adopted first: the victims, read from the front.
	states lruList[groupEntry, *groupEntry]
}

// groupTable holds the registered states of the groups of one key (their
// members' layouts, by identity and content, and their domain), as chains
// of entries, one per block of the shared member's rows.
type groupTable struct {
	key     groupKey
	buckets map[uint64][]*groupEntry // by the hash of their chain
	n       int                      // entries
}

// groupKey finds a group's table: its members' tableKeys (shape.shareKey),
// written out in member order, and the domain.
type groupKey struct {
	members string
	d       Domain
}

// groupEntry is one block of a registered prefix: the shared member's keys
// in it, chained to the block before, and, when a group registered its
// state at the block's end, every member's root there. An entry stays in
// its table while it holds a state or other entries follow it, so that a
// state evicted in the middle of a chain leaves the chain whole.
type groupEntry struct {
	tab    *groupTable
	parent *groupEntry
	hash   uint64  // of the keys of every block up to this one's end
	keys   []byte  // the shared member's keys in this block
	rows   int     // the shared member's rows at the block's end
	kids   int     // entries whose parent this one is
	roots  []*root // per member, one reference each; nil: no state registered here
	owner  Owner
	used   uint64
	gone   bool   // out of its table
	typ    string // its Victim.Type, made when it is first a victim
	lruLinks[groupEntry]
}

func (e *groupEntry) links() *lruLinks[groupEntry] { return &e.lruLinks }

// chainHash hashes keys after the chain whose hash is parent, with seed.
func chainHash(seed maphash.Seed, parent uint64, keys []byte) uint64 {
	var mh maphash.Hash
	mh.SetSeed(seed)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], parent)
	mh.Write(b[:])
	mh.Write(keys)
	return mh.Sum64()
}

// groupShare is the place of a group's shared member in its group's
// registrations: the registrations of rows a kernel writes, waiting for
// it (group_pending.go).
type groupShare struct {
	pending []groupPending
}

// groupPending is a registration of a group's state at a device append of
// its shared member that ended at a block boundary: every member's root
// then, one reference each, registered once the rows are written. armed:
// the kernels writing them are queued, and evs (nil: none to wait for)
// complete after them.
type groupPending struct {
	roots   []*root
	streams []device.Stream // recorded on the members when the cut was taken
	armed   bool
	evs     []device.Event
}

// poller is a shared head (sharedHead), or a group, with registrations
// waiting for kernels: poll registers those whose rows are written, if
// the head, or the group's shared member, is free.
type poller interface{ poll() }

// addLocked puts e, new, in its table, after its parent, and records its
// blocks, which the registering head holds: e is not free, and nor is its
// parent any longer. c.mu is held.
func (c *prefixCache) addLocked(e *prefixEntry) {
	t := e.tab
	t.buckets[e.hash] = append(t.buckets[e.hash], e)
	t.n++
	if c.refs == nil {
		c.refs = make(map[*block]cacheRef)
	}
	for _, b := range e.blks {
		c.refs[b] = cacheRef{e: e}
		b.SetHook(c.releaseHookLocked())
	}
	c.held.Add(int64(len(e.blks)))
	e.busy = len(e.blks)
	if e.parent != nil {
		e.parent.kids++
		c.holdLocked(e.parent)
	}
}

// forgetLocked gives up the cache's record of b; the caller releases the
// cache's reference once c.mu is unlocked. c.mu is held.
func (c *prefixCache) forgetLocked(b *block) {
	if r, ok := c.refs[b]; ok {
		if r.counted {
			c.unheld.Add(-int64(b.Bytes()))
		}
		delete(c.refs, b)
		c.held.Add(-1)
	}
	b.SetHook(nil)
}

// holdBlockLocked takes b, a block of e, out of the count of the blocks
// only the cache holds, before a head takes a reference to it. c.mu is
// held.
func (c *prefixCache) holdBlockLocked(e *prefixEntry, b *block) {
	if r := c.refs[b]; r.counted {
		c.refs[b] = cacheRef{e: e}
		c.unheld.Add(-int64(b.Bytes()))
		c.holdLocked(e)
	}
}

// holdLocked adds one reason for e to stay out of the list of free
// entries: a block of its that a head holds, or an entry after it that is
// not free. When e was free, it leaves the list, and so do the free
// entries before it in its chain, which it no longer lets be free. c.mu
// is held.
func (c *prefixCache) holdLocked(e *prefixEntry) {
	for ; e != nil && !e.gone; e = e.parent {
		if e.busy++; e.busy != 1 {
			return
		}
		c.free.remove(e)
	}
}

// releaseHookLocked returns the hook cached blocks carry, made once.
// c.mu is held.
func (c *prefixCache) releaseHookLocked() *blocks.Hook {
	if c.hook == nil {
		h := blocks.Hook(c.settle)
		c.hook = &h
	}
	return c.hook
}

// settle is the cache's part of a block's release, its one entry point
// there: the release hook of a cached block calls it when b's references
// fall to one. When that
// one is the cache's, b joins the count of the blocks only the cache
// holds, and its entry loses a reason to stay out of the list of free
// entries. Only the cache takes a reference to such a block (adopt, under
// mu), so what it finds under mu stays true until it lets go. A block the
// cache holds no reference to is no concern of its: it may be called for
// any block, and takes no lock while the cache holds none.
func (c *prefixCache) settle(b *block) {
	if c.held.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.refs[b]
	if !ok || r.counted || b.Refs() != 1 {
		return
	}
	r.counted = true
	c.refs[b] = r
	c.unheld.Add(int64(b.Bytes()))
	c.freeLocked(r.e)
}

// freeLocked takes away one of e's reasons to stay out of the list; when
// none is left, e joins its back, and so may its parent. c.mu is held.
func (c *prefixCache) freeLocked(e *prefixEntry) {
	for ; e != nil && !e.gone; e = e.parent {
		if e.busy--; e.busy != 0 {
			return
		}
		e.used = c.clock.Add(1)
		c.free.pushBack(e)
	}
}
