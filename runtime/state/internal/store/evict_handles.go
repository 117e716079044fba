package store

import "fmt"

// A live head or snapshot as a victim of the eviction, each alone; and
// what a head keeps for eviction and its rebuild (lruPart).

// headVictim is a live head as an evictable (handleVictims); a group's
// members are evicted with their group (groupVictims). The tier takes the
// head it wraps (handleOf). What the head keeps for eviction, and what
// its rebuild and the tier ask of it, is its lruPart's.
type headVictim struct{ *Head }

// victim describes the head when it may be evicted now.
func (x headVictim) victim(r Retention) (Victim, bool) {
	h := x.Head
	if h.l.Retention != r || (r != Optional && r != Reconstructable) {
		return Victim{}, false
	}
	if !h.mu.TryLock() {
		return Victim{}, false
	}
	defer h.mu.Unlock()
	if h.released || h.evicted || h.r == nil || (r == Reconstructable && !h.lru.rebuildable(h)) {
		return Victim{}, false
	}
	return Victim{Owner: string(h.owner), Type: h.l.Type, Bytes: h.physical(h.r), LastUse: h.lru.lastUse.Load()}, true
}

// evict evicts the head, unless it is busy or every block is shared.
func (x headVictim) evict() (int64, bool) {
	h := x.Head
	if h.group.Load() != nil {
		return 0, false // a member goes with its group (groupVictims)
	}
	if !h.mu.TryLock() {
		return 0, false
	}
	defer h.mu.Unlock()
	if !h.lru.evictableLocked(h) || !x.freesLocked() {
		return 0, false // every block is shared: evicting frees nothing
	}
	return h.lru.evictLocked(h), true
}

// freesLocked reports whether evicting the head would free a block.
// h.mu is held.
func (x headVictim) freesLocked() bool {
	frees := false
	x.exclusiveLocked(func(*block) { frees = true })
	return frees
}

// freeable returns the bytes evicting the head would free now; 0 when it
// is busy.
func (x headVictim) freeable() int64 { return sumBytes(x) }

// exclusiveBlocks lists the blocks evicting the head would free
// (exclusiveLocked); none while it is busy.
func (x headVictim) exclusiveBlocks(f func(*block)) {
	h := x.Head
	if !h.mu.TryLock() {
		return
	}
	defer h.mu.Unlock()
	x.exclusiveLocked(f)
}

// exclusiveLocked lists the blocks evicting the head would free: those
// only its version holds; for an optional head, whose history goes with
// it, those only its version and its checkpoints hold, each once
// (onlyBlocks: a checkpoint of the version holds its root, so that the
// version alone holds nothing), and its deltas' own. h.mu is held.
func (x headVictim) exclusiveLocked(f func(*block)) {
	h := x.Head
	if h.released || h.evicted || h.r == nil {
		return
	}
	roots := x.rootsLocked()
	onlyBlocks(roots, f)
	if len(roots) > 1 {
		x.deltaBlocksLocked(f)
	}
}

// deltaBlocksLocked lists the blocks only the deltas of the head's history
// hold, which an optional head's eviction frees with its checkpoints.
// h.mu is held.
func (x headVictim) deltaBlocksLocked(f func(*block)) {
	for _, e := range x.hist.entries {
		if e.d == nil {
			continue
		}
		for _, col := range e.d.cols {
			for _, b := range col {
				if b.Refs() == 1 {
					f(b)
				}
			}
		}
	}
}

// freesAloneLocked reports whether evicting the head alone would free a
// block, stopping at the first where it can: a head with no history to
// drop holds one alone. h.mu is held.
func (x headVictim) freesAloneLocked() bool {
	if roots := x.rootsLocked(); len(roots) == 1 {
		return holdsAlone(roots[0])
	}
	return x.freesLocked()
}

// rootsLocked returns the roots evicting the head drops: its version's,
// and an optional head's checkpoints. h.mu is held.
func (x headVictim) rootsLocked() []*root {
	h := x.Head
	if h.l.Retention != Optional || h.hist == nil {
		return []*root{h.r}
	}
	return append([]*root{h.r}, h.hist.roots()...)
}

// rebuildable reports whether h's history can rebuild its version from a
// checkpoint and deltas, with no write waiting to be recorded. h.mu is
// held.
func (*lruPart) rebuildable(h *Head) bool {
	if h.hist == nil || h.hist.pending != nil {
		return false
	}
	_, _, ok := h.lru.rebuildPath(h)
	return ok
}

// rebuildPath returns the entries q (a checkpoint) and t (h's version)
// that rebuild h's version, the nearest checkpoint first.
func (*lruPart) rebuildPath(h *Head) (q, t int, ok bool) {
	x := h.hist
	t = x.find(h.pos.v)
	if t < 0 {
		return 0, 0, false
	}
	for q = t; q >= 0; q-- {
		if x.entries[q].cp != nil {
			return q, t, true
		}
		if x.entries[q].d == nil {
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// evictableLocked reports whether h may be evicted now: live, in device
// memory, and optional or rebuildable. h.mu is held.
func (*lruPart) evictableLocked(h *Head) bool {
	if h.released || h.evicted || h.r == nil {
		return false
	}
	return h.l.Retention == Optional || h.lru.rebuildable(h)
}

// evictLocked drops h's version (and an optional head's history) and
// returns the bytes that reached no reference. h.mu is held, and
// evictableLocked said yes.
func (*lruPart) evictLocked(h *Head) int64 {
	optional := h.l.Retention == Optional
	h.tables.gone(errEvictedTable)
	var freed []*block
	h.r.release(&freed)
	h.r = nil
	if optional && h.hist != nil {
		h.hist.releaseAll(&freed)
		h.hist = nil
		h.parts.set(h)
	}
	h.evicted = true
	h.pool.free(freed)
	awayLogical(h)
	return blockBytes(freed)
}

// errEvictedTable is what a table of an evicted head holds until the head
// is rebuilt: a kernel given its entries would read blocks eviction freed.
var errEvictedTable = fmt.Errorf("state: block table: the head was evicted: %w", ErrEvicted)

// snapVictim is a live snapshot as an evictable (handleVictims): only an
// optional one may be evicted, and not one with a block table. It embeds
// the snapshot, as headVictim does the head.
type snapVictim struct{ *Snap }

// tabled reports whether s has a block table: its blocks stay where the
// table points, which never changes, as kernels may read through it at
// any time; neither the eviction nor the host tier takes them.
func tabled(s *Snap) bool {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	return len(s.tables) > 0
}

// evictableLocked reports whether the snapshot holds a version in device
// memory that eviction may take. s.mu is held.
func (x snapVictim) evictableLocked() bool {
	s := x.Snap
	return !s.released && !s.evicted && s.r != nil && !tabled(s)
}

// victim describes the snapshot when it may be evicted now.
func (x snapVictim) victim(r Retention) (Victim, bool) {
	s := x.Snap
	if r != Optional || s.l.Retention != Optional {
		return Victim{}, false
	}
	if !s.mu.TryLock() {
		return Victim{}, false
	}
	defer s.mu.Unlock()
	if !x.evictableLocked() {
		return Victim{}, false
	}
	return Victim{Owner: string(s.owner), Type: s.l.Type, Snapshot: true, Bytes: s.physical(s.r), LastUse: s.lastUse.Load()}, true
}

// evict drops the snapshot's version, unless it is busy or every block is
// shared.
func (x snapVictim) evict() (int64, bool) {
	s := x.Snap
	if !s.mu.TryLock() {
		return 0, false
	}
	defer s.mu.Unlock()
	if !x.evictableLocked() || exclusiveBytes(s.r) == 0 {
		return 0, false
	}
	return x.evictLocked(), true
}

// evictLocked drops the snapshot's version and returns the bytes of the
// blocks that reached no reference. s.mu is held.
func (x snapVictim) evictLocked() int64 {
	s := x.Snap
	var freed []*block
	s.r.release(&freed)
	s.r = nil
	s.evicted = true
	s.pool.free(freed)
	s.pool.addLogical(s.gate, -s.logical)
	s.logical = 0
	return blockBytes(freed)
}

// freeable returns the bytes evicting the snapshot would free now; 0 when
// it is busy.
func (x snapVictim) freeable() int64 { return sumBytes(x) }

// exclusiveBlocks lists the blocks only the snapshot holds.
func (x snapVictim) exclusiveBlocks(f func(*block)) {
	s := x.Snap
	if !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	if !x.evictableLocked() {
		return
	}
	exclusiveBlocks(s.r, f)
}

// handleOf returns the head or snapshot victim x wraps, which the tier
// moves (tierOf); x itself for any other victim (a group's).
func handleOf(x evictable) any {
	switch v := x.(type) {
	case headVictim:
		return v.Head
	case snapVictim:
		return v.Snap
	}
	return x
}

// sumBytes is the bytes of the blocks x lists (exclusiveBlocks).
func sumBytes(x exclusiveLister) int64 {
	var n int64
	x.exclusiveBlocks(func(b *block) { n += int64(b.Bytes()) })
	return n
}

// exclusiveLister is a victim that lists the blocks evicting it would free
// now: those it alone holds. It lists none while it is busy.
type exclusiveLister interface {
	exclusiveBlocks(f func(*block))
}
