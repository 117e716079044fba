package state

import (
	"container/heap"

	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// Eviction of cached prefix blocks. The cache keeps the set of its leaves,
// the entries no other entry follows, as entries are added and removed, so
// that finding victims costs the leaves, not the cache. A reclaim round
// offers the Evictor at most maxCachedVictims of them that no head holds,
// the least recently used; when they are not enough, the next round
// offers the next ones.

// maxCachedVictims bounds the cached entries one reclaim round ranks.
const maxCachedVictims = 64

// victims returns, as victims of optional retention of pool p, the
// cached entries no head holds and no entry follows: the least recently
// used of them, maxCachedVictims at most.
func (c *prefixCache) victims(p *Pool) []evictable {
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest byUse
	for e := range c.leaves {
		if len(oldest) == maxCachedVictims && e.used >= oldest[0].used {
			continue
		}
		if !e.unheld() {
			continue
		}
		if len(oldest) == maxCachedVictims {
			oldest[0] = e
			heap.Fix(&oldest, 0)
		} else {
			heap.Push(&oldest, e)
		}
	}
	out := make([]evictable, 0, len(oldest))
	for _, e := range oldest {
		out = append(out, cachedEntry{p: p, e: e, v: Victim{
			Owner: string(e.owner), Type: e.tab.typ, Cached: true, Bytes: blockBytes(e.blks), LastUse: e.used,
		}})
	}
	return out
}

// byUse is a heap of entries, the most recently used on top: the
// candidates of victims, of which the top goes first when an older one
// comes.
type byUse []*prefixEntry

func (h byUse) Len() int           { return len(h) }
func (h byUse) Less(i, j int) bool { return h[i].used > h[j].used }
func (h byUse) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byUse) Push(x any)        { *h = append(*h, x.(*prefixEntry)) }
func (h *byUse) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// addLocked puts e, new, in its table and the leaves, after its parent.
func (c *prefixCache) addLocked(e *prefixEntry) {
	t := e.tab
	t.buckets[e.hash] = append(t.buckets[e.hash], e)
	t.byBlock[e.blks[e.key]] = e
	t.n++
	if c.leaves == nil {
		c.leaves = make(map[*prefixEntry]struct{})
	}
	c.leaves[e] = struct{}{}
	if e.parent != nil {
		e.parent.kids++
		delete(c.leaves, e.parent)
	}
}

// unheld reports whether only the cache references e's blocks. The
// cache's mu is held: no head takes a reference to a block only the cache
// holds but through it.
func (e *prefixEntry) unheld() bool {
	for _, b := range e.blks {
		if b.Refs() != 1 {
			return false
		}
	}
	return true
}

// cachedEntry is an entry as the pool's eviction sees it.
type cachedEntry struct {
	p *Pool
	e *prefixEntry
	v Victim // e as it was when the victims were listed
}

func (x cachedEntry) victim(Retention) (Victim, bool) { return x.v, true }

func (x cachedEntry) evict() (int64, bool) {
	freed, ok := x.p.cache.drop(x.e)
	if !ok {
		return 0, false
	}
	x.p.free(freed)
	return blockBytes(freed), true
}

// drop removes e from the cache when it is still a leaf no head holds,
// and returns its blocks, which reached no reference.
func (c *prefixCache) drop(e *prefixEntry) ([]*block, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := e.tab
	bucket := t.buckets[e.hash]
	i := indexOf(bucket, e)
	if i < 0 || e.kids != 0 || !e.unheld() {
		return nil, false
	}
	c.removeLocked(e, i)
	var freed []*block
	for _, b := range e.blks {
		c.forgetLocked(b)
		releaseBlock(b, &freed)
	}
	return freed, true
}

// removeLocked takes e, at index i of its bucket, out of its table.
func (c *prefixCache) removeLocked(e *prefixEntry, i int) {
	t := e.tab
	bucket := t.buckets[e.hash]
	bucket[i] = bucket[len(bucket)-1]
	bucket[len(bucket)-1] = nil
	if bucket = bucket[:len(bucket)-1]; len(bucket) == 0 {
		delete(t.buckets, e.hash)
	} else {
		t.buckets[e.hash] = bucket
	}
	t.n--
	if t.byBlock[e.blks[e.key]] == e {
		delete(t.byBlock, e.blks[e.key])
	}
	e.gone = true
	delete(c.leaves, e)
	if e.parent != nil {
		if e.parent.kids--; e.parent.kids == 0 && !e.parent.gone {
			c.leaves[e.parent] = struct{}{}
		}
	}
	c.dropEmptyLocked(t)
}

func indexOf(list []*prefixEntry, e *prefixEntry) int {
	for i, x := range list {
		if x == e {
			return i
		}
	}
	return -1
}

// cachedBytes is the bytes of the cached blocks no head holds.
func (c *prefixCache) cachedBytes() int64 { return c.unheld.Load() }

// releaseHookLocked returns the hook cached blocks carry, made once.
// c.mu is held.
func (c *prefixCache) releaseHookLocked() *blocks.Hook {
	if c.hook == nil {
		h := blocks.Hook(c.settle)
		c.hook = &h
	}
	return c.hook
}

// settle counts b among the blocks only the cache holds when it is one:
// b's release hook calls it when b's references drop to one. Only the
// cache takes a reference to such a block (adopt, under mu), so the count
// stays exact.
func (c *prefixCache) settle(b *block) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.counted[b]; ok || !b.HasHook(c.hook) || b.Refs() != 1 {
		return
	}
	if c.counted == nil {
		c.counted = make(map[*block]struct{})
	}
	c.counted[b] = struct{}{}
	c.unheld.Add(int64(b.Bytes()))
}

// uncountLocked takes b out of the count of the blocks only the cache
// holds, before a head takes a reference to it. c.mu is held.
func (c *prefixCache) uncountLocked(b *block) {
	if _, ok := c.counted[b]; ok {
		delete(c.counted, b)
		c.unheld.Add(-int64(b.Bytes()))
	}
}

// forgetLocked is uncountLocked for a block the cache gives up. c.mu is
// held.
func (c *prefixCache) forgetLocked(b *block) {
	c.uncountLocked(b)
	b.SetHook(nil)
}
