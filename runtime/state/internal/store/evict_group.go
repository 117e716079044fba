package store

// Victims of more than one handle, evicted together or not at all: a
// coupled group's heads, and a group's cut's snapshots.

// A coupled group under memory pressure: one victim. Its members agree on
// retention (package contract checks it), and evicting one while keeping
// its partner would leave the group inconsistent, so the pool lists a
// group, not its member heads (eviction.handleVictims), the Evictor ranks it
// by its members' bytes and most recent use, and its members are evicted
// together or not at all.

// groupVictims is a live group as an evictable.
//
// A member may be in the host tier while the others are in device memory:
// one that stayed there when another came back (Head.bringBackLocked
// brings them back together, but a member may find no room). It is still
// the group's: the group is a victim of its members in device memory,
// which the tier takes to join it (moveOut) or the eviction drops with
// its image (evict, dropTier), as a cut split so is (cutVictims). Left
// out, the members in device memory would hold their blocks until the
// other's own call brought it back, which the same pressure refuses.
type groupVictims struct{ g *Group }

// tierHeld reports whether h, locked, is in the host tier.
func tierHeld(h *Head) bool { return h.tier != nil && !h.released }

// victim describes the group when every member in device memory may be
// evicted now, and one is.
func (x groupVictims) victim(r Retention) (Victim, bool) {
	v := Victim{Owner: string(x.g.owner), Type: x.g.victimType}
	on := false
	for _, h := range x.g.heads {
		if h.l.Retention == r && h.mu.TryLock() {
			in := tierHeld(h)
			h.mu.Unlock()
			if in {
				continue
			}
		}
		m, ok := headVictim{h}.victim(r)
		if !ok {
			return Victim{}, false
		}
		v.Bytes += m.Bytes
		v.LastUse = max(v.LastUse, m.LastUse)
		on = true
	}
	return v, on
}

// evict evicts every member, or none: each is locked (by try-lock, in id
// order) and checked first; a member in the tier has its image dropped
// (dropLocked). It evicts nothing when no member would free a block.
func (x groupVictims) evict() (int64, bool) {
	locked, ok := x.lockAll()
	defer unlockHeads(locked)
	if !ok {
		return 0, false
	}
	frees := false
	for _, h := range locked {
		if tierHeld(h) {
			continue
		}
		if !h.lru.evictableLocked(h) {
			return 0, false
		}
		frees = frees || headVictim{h}.freesLocked()
	}
	if !frees {
		return 0, false
	}
	return x.evictLocked(), true
}

// evictLocked evicts every member, locked, wherever it is (dropLocked),
// counts what it dropped from the tier, and returns the bytes freed in
// device memory.
func (x groupVictims) evictLocked() int64 {
	device, tier := x.dropLocked()
	if tier > 0 {
		p := x.g.heads[0].pool
		p.tier.dropped.Add(tier)
		p.evictedBytes.Add(tier)
	}
	return device
}

// lockAll try-locks every member in id order and returns those it
// locked; false when one is busy.
func (x groupVictims) lockAll() ([]*Head, bool) {
	locked := make([]*Head, 0, len(x.g.order))
	for _, h := range x.g.order {
		if !h.mu.TryLock() {
			return locked, false
		}
		locked = append(locked, h)
	}
	return locked, true
}

// unlockHeads unlocks the heads lockAll locked.
func unlockHeads(locked []*Head) {
	for _, h := range locked {
		h.mu.Unlock()
	}
}

// dropLocked evicts every member, locked, wherever it is: the version of
// those in device memory (lruPart.evictLocked) and the image of those in
// the tier (hostTier.dropHead); one evicted for good stays so. It returns the bytes freed in device
// memory and those dropped from the tier.
func (x groupVictims) dropLocked() (device, tier int64) {
	for _, h := range x.g.heads {
		switch {
		case tierHeld(h):
			m, _ := h.pool.tier.dropHead(h)
			awayLogical(h)
			tier += m
		case h.lru.evictableLocked(h):
			device += h.lru.evictLocked(h)
		}
	}
	return device, tier
}

// exclusiveBlocks lists the blocks evicting the group would free.
func (x groupVictims) exclusiveBlocks(f func(*block)) {
	for _, h := range x.g.heads {
		headVictim{h}.exclusiveBlocks(f)
	}
}

// freeable returns the bytes evicting the group would free now.
func (x groupVictims) freeable() int64 { return sumBytes(x) }

// A group's cut (GroupSnap: Group.SnapshotInto, Group.At) under memory
// pressure: one victim, for the reason a group is. A cut with one member
// evicted can never be rolled back to, yet the others would hold their
// blocks until it is released; and a group's At, whose rebuild of one
// member allocates, would evict the member it rebuilt before. A member
// the caller released on its own is no longer the cut's.

// cutVictims is a cut of optional snapshots as an evictable.
type cutVictims struct{ c *snapCut }

// lockLive try-locks the cut's snapshots that are not released, in the
// cut's order, and returns them locked; ok is false, with none locked,
// when one is busy, none is left, or the cut is still being taken. A cut
// with a member that has a block table is taken by nobody: that member
// stays where its table points (tabled), and the others stay with it.
func (x cutVictims) lockLive() (live []*Snap, ok bool) {
	if !x.c.whole.Load() {
		return nil, false
	}
	for _, s := range x.c.snaps {
		if !s.mu.TryLock() {
			unlockAll(live)
			return nil, false
		}
		if s.released {
			s.mu.Unlock()
			continue
		}
		live = append(live, s)
		if tabled(s) {
			unlockAll(live)
			return nil, false
		}
	}
	if len(live) == 0 {
		return nil, false
	}
	return live, true
}

// unlockAll unlocks the snapshots lockLive locked.
func unlockAll(snaps []*Snap) {
	for _, s := range snaps {
		s.mu.Unlock()
	}
}

// onDevice returns the members of live, locked, whose version is in
// device memory: those that are not are the cut's already (in the tier,
// or evicted: one that stayed there when another came back, for want of
// room), and the cut goes after them.
func onDevice(live []*Snap) []*Snap {
	var on []*Snap
	for _, s := range live {
		if !s.evicted && s.r != nil {
			on = append(on, s)
		}
	}
	return on
}

// victim describes the cut when every member in device memory may be
// evicted now.
func (x cutVictims) victim(r Retention) (Victim, bool) {
	live, ok := x.lockLive()
	if !ok {
		return Victim{}, false
	}
	defer unlockAll(live)
	on := onDevice(live)
	if r != Optional || live[0].l.Retention != Optional || len(on) == 0 {
		return Victim{}, false // a group's members agree on retention
	}
	v := Victim{Owner: string(x.c.owner), Type: x.c.typ, Snapshot: true}
	for _, s := range on {
		v.Bytes += s.physical(s.r)
		v.LastUse = max(v.LastUse, s.lastUse.Load())
	}
	return v, true
}

// evict evicts the cut, or nothing when no member in device memory would
// free a block: every member's version goes (dropCutLocked).
func (x cutVictims) evict() (int64, bool) {
	live, ok := x.lockLive()
	if !ok {
		return 0, false
	}
	defer unlockAll(live)
	frees := false
	for _, s := range onDevice(live) {
		frees = frees || holdsAlone(s.r)
	}
	if !frees {
		return 0, false
	}
	return x.dropHeld(live), true
}

// dropCutLocked drops every member's version of live, locked, wherever it
// is, so that every member answers ErrEvicted: in device memory (as
// snapVictim.evictLocked) and in the host tier (hostTier.dropSnap). It
// returns the bytes freed in device memory and those dropped from the
// tier; the caller counts one of them as its eviction's, and dropCutLocked
// counts the other as evicted (and dropped, from the tier) itself.
func dropCutLocked(live []*Snap) (device, tier int64) {
	for _, s := range live {
		switch {
		case s.tier != nil:
			m, _ := s.pool.tier.dropSnap(s)
			tier += m
		case s.r != nil:
			device += snapVictim{s}.evictLocked()
		}
	}
	return device, tier
}

// dropHeld drops the cut's members of live, locked (dropCutLocked), counts
// what it dropped from the tier, and returns the bytes freed in device
// memory.
func (x cutVictims) dropHeld(live []*Snap) int64 {
	device, tier := dropCutLocked(live)
	if tier > 0 {
		p := live[0].pool
		p.tier.dropped.Add(tier)
		p.evictedBytes.Add(tier)
	}
	return device
}

// exclusiveBlocks lists the blocks evicting the cut would free.
func (x cutVictims) exclusiveBlocks(f func(*block)) {
	live, ok := x.lockLive()
	if !ok {
		return
	}
	defer unlockAll(live)
	for _, s := range onDevice(live) {
		exclusiveBlocks(s.r, f)
	}
}

// freeable returns the bytes evicting the cut would free now.
func (x cutVictims) freeable() int64 { return sumBytes(x) }
