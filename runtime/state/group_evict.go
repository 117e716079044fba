package state

// A coupled group under memory pressure: one victim. Its members agree on
// retention (package contract checks it), and evicting one while keeping
// its partner would leave the group inconsistent, so the pool lists a
// group, not its member heads (Pool.handleVictims), the Evictor ranks it
// by its members' bytes and most recent use, and its members are evicted
// together or not at all.

// groupVictims is a live group as an evictable.
type groupVictims struct{ g *Group }

// victim describes the group when every member may be evicted now.
func (x groupVictims) victim(r Retention) (Victim, bool) {
	v := Victim{Owner: string(x.g.owner), Type: x.g.victimType}
	for _, h := range x.g.heads {
		m, ok := h.victim(r)
		if !ok {
			return Victim{}, false
		}
		v.Bytes += m.Bytes
		v.LastUse = max(v.LastUse, m.LastUse)
	}
	return v, true
}

// evict evicts every member, or none: each is locked (by try-lock, in id
// order) and checked first. It evicts nothing when no member would free
// a block.
func (x groupVictims) evict() (int64, bool) {
	var locked []*Head
	defer func() {
		for _, h := range locked {
			h.mu.Unlock()
		}
	}()
	frees := false
	for _, h := range x.g.order {
		if !h.mu.TryLock() {
			return 0, false
		}
		locked = append(locked, h)
		if !h.evictableLocked() {
			return 0, false
		}
		frees = frees || exclusiveBytes(h.r) > 0
	}
	if !frees {
		return 0, false
	}
	var n int64
	for _, h := range x.g.heads {
		n += h.evictLocked()
	}
	return n, true
}

// exclusiveBlocks lists the blocks evicting the group would free.
func (x groupVictims) exclusiveBlocks(f func(*block)) {
	for _, h := range x.g.heads {
		h.exclusiveBlocks(f)
	}
}

// freeable returns the bytes evicting the group would free now.
func (x groupVictims) freeable() int64 { return sumBytes(x) }
