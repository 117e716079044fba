package state

import (
	"fmt"
	"slices"
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
// whole states, not blocks. They are optional retention: under memory
// pressure the Evictor ranks them with the other optional state (Victim
// Cached), and PoolStats.CachedBytes counts the blocks only they hold.
// ForgetPrefixes forgets a domain's. The shared member is made by NewHead,
// not NewSharedHead, so that its own AdoptPrefix adopts nothing: a member
// that adopted its rows alone would leave the others behind.
//
// Lock order: a member's mu (the group's members by try-lock only), then
// the group cache's mu, then the pool's mu.

// NewSharedGroup is NewGroup in a sharing domain: it registers the
// members' states at the shared member's block boundaries and adopts
// registered ones (Group.AdoptPrefix). A group of the empty domain, or
// without a member whose layout has a ShareKey, shares nothing.
//
//state:acquire
func NewSharedGroup(p *Pool, owner Owner, domain Domain, layouts ...*Layout) (*Group, error) {
	g, err := NewGroup(p, owner, layouts...)
	if err != nil {
		return nil, err
	}
	if domain != "" && g.shared >= 0 {
		g.domain = domain
		g.layouts = slices.Clone(layouts)
	}
	return g, nil
}

// table returns the group table of g's layouts and domain, making it when
// create is set; nil when none. c.mu is held.
func (c *groupCache) table(g *Group, create bool) *groupTable {
	for _, t := range c.tables {
		if t.domain == g.domain && slices.Equal(t.layouts, g.layouts) {
			return t
		}
	}
	if !create {
		return nil
	}
	t := &groupTable{layouts: g.layouts, domain: g.domain, entries: make(map[string]*groupEntry)}
	c.tables = append(c.tables, t)
	return t
}

// appended is the hook of Head.Append on a member h of a group: when h is
// the shared member and its rows end at a block boundary, the group
// registers every member's state. h.mu is held; the other members are
// taken by try-lock, so that no lock is awaited out of order.
func (g *Group) appended(h *Head) {
	if g.domain == "" || g.shared < 0 || g.heads[g.shared] != h || h.r == nil {
		return
	}
	per, rows := h.perBlock[0], h.r.rows
	if rows == 0 || rows%per != 0 {
		return
	}
	key := h.l.shareColumn()
	keys := make([]byte, rows*h.l.Columns[key].ElemSize)
	if err := h.copyColumn(h.r, key, 0, rows, keys); err != nil {
		return // a cache: the block goes unregistered
	}
	roots := make([]*root, len(g.heads))
	var locked []*Head
	defer func() {
		for _, m := range locked {
			m.mu.Unlock()
		}
	}()
	for i, m := range g.heads {
		if m != h {
			if !m.mu.TryLock() {
				return
			}
			locked = append(locked, m)
		}
		if m.released || m.evicted || m.invalid.Load() || m.r == nil || len(m.async.inflight) > 0 {
			return
		}
		roots[i] = m.r
	}
	c := &g.pool.groups
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.table(g, true)
	if e := t.entries[string(keys)]; e != nil && !e.gone {
		e.used = g.pool.clock.Add(1)
		return
	}
	for _, r := range roots {
		r.retain()
	}
	t.entries[string(keys)] = &groupEntry{tab: t, keys: string(keys), rows: rows, roots: roots, owner: g.owner, used: g.pool.clock.Add(1)}
}

// AdoptPrefix gives the members of a group whose shared member is empty
// the states registered at the longest prefix of keys (the key column's
// values of the shared member, as bytes) that a group of the same layouts
// and domain registered, each as a new version, and returns the rows of
// the shared member adopted: a multiple of its block's rows. The caller
// computes only the rest. A group whose shared member has rows answers
// ErrRange; one of the empty domain, or made by NewGroup, adopts nothing.
// Every member moves, or none.
//
//state:appends
func (g *Group) AdoptPrefix(keys []byte) (int, error) {
	if g == nil {
		return 0, g.begin("AdoptPrefix", nil, nil)
	}
	if err := g.begin("AdoptPrefix", g.order, nil); err != nil {
		return 0, err
	}
	defer g.end(g.order, nil)
	if g.shared < 0 {
		return 0, g.errorf("AdoptPrefix", "no member's layout has a ShareKey: %w", ErrShape)
	}
	h := g.heads[g.shared]
	ks := h.l.Columns[h.l.shareColumn()].ElemSize
	if len(keys)%ks != 0 {
		return 0, g.errorf("AdoptPrefix", "%d bytes of keys, not a multiple of the key's %d bytes: %w", len(keys), ks, ErrShape)
	}
	if h.r.rows != 0 {
		return 0, g.errorf("AdoptPrefix", "member %s has %d rows; a prefix is adopted by an empty group: %w", h.l.Type, h.r.rows, ErrRange)
	}
	if g.domain == "" {
		return 0, nil
	}
	e := g.pool.groups.lookup(g, keys, h.perBlock[0]*ks)
	if e == nil {
		return 0, nil
	}
	for i, m := range g.heads {
		var freed []*block
		m.r.release(&freed)
		m.r = e.roots[i] // lookup took a reference for each member
		m.commitVersion()
		m.pool.free(freed)
		m.committed(written{to: m.r.rows})
	}
	return e.rows, nil
}

// lookup returns the entry of g's table at the longest prefix of keys, in
// blocks of blockKeys bytes, taking one reference to each of its roots for
// the caller; nil when none.
func (c *groupCache) lookup(g *Group, keys []byte, blockKeys int) *groupEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.table(g, false)
	if t == nil {
		return nil
	}
	for n := len(keys) / blockKeys; n > 0; n-- {
		e := t.entries[string(keys[:n*blockKeys])]
		if e == nil || e.gone {
			continue
		}
		e.used = g.pool.clock.Add(1)
		for _, r := range e.roots {
			r.retain()
		}
		return e
	}
	return nil
}

// dropLocked takes e out of its table and gives back the blocks only it
// held; c.mu is held. It returns the blocks to free.
func (e *groupEntry) dropLocked(freed *[]*block) {
	if e.gone {
		return
	}
	e.gone = true
	delete(e.tab.entries, e.keys)
	for _, r := range e.roots {
		r.release(freed)
	}
	e.roots = nil
}

// cachedBytes is the bytes of the blocks only registered states hold.
func (c *groupCache) cachedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, t := range c.tables {
		for _, e := range t.entries {
			for _, r := range e.roots {
				n += exclusiveBytes(r)
			}
		}
	}
	return n
}

// forget drops the registered states of domain d; Pool.ForgetPrefixes
// calls it. It returns the blocks to free.
func (c *groupCache) forget(d Domain) []*block {
	c.mu.Lock()
	defer c.mu.Unlock()
	var freed []*block
	c.tables = slices.DeleteFunc(c.tables, func(t *groupTable) bool {
		if t.domain != d {
			return false
		}
		for _, e := range t.entries {
			e.dropLocked(&freed)
		}
		return true
	})
	return freed
}

// victims lists the registered states as optional victims.
func (c *groupCache) victims(p *Pool) []evictable {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []evictable
	for _, t := range c.tables {
		for _, e := range t.entries {
			var bytes int64
			for _, r := range e.roots {
				bytes += exclusiveBytes(r)
			}
			if bytes == 0 {
				continue // every block is held elsewhere too: evicting frees nothing
			}
			out = append(out, groupVictim{p: p, e: e, v: Victim{
				Owner: string(e.owner), Type: fmt.Sprintf("group state at %d rows", e.rows), Cached: true, Bytes: bytes, LastUse: e.used,
			}})
		}
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

// freeable returns the bytes evicting the registered state frees, as
// listed: the pool counts them before it decides eviction can make room.
func (x groupVictim) freeable() int64 { return x.v.Bytes }

// exclusiveBlocks lists the blocks only the registered state holds.
func (x groupVictim) exclusiveBlocks(f func(*block)) {
	c := &x.p.groups
	c.mu.Lock()
	defer c.mu.Unlock()
	if x.e.gone {
		return
	}
	for _, r := range x.e.roots {
		exclusiveBlocks(r, f)
	}
}

func (x groupVictim) evict() (int64, bool) {
	c := &x.p.groups
	c.mu.Lock()
	if x.e.gone {
		c.mu.Unlock()
		return 0, false
	}
	var freed []*block
	x.e.dropLocked(&freed)
	c.mu.Unlock()
	x.p.free(freed)
	return blockBytes(freed), len(freed) > 0
}

// reset forgets every registered state; Pool.Close calls it, as it frees
// every slab.
func (c *groupCache) reset() {
	c.mu.Lock()
	c.tables = nil
	c.mu.Unlock()
}
