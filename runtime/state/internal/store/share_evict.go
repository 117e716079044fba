package store

import (
	"slices"
)

// Eviction of cached prefix blocks, in O(1) whatever the size of the
// cache, as a paged KV cache's free-block queue works.
//
// An entry is free when no head holds its blocks and every entry after it
// is free too: the cache alone holds its whole subtree. The free entries
// form one list, the least recently freed first, in which every entry
// comes after the entries that follow it in its chain. An entry joins at
// the back when its last reason to stay out goes (its last holder
// releases it, or the last entry after it that was not free becomes free);
// it leaves when a head adopts it again, or when a head registers an
// entry after it. Either way the entries before it in its chain follow:
// they join after it, or leave with it. The front of the list is
// therefore always a leaf, the least recently used block no head holds,
// and evicting it takes no search: its parent, when that was its last
// child, is free already, further along the list, and becomes a victim
// in its turn, after its children. A reclaim round offers the Evictor the
// first maxCachedVictims free entries, in that order; an entry's LastUse
// is the pool's clock when it joined the list.
//
// Per-block state is the cache's own, not the block's: refs finds, from a
// block, the entry that holds it and whether the cache counts it among
// the blocks only it holds (PoolStats.CachedBytes).

// maxCachedVictims bounds the cached entries one reclaim round ranks.
const maxCachedVictims = 64

// victims returns, as victims of optional retention of pool p, the first
// free cached entries: the least recently used, maxCachedVictims at most.
// The list is read from its front, never searched.
func (c *prefixCache) victims(p *Pool) []evictable {
	c.mu.Lock()
	defer c.mu.Unlock()
	xs := make([]cachedEntry, min(c.free.n, maxCachedVictims))
	out := make([]evictable, len(xs))
	e := c.free.front
	for i := range xs {
		xs[i] = cachedEntry{p: p, e: e, used: e.used}
		out[i] = &xs[i]
		e = e.next
	}
	return out
}

// cachedEntry is an entry as the pool's eviction sees it.
type cachedEntry struct {
	p    *Pool
	e    *prefixEntry
	used uint64 // e's as it was when the victims were listed
}

func (x *cachedEntry) victim(Retention) (Victim, bool) {
	e := x.e // owner, table and blocks never change
	return Victim{Owner: string(e.owner), Type: e.tab.typ, Cached: true, Bytes: blockBytes(e.blks), LastUse: x.used}, true
}

// exclusiveBlocks lists the entry's blocks that only the cache holds, none
// once the entry is out of the cache (a concurrent reclaim evicted it, and
// its blocks may be another state's by now).
func (x *cachedEntry) exclusiveBlocks(f func(*block)) {
	c := &x.p.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if x.e.gone {
		return
	}
	for _, b := range x.e.blks {
		if b.Refs() == 1 {
			f(b)
		}
	}
}

// moveOut moves the entry's blocks to the host tier (tierMover), when it
// is still the free leaf it was listed as and the cache alone holds its
// blocks: the entry leaves the cache as drop takes it, and a record of its
// chain's keys finds its blocks in the tier for a later AdoptPrefix. The
// copy runs under the cache's lock, so that no head adopts the entry
// meanwhile.
func (x *cachedEntry) moveOut() (int64, bool, error) {
	p := x.p
	if p.tier == nil {
		return 0, false, nil
	}
	c := &p.cache
	c.mu.Lock()
	e := x.e
	if e.gone || !e.listed || e.kids != 0 || e.used != x.used {
		c.mu.Unlock()
		return 0, false, nil // drop's choice (evict) takes it from here
	}
	for _, b := range e.blks {
		if b.Refs() != 1 {
			c.mu.Unlock()
			return 0, false, nil
		}
	}
	var keys [][]byte
	for a := e; a != nil; a = a.parent {
		keys = append(keys, a.keys)
	}
	slices.Reverse(keys)
	img := &tierImage{owner: e.owner, rows: 0, cols: make([]tierCol, len(e.blks))}
	for i := range img.cols {
		img.cols[i] = tierCol{lo: 0, n: 1}
	}
	img, moved, err := p.tier.save(p, img, e.blks, nil)
	if !moved {
		c.mu.Unlock()
		return 0, false, err
	}
	p.tierPx.add(p.tier, &tierPrefix{tk: e.tab.key, chain: string(slices.Concat(keys...)), key: e.key, owner: e.owner, used: e.used, img: img})
	c.removeLocked(e)
	c.mu.Unlock()
	var freed []*block
	for _, b := range e.blks {
		releaseBlock(b, &freed)
	}
	p.free(freed)
	p.tier.out.Add(img.bytes)
	return blockBytes(freed), true, nil
}

func (x *cachedEntry) evict() (int64, bool) { return x.evictAs(true) }

// evictListed is evict of the entry as it was listed, or of nothing:
// eviction asks it while queued work still uses some victims' blocks,
// which it weighed by the entries it listed (awaitVictimWork), so that
// another entry in this one's place might be one it spared.
func (x *cachedEntry) evictListed() (int64, bool) { return x.evictAs(false) }

func (x *cachedEntry) evictAs(substitute bool) (int64, bool) {
	freed, ok := x.p.cache.drop(x.e, x.used, substitute)
	if !ok {
		return 0, false
	}
	x.p.free(freed)
	return blockBytes(freed), true
}

// drop removes e from the cache when it is still a free leaf, listed at
// used, and returns its blocks, which reached no reference. When e was
// taken since it was listed (a concurrent reclaim evicted it, a head
// adopted it) or is no leaf yet (an Evictor ranked it before its
// children), the slot goes to the front of the list, the least recently
// used free leaf now, where substitute says so: reclaims that run at once
// list the same victims, and the later ones would otherwise find nothing
// left to evict while the cache holds free entries. The cache's
// references are given up after its lock is, as every release of a block
// is.
func (c *prefixCache) drop(e *prefixEntry, used uint64, substitute bool) ([]*block, bool) {
	c.mu.Lock()
	if !e.listed || e.kids != 0 || e.used != used {
		if !substitute {
			c.mu.Unlock()
			return nil, false
		}
		e = c.free.front
	}
	if e == nil || e.kids != 0 {
		c.mu.Unlock()
		return nil, false
	}
	c.removeLocked(e)
	c.mu.Unlock()
	var freed []*block
	for _, b := range e.blks {
		releaseBlock(b, &freed)
	}
	return freed, true
}

// removeLocked takes e, a free leaf, out of its table and the list. Its
// parent's reasons to stay out of the list do not change: e was free.
// c.mu is held.
func (c *prefixCache) removeLocked(e *prefixEntry) {
	t := e.tab
	bucket := t.buckets[e.hash]
	if i := indexOf(bucket, e); i >= 0 {
		bucket[i] = bucket[len(bucket)-1]
		bucket[len(bucket)-1] = nil
		if bucket = bucket[:len(bucket)-1]; len(bucket) == 0 {
			delete(t.buckets, e.hash)
		} else {
			t.buckets[e.hash] = bucket
		}
	}
	t.n--
	c.free.remove(e)
	for _, b := range e.blks {
		c.forgetLocked(b)
	}
	e.gone = true
	if e.parent != nil {
		e.parent.kids--
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

// freeBlocks calls f with the blocks of every free entry that only the
// cache holds: those evicting the whole free list would free.
func (c *prefixCache) freeBlocks(f func(*block)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.free.front; e != nil; e = e.next {
		for _, b := range e.blks {
			if b.Refs() == 1 {
				f(b)
			}
		}
	}
}
