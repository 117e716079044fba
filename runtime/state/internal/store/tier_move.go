package store

import "errors"

// Moves between device memory and the host tier (tier.go): heads
// (tierHead), snapshots (tierSnap) and groups. A handle in the tier is
// evicted (its root is nil) and holds its image; its calls bring it back
// first, its metadata (Len, Version, Bound, Stats) answers from the image.

// tierableLocked reports whether the tier may take the head now, and
// lists the blocks its image copies: an optional head, or a
// reconstructable one its history can rebuild (evictableLocked), in
// device memory, with no prefix sharing, no copy in flight, no delta
// waiting to be recorded, and no rows a kernel may still be writing
// (deviceRows: the spans are the caller's until its next call, and a copy
// now would keep what they held before). A head without a history must
// hold every block and node alone (wholly); one that keeps a history is
// copied whole, the blocks its checkpoints share included, and each of
// them must be held by the head and its history alone
// (historyBlocksLocked). h.mu is held.
func (x tierHead) tierableLocked() ([]*block, bool) {
	h := x.h
	if h.pool.tier == nil || (h.l.Retention != Optional && h.l.Retention != Reconstructable) || !h.lru.evictableLocked(h) {
		return nil, false
	}
	if h.share != nil || h.gshare != nil || h.deviceRows {
		return nil, false
	}
	if len(h.async.inflight) > 0 {
		h.async.landDone()
	}
	if len(h.async.inflight) > 0 && (!h.async.onlyTier() || !h.async.landClean()) {
		return nil, false // copies in flight, other than the tier's own back, or failed
	}
	if h.hist == nil {
		return wholly(h.r, nil)
	}
	if h.hist.pending != nil {
		return nil, false // a kernel's rows not yet in the history
	}
	blks, ok := x.historyBlocksLocked()
	if !ok || !h.pool.tier.idle(blks, h.pool.pendingWait) {
		return nil, false
	}
	return blks, true
}

// historyBlocksLocked lists every block of the head's root, column after
// column, in block order, when each is held by the head and its history's
// checkpoints alone (onlyBlocks): a block a snapshot, a branch or a cache
// holds too stays, and so does the head. h.mu is held.
func (x tierHead) historyBlocksLocked() ([]*block, bool) {
	h := x.h
	blks, ok := rootBlocks(h.r, nil)
	if !ok {
		return nil, false
	}
	theirs := make(map[*block]bool, len(blks))
	onlyBlocks(append([]*root{h.r}, h.hist.roots()...), func(b *block) { theirs[b] = true })
	for _, b := range blks {
		if !theirs[b] {
			return nil, false
		}
	}
	return blks, true
}

// freesLocked reports whether the move frees device memory: an optional
// head's blocks go with its history, a reconstructable head's only where
// its checkpoints do not hold them too. h.mu is held.
func (x tierHead) freesLocked() bool {
	h := x.h
	return h.l.Retention == Optional || exclusiveBytes(h.r) > 0
}

// moveOut moves the head to the tier (tierMover).
func (x tierHead) moveOut() (int64, bool, error) {
	h := x.h
	if h.group.Load() != nil {
		return 0, false, nil // a member moves with its group
	}
	if !h.mu.TryLock() {
		return 0, false, nil
	}
	defer h.mu.Unlock()
	blks, ok := x.tierableLocked()
	if !ok || len(blks) == 0 || !x.freesLocked() {
		return 0, false, nil
	}
	img, moved, err := h.pool.tier.saveRoot(h.pool, h.r, blks, h.owner, nil)
	if !moved {
		return 0, false, err
	}
	return x.commitLocked(img), true, nil
}

// commitLocked frees the head's device blocks once img holds them, and
// returns their bytes: those no one else holds (a reconstructable head's
// checkpoints keep theirs). An optional head's history goes as eviction
// drops it (lruPart.evictLocked); img keeps its version's commit order,
// for the history it comes back with. h.mu is held.
func (x tierHead) commitLocked(img *tierImage) int64 {
	h := x.h
	// The tables stand for blocks freed now: Column brings the head back
	// before it answers again (BlockTable's refresh).
	h.tables.gone(errInTier)
	var freed []*block
	h.r.release(&freed)
	if h.hist != nil {
		if t := h.hist.find(h.pos.v); t >= 0 {
			img.seq = h.hist.entries[t].seq
		}
		if h.l.Retention == Optional {
			h.hist.releaseAll(&freed)
			h.hist = nil
			h.parts.set(h)
		}
	}
	h.r, h.evicted, h.tier = nil, true, img
	h.pool.free(freed)
	h.pool.tier.out.Add(img.bytes)
	return blockBytes(freed)
}

// errInTier is what a table of a head in the host tier holds until the
// head comes back.
var errInTier = errors.New("state: block table: the head is in the host tier")

// bringBackLocked gives the head its version back from the tier; an error
// leaves it there. A group's other members come back with it, those whose
// lock is free now (a member busy with a call brings itself back). h.mu is
// held.
func (x tierHead) bringBackLocked(op string) error {
	h := x.h
	r, st, landed, err := h.pool.tier.back(&h.shape, h.tier, false)
	if err != nil {
		return h.errorf(op, "bringing version %d back from the host tier: %w", h.pos.v, err)
	}
	seq := h.tier.seq
	h.r, h.evicted, h.tier = r, false, nil
	if h.hist == nil && h.l.Checkpoint != nil {
		// An optional head's history went with the move: a new one
		// starts at the version it comes back with, a checkpoint of it.
		h.hist = newHistory(h.l.Checkpoint, h.pos, r, &h.pool.gate.shards[h.gate].history, &h.pool.steps[h.gate])
		h.hist.entries[0].seq = seq
		h.parts.set(h)
	}
	h.moved()
	if landed != nil {
		// Calls wait for the copies, or order their stream after them,
		// as they do for an AppendAsync's.
		h.async.join(h)
		h.async.inFlight(st, landed)
		h.async.inflight[len(h.async.inflight)-1].tier = true
	}
	if g := h.group.Load(); g != nil {
		for _, m := range g.heads {
			if m == h || !m.mu.TryLock() {
				continue
			}
			if m.tier != nil && !m.released {
				_ = tierHead{m}.bringBackLocked(op) // it stays in the tier: its own call answers
			}
			m.mu.Unlock()
		}
	}
	return nil
}

// inTier describes the head for the tier's Evictor (tierVictim); a
// group's first member by id describes the group.
func (x tierHead) inTier() (Victim, bool) {
	h := x.h
	if g := h.group.Load(); g != nil {
		if h != g.order[0] {
			return Victim{}, false
		}
		return groupVictims{g}.inTier()
	}
	if !h.mu.TryLock() {
		return Victim{}, false
	}
	defer h.mu.Unlock()
	if h.tier == nil || h.released {
		return Victim{}, false
	}
	return Victim{Owner: string(h.owner), Type: h.l.Type, Bytes: h.tier.bytes, LastUse: h.lru.lastUse.Load()}, true
}

// dropTier drops the head's image, a group's first member by id every
// member's: the head is evicted as it would have been without a tier
// (tierVictim).
func (x tierHead) dropTier() (int64, bool) {
	h := x.h
	if g := h.group.Load(); g != nil {
		if h != g.order[0] {
			return 0, false
		}
		return groupVictims{g}.dropTier()
	}
	if !h.mu.TryLock() {
		return 0, false
	}
	defer h.mu.Unlock()
	return x.dropLocked()
}

// dropLocked drops the head's image and returns its bytes. h.mu is held.
func (x tierHead) dropLocked() (int64, bool) {
	n, ok := x.h.pool.tier.dropHead(x.h)
	if ok {
		awayLogical(x.h)
	}
	return n, ok
}

// moveOut moves the snapshot to the tier (tierMover).
func (x tierSnap) moveOut() (int64, bool, error) {
	s := x.s
	if !s.mu.TryLock() {
		return 0, false, nil
	}
	defer s.mu.Unlock()
	blks, ok := x.tierableLocked()
	if !ok || len(blks) == 0 {
		return 0, false, nil // nothing to move
	}
	img, moved, err := s.pool.tier.saveRoot(s.pool, s.r, blks, s.owner, nil)
	if !moved {
		return 0, false, err
	}
	return x.commitLocked(img), true, nil
}

// tierableLocked returns the blocks the tier would copy of the snapshot,
// every one of them its alone (none for a snapshot of no rows); false when
// the tier does not take it. s.mu is held.
func (x tierSnap) tierableLocked() ([]*block, bool) {
	s := x.s
	if s.pool.tier == nil || s.l.Retention != Optional || s.released || s.evicted || s.r == nil {
		return nil, false
	}
	if tabled(s) {
		return nil, false
	}
	return wholly(s.r, nil)
}

// commitLocked makes img, the copy of the snapshot's version, its version
// in the tier, frees its device blocks and returns their bytes. s.mu is
// held.
func (x tierSnap) commitLocked(img *tierImage) int64 {
	s := x.s
	var freed []*block
	s.r.release(&freed)
	s.r, s.evicted, s.tier = nil, true, img
	s.pool.free(freed)
	s.pool.tier.out.Add(img.bytes)
	return blockBytes(freed)
}

// inTier describes the snapshot for the tier's Evictor (tierVictim); a
// cut's first member describes the cut.
func (x tierSnap) inTier() (Victim, bool) {
	s := x.s
	if c := s.cut; c != nil {
		return cutVictims{c}.inTier(s)
	}
	if !s.mu.TryLock() {
		return Victim{}, false
	}
	defer s.mu.Unlock()
	if s.tier == nil || s.released {
		return Victim{}, false
	}
	return Victim{Owner: string(s.owner), Type: s.l.Type, Snapshot: true, Bytes: s.tier.bytes, LastUse: s.lastUse.Load()}, true
}

// dropTier drops the snapshot's image (tierVictim); a cut's member drops
// the cut's.
func (x tierSnap) dropTier() (int64, bool) {
	s := x.s
	if c := s.cut; c != nil {
		return cutVictims{c}.dropTier()
	}
	if !s.mu.TryLock() {
		return 0, false
	}
	defer s.mu.Unlock()
	return s.pool.tier.dropSnap(s)
}

// moveOut moves every member of the group to the tier, or none
// (tierMover): each is locked by try-lock in id order and checked, every
// copy is made, and only then are the device blocks freed.
func (x groupVictims) moveOut() (int64, bool, error) {
	locked, ok := x.lockAll()
	defer unlockHeads(locked)
	if !ok {
		return 0, false, nil
	}
	var heads []*Head // those in device memory: the others are in the tier already
	var roots []*root
	var lists [][]*block
	// A group of members that keep histories may free nothing (their
	// checkpoints hold every block): it stays, as eviction leaves it.
	frees, hist := false, false
	for _, h := range x.g.heads {
		if tierHeld(h) {
			continue
		}
		b, ok := tierHead{h}.tierableLocked()
		if !ok {
			return 0, false, nil
		}
		heads, roots, lists = append(heads, h), append(roots, h.r), append(lists, b)
		hist = hist || h.hist != nil
		frees = frees || (len(b) > 0 && tierHead{h}.freesLocked())
	}
	if len(heads) == 0 || (hist && !frees) {
		return 0, false, nil
	}
	skip := func(v tierVictim) bool { th, ok := v.(tierHead); return ok && th.h.group.Load() == x.g }
	p := x.g.heads[0].pool
	imgs, moved, err := p.tier.saveAll(p, roots, lists, x.g.owner, skip)
	if !moved {
		return 0, false, err
	}
	var n int64
	for i, h := range heads {
		n += tierHead{h}.commitLocked(imgs[i])
	}
	return n, true, nil
}

// inTier describes the group when a member is in the tier, by their
// bytes there.
func (x groupVictims) inTier() (Victim, bool) {
	locked, ok := x.lockAll()
	defer unlockHeads(locked)
	if !ok {
		return Victim{}, false
	}
	v := Victim{Owner: string(x.g.owner), Type: x.g.victimType}
	in := false
	for _, h := range locked {
		if tierHeld(h) {
			v.Bytes += h.tier.bytes
			v.LastUse = max(v.LastUse, h.lru.lastUse.Load())
			in = true
		}
	}
	return v, in
}

// dropTier drops the group (dropLocked): every member's image, and the
// version of those in device memory, counted as evicted here. It returns
// the bytes dropped from the tier.
func (x groupVictims) dropTier() (int64, bool) {
	locked, ok := x.lockAll()
	defer unlockHeads(locked)
	if !ok {
		return 0, false
	}
	in := false
	for _, h := range locked {
		if tierHeld(h) {
			in = true
		} else if !h.released && !h.evicted && !h.lru.evictableLocked(h) {
			return 0, false
		}
	}
	if !in {
		return 0, false
	}
	device, tier := x.dropLocked()
	x.g.heads[0].pool.evictedBytes.Add(device)
	return tier, true
}

// prepare brings a head back from the host tier, rebuilds an evicted
// reconstructable head (or fails the call with ErrEvicted or
// ErrNotRetained), then stamps the pool's use clock for
// the Evictor.
func (lp *lruPart) prepare(h *Head, c call) error {
	if h.evicted {
		rebuild := func(op string) error { return h.hist.rebuild(h, op) }
		if h.tier != nil {
			rebuild = tierHead{h}.bringBackLocked
		}
		if err := rebuild(c.op); err != nil {
			return err
		}
		// The async part, joined by the return, may come after this one
		// in the hooks' order only from the next call.
		if c.land && len(h.async.inflight) > 0 {
			if err := h.async.land(); err != nil {
				return h.errorf(c.op, "rows brought back from the host tier: %w", err)
			}
		}
	}
	h.pool.touch(&lp.lastUse)
	return nil
}

// moveOut moves the members of the cut in device memory to the tier, or
// none (tierMover), as groupVictims.moveOut moves a group's: a member that
// shares a block, with its head or another snapshot, makes the cut stay,
// for the eviction to drop whole, as the tier takes no state that shares.
// (Leaving such a member where it is would pin the blocks it shares: two
// cuts whose members share them would each free nothing alone, and
// neither would ever go.) A member of no rows holds no block, and stays.
func (x cutVictims) moveOut() (int64, bool, error) {
	all, ok := x.lockLive()
	if !ok {
		return 0, false, nil
	}
	defer unlockAll(all)
	var live []*Snap
	var roots []*root
	var blks [][]*block
	for _, s := range onDevice(all) {
		b, ok := (tierSnap{s}).tierableLocked()
		switch {
		case !ok:
			return 0, false, nil
		case len(b) > 0:
			live, roots, blks = append(live, s), append(roots, s.r), append(blks, b)
		}
	}
	if len(live) == 0 {
		return 0, false, nil
	}
	skip := func(v tierVictim) bool { ts, ok := v.(tierSnap); return ok && ts.s.cut == x.c }
	p := live[0].pool
	imgs, moved, err := p.tier.saveAll(p, roots, blks, x.c.owner, skip)
	if !moved {
		return 0, false, err
	}
	var n int64
	for i, s := range live {
		n += tierSnap{s}.commitLocked(imgs[i])
	}
	return n, true, nil
}

// inTierLocked returns the members of live, locked, in the tier.
func inTierLocked(live []*Snap) []*Snap {
	var in []*Snap
	for _, s := range live {
		if s.tier != nil {
			in = append(in, s)
		}
	}
	return in
}

// inTier describes the cut when some of its members are in the tier, by
// their bytes there, for its first member not released, as: the tier
// lists the cut once.
func (x cutVictims) inTier(as *Snap) (Victim, bool) {
	live, ok := x.lockLive()
	if !ok {
		return Victim{}, false
	}
	defer unlockAll(live)
	in := inTierLocked(live)
	if live[0] != as || len(in) == 0 {
		return Victim{}, false
	}
	v := Victim{Owner: string(x.c.owner), Type: x.c.typ, Snapshot: true}
	for _, s := range in {
		v.Bytes += s.tier.bytes
		v.LastUse = max(v.LastUse, s.lastUse.Load())
	}
	return v, true
}

// dropTier drops the cut (dropCutLocked): the members' images, and the
// version of those that stayed in device memory (moveOut) or came back
// alone. It returns the bytes dropped from the tier.
func (x cutVictims) dropTier() (int64, bool) {
	live, ok := x.lockLive()
	if !ok {
		return 0, false
	}
	defer unlockAll(live)
	if len(inTierLocked(live)) == 0 {
		return 0, false
	}
	device, tier := dropCutLocked(live)
	live[0].pool.evictedBytes.Add(device)
	return tier, true
}
