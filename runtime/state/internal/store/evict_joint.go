package store

// Optional handles that share their blocks among themselves (two snapshots
// of one version, a head with its snapshot and branch, two cuts at one
// version) each free nothing alone: every one of their blocks is held by
// another of them. Evicted one by one they never go, and the pool would
// answer ErrNoMemory with its memory held by optional state. So the
// eviction lists each such set, those that share a block with one another,
// as one more victim (jointVictims), and takes it by its one path (the
// Evictor's rank, the bytes and runs it frees, busy streams, fences), as
// it takes a group.

// jointMember is an optional victim that may be evicted with others that
// share its blocks.
type jointMember interface {
	evictable
	// lockHeld locks the victim, by try-lock, and returns the roots of
	// its versions in device memory, with how to evict and unlock it;
	// false, with nothing locked, when it is busy or may not go now.
	lockHeld() (heldVictim, bool)
}

// heldVictim is a victim lockHeld locked.
type heldVictim struct {
	v     Victim  // how the Evictor sees it alone
	roots []*root // its versions in device memory
	// alone says evicting it alone would free a block: it is then a
	// victim alone, and no joint set's member (its blocks would be
	// counted twice, alone and in the set).
	alone bool
	// own lists the blocks it holds outside its roots that its eviction
	// frees (an optional head's deltas); nil: none.
	own    func(func(*block))
	evict  func() int64
	unlock func()
}

// jointVictims is a set of optional victims that share blocks with one
// another, each freeing nothing alone, as one victim.
type jointVictims struct{ members []jointMember }

// jointSets returns the sets of the optional victims of live that free
// nothing alone and share a block, each set one victim; none when no two
// do. A victim's blocks are read under its lock, each victim locked in
// turn.
func jointSets(live []evictable) []evictable {
	var cands []jointMember
	u := newBlockUnion()
	for _, x := range live {
		j, ok := x.(jointMember)
		if !ok {
			continue
		}
		h, ok := j.lockHeld()
		if !ok {
			continue
		}
		if !h.alone {
			k := u.add()
			cands = append(cands, j)
			for _, r := range h.roots {
				u.root(r, k)
			}
		}
		h.unlock()
	}
	sets := map[int][]jointMember{}
	for k := range cands {
		sets[u.find(k)] = append(sets[u.find(k)], cands[k])
	}
	var out []evictable
	for k := range cands { // in the candidates' order, each set once
		if m := sets[k]; len(m) > 1 {
			out = append(out, jointVictims{m})
		}
	}
	return out
}

// blockUnion joins holders that share a block: a union-find over them,
// fed each holder's versions in turn (root).
//
// A version shares most of its tree with the versions before it (a
// snapshot of each version of a head shares all but a path), so a walk of
// every block of every version grows with the square of the versions. The
// walk stops instead at a root or node an earlier holder covered whole: a
// node holds the same blocks wherever it is found, so the holder shares
// every block under it with the earlier one. Every block under a covered
// node has its first holder recorded, by the walk that covered it, so a
// holder that reaches one by another path (a copied leaf) joins too.
type blockUnion struct {
	parent []int
	blocks map[*block]int // the first holder of each block
	nodes  map[*node]int  // the first holder that held a node's every index, with a block under it
	roots  map[*root]int  // the first holder of each root with a block
}

func newBlockUnion() *blockUnion {
	return &blockUnion{blocks: map[*block]int{}, nodes: map[*node]int{}, roots: map[*root]int{}}
}

// add returns a new holder.
func (u *blockUnion) add() int {
	u.parent = append(u.parent, len(u.parent))
	return len(u.parent) - 1
}

// find returns the holder that stands for k's set.
func (u *blockUnion) find(k int) int {
	for u.parent[k] != k {
		u.parent[k] = u.parent[u.parent[k]]
		k = u.parent[k]
	}
	return k
}

func (u *blockUnion) join(a, b int) {
	if a, b = u.find(a), u.find(b); a != b {
		u.parent[b] = a
	}
}

// root joins holder k with every holder before it that holds one of r's
// blocks.
func (u *blockUnion) root(r *root, k int) {
	if o, ok := u.roots[r]; ok {
		u.join(o, k)
		return
	}
	found := false
	for c := range r.cols {
		t := &r.cols[c]
		if t.root != nil && t.n > t.lo && u.node(t.root, t.height, 0, t, k) {
			found = true
		}
	}
	if found {
		u.roots[r] = k
	}
}

// node is root's walk of n, of height h, whose first index is base, in
// tree t: only the indices t holds count. It reports whether a block of
// t's is under n.
func (u *blockUnion) node(n *node, h, base int, t *tree, k int) bool {
	span := 1 << (fanBits * h)
	whole := base >= t.lo && base+span <= t.n
	if whole {
		if o, ok := u.nodes[n]; ok {
			u.join(o, k)
			return true
		}
	}
	found := false
	if h == 1 {
		for j, b := range n.blks {
			if i := base + j; b == nil || i < t.lo || i >= t.n {
				continue
			}
			found = true
			if o, ok := u.blocks[b]; ok {
				u.join(o, k)
			} else {
				u.blocks[b] = k
			}
		}
	} else {
		sub := span >> fanBits
		for j, kid := range n.kids {
			if b := base + j*sub; kid != nil && b+sub > t.lo && b < t.n && u.node(kid, h-1, b, t, k) {
				found = true
			}
		}
	}
	if whole && found {
		u.nodes[n] = k
	}
	return found
}

// heldTogether lists, each once, the blocks evicting every optional
// victim of hs that may go with others (a jointMember: heads, snapshots,
// groups, cuts) would free: those they hold among themselves alone. A
// victim frees alone only what it holds alone, so the sum of what each
// frees misses what they share where no joint set covers it (one of them
// holds a block alone too). Each is read under its try-lock, all held
// until the blocks are listed; a busy one is left out, and what it holds
// with the others with it. skip leaves out others (nil: none).
func heldTogether(hs []evictable, skip func(evictable) bool, f func(*block)) {
	var held []heldVictim
	defer func() { unlockHeld(held) }()
	for _, x := range hs {
		j, ok := x.(jointMember)
		if !ok || (skip != nil && skip(x)) {
			continue
		}
		if h, ok := j.lockHeld(); ok {
			held = append(held, h)
		}
	}
	freedLocked(held, f)
}

// lockAll locks every member, or none.
func (x jointVictims) lockAll() ([]heldVictim, bool) {
	held := make([]heldVictim, 0, len(x.members))
	for _, m := range x.members {
		h, ok := m.lockHeld()
		if !ok {
			for _, h := range held {
				h.unlock()
			}
			return nil, false
		}
		held = append(held, h)
	}
	return held, true
}

// freedLocked lists, each once, the blocks evicting every member held
// would free.
func freedLocked(held []heldVictim, f func(*block)) {
	var roots []*root
	for _, h := range held {
		roots = append(roots, h.roots...)
	}
	onlyBlocks(roots, f)
	for _, h := range held {
		if h.own != nil {
			h.own(f)
		}
	}
}

// victim describes the set when evicting it frees a block: the bytes it
// frees, its members' latest use.
func (x jointVictims) victim(r Retention) (Victim, bool) {
	if r != Optional {
		return Victim{}, false
	}
	held, ok := x.lockAll()
	if !ok {
		return Victim{}, false
	}
	defer unlockHeld(held)
	v := Victim{Owner: held[0].v.Owner, Type: held[0].v.Type, Snapshot: held[0].v.Snapshot}
	freedLocked(held, func(b *block) { v.Bytes += int64(b.Bytes()) })
	if v.Bytes == 0 {
		return Victim{}, false
	}
	for _, h := range held {
		v.LastUse = max(v.LastUse, h.v.LastUse)
	}
	return v, true
}

// evict evicts every member, or none; none when that frees no block.
func (x jointVictims) evict() (int64, bool) {
	held, ok := x.lockAll()
	if !ok {
		return 0, false
	}
	defer unlockHeld(held)
	frees := false
	freedLocked(held, func(*block) { frees = true })
	if !frees {
		return 0, false
	}
	var n int64
	for _, h := range held {
		n += h.evict()
	}
	return n, true
}

// exclusiveBlocks lists the blocks evicting the set would free.
func (x jointVictims) exclusiveBlocks(f func(*block)) {
	held, ok := x.lockAll()
	if !ok {
		return
	}
	defer unlockHeld(held)
	freedLocked(held, f)
}

// freeable returns the bytes evicting the set would free now.
func (x jointVictims) freeable() int64 { return sumBytes(x) }

// unlockHeld unlocks the victims lockAll locked.
func unlockHeld(held []heldVictim) {
	for _, h := range held {
		h.unlock()
	}
}

// lockHeld locks the head: an optional one, not a group's member (its
// group is the victim).
func (x headVictim) lockHeld() (heldVictim, bool) {
	h := x.Head
	if h.group.Load() != nil || h.l.Retention != Optional || !h.mu.TryLock() {
		return heldVictim{}, false
	}
	if !h.lru.evictableLocked(h) {
		h.mu.Unlock()
		return heldVictim{}, false
	}
	v := Victim{Owner: string(h.owner), Type: h.l.Type, LastUse: h.lru.lastUse.Load()}
	held := heldVictim{v: v, roots: x.rootsLocked(), alone: x.freesAloneLocked(), evict: func() int64 { return h.lru.evictLocked(h) }, unlock: h.mu.Unlock}
	if len(held.roots) > 1 {
		held.own = x.deltaBlocksLocked
	}
	return held, true
}

// lockHeld locks the snapshot: an optional one with no block table.
func (x snapVictim) lockHeld() (heldVictim, bool) {
	s := x.Snap
	if s.l.Retention != Optional || !s.mu.TryLock() {
		return heldVictim{}, false
	}
	if !x.evictableLocked() {
		s.mu.Unlock()
		return heldVictim{}, false
	}
	v := Victim{Owner: string(s.owner), Type: s.l.Type, Snapshot: true, LastUse: s.lastUse.Load()}
	return heldVictim{v: v, roots: []*root{s.r}, alone: holdsAlone(s.r), evict: x.evictLocked, unlock: s.mu.Unlock}, true
}

// lockHeld locks every member of an optional group, or none; a member in
// the host tier holds no version in device memory.
func (x groupVictims) lockHeld() (heldVictim, bool) {
	locked, ok := x.lockAll()
	if !ok || locked[0].l.Retention != Optional { // members agree on retention
		unlockHeads(locked)
		return heldVictim{}, false
	}
	v := Victim{Owner: string(x.g.owner), Type: x.g.victimType}
	var roots []*root
	var members []headVictim // in device memory
	alone := false
	for _, h := range locked {
		if tierHeld(h) {
			continue // the group's, dropped with it (groupVictims)
		}
		if !h.lru.evictableLocked(h) {
			unlockHeads(locked)
			return heldVictim{}, false
		}
		m := headVictim{h}
		roots, members = append(roots, m.rootsLocked()...), append(members, m)
		alone = alone || m.freesAloneLocked()
		v.LastUse = max(v.LastUse, h.lru.lastUse.Load())
	}
	if len(roots) == 0 {
		unlockHeads(locked)
		return heldVictim{}, false
	}
	own := func(f func(*block)) {
		for _, m := range members {
			if m.hist != nil {
				m.deltaBlocksLocked(f) // an optional head's history goes with it
			}
		}
	}
	return heldVictim{v: v, roots: roots, alone: alone, own: own, evict: x.evictLocked, unlock: func() { unlockHeads(locked) }}, true
}

// lockHeld locks the members of an optional cut; its versions are those
// of its members in device memory.
func (x cutVictims) lockHeld() (heldVictim, bool) {
	live, ok := x.lockLive()
	if !ok {
		return heldVictim{}, false
	}
	on := onDevice(live)
	if len(on) == 0 || live[0].l.Retention != Optional {
		unlockAll(live)
		return heldVictim{}, false
	}
	v := Victim{Owner: string(x.c.owner), Type: x.c.typ, Snapshot: true}
	roots := make([]*root, len(on))
	for i, s := range on {
		roots[i] = s.r
		v.LastUse = max(v.LastUse, s.lastUse.Load())
	}
	alone := false
	for _, r := range roots {
		alone = alone || holdsAlone(r)
	}
	return heldVictim{v: v, roots: roots, alone: alone, evict: func() int64 { return x.dropHeld(live) }, unlock: func() { unlockAll(live) }}, true
}
