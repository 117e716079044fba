package store

import (
	"iter"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// The persistent structure of a version. A root holds, per column, a radix
// tree of block references with fan-out 32; every node and every block is
// reference counted (a node or block is shared by as many parents as point
// to it, a root by as many handles as hold it). Shared nodes are never
// changed: a writer first makes its path from the root unique, copying each
// shared node on the way (path copying, as persistent vectors do), and
// changes only nodes that it alone reaches. A snapshot is therefore one
// increment of the root's count, whatever the state's size.

const (
	fanBits = 5
	fan     = 1 << fanBits
)

// maxRowCols is the most columns the short write path takes (write_row.go)
// and release orders row by row; a wider layout takes the general path,
// and its freed blocks stay column by column.
const maxRowCols = 8

// node is a tree node: interior nodes hold kids, leaves hold blocks.
type node struct {
	rc   atomic.Int32
	kids []*node
	blks []*block
}

// tree is one column's blocks: n blocks at indices [0, n), under a root of
// the given height (1: the root is a leaf).
type tree struct {
	root   *node
	height int
	n      int
	lo     int // blocks below lo were dropped (expired rows of a window)
}

// root is a version: its rows and, per column, its tree.
type root struct {
	rc   atomic.Int32
	rows int
	cols []tree
	// inline holds cols for up to rootInline columns, so that a root is
	// one allocation: a write after a snapshot makes one (own).
	inline [rootInline]tree
}

// rootInline is the columns a root holds without an allocation of its
// own: most layouts have no more.
const rootInline = 3

// blocks counts the block references of r (shared blocks included).
func (r *root) blocks() int64 {
	var n int64
	for _, t := range r.cols {
		n += int64(t.n - t.lo)
	}
	return n
}

// unique reports whether r is held once: its holder may change it.
func (r *root) unique() bool { return r.rc.Load() == 1 }

// get returns block i of t.
func (t *tree) get(i int) *block {
	n := t.root
	for h := t.height; h > 1; h-- {
		n = n.kids[(i>>(fanBits*(h-1)))&(fan-1)]
	}
	return n.blks[i&(fan-1)]
}

// writable reports whether block i of t may be written in place by a head
// of owner: every node on its path and the block itself are held once
// (t's root alone reaches it), and the block is owner's. This is the one
// rule every write path asks (plan, the row and bulk appends, the
// rebuilds of history and replay): a block another owner's blocks were
// carved for (one adopted from a prefix cache, or from a group's
// registered state, that the cache let go of) is copied on write instead,
// even when nothing else holds it, since a block goes back to its owner's
// free list unzeroed (docs/INTERNALS.md, "The store's map").
func (t *tree) writable(i int, owner string) bool {
	n := t.root
	for h := t.height; h > 1; h-- {
		if n.rc.Load() != 1 {
			return false
		}
		n = n.kids[(i>>(fanBits*(h-1)))&(fan-1)]
	}
	b := n.blks[i&(fan-1)]
	return n.rc.Load() == 1 && b.Refs() == 1 && b.Owner() == owner
}

// appendsInPlace reports whether an append may write bytes [from, to) of
// block i of t in place although other versions hold the block too (a
// snapshot, a branch, a checkpoint of the rows before): from is where
// the appending version's rows in the block end, and the block's fill
// (the bytes any holder wrote) ends there too, so no version reads the
// bytes it writes; it claims them (Block.ClaimFill). The block must be
// owner's, as writable asks. It is the other half of the rule for writing
// in place: writable says when a block is the writer's alone, this when
// an append only adds to a block others share.
func (t *tree) appendsInPlace(i int, owner string, from, to int) bool {
	b := t.get(i)
	return b.Owner() == owner && b.ClaimFill(from, to)
}

// capacity returns the number of blocks a tree of height h can hold.
func capacity(h int) int {
	if h == 0 {
		return 0
	}
	if fanBits*h >= 62 {
		return maxInt
	}
	return 1 << (fanBits * h)
}

// set puts b at index i (i <= t.n) of t, which belongs to a unique root,
// copying the shared nodes on the path. The block that was at i, if any,
// loses t's reference; it is appended to freed when no reference is left.
// set takes over the caller's reference to b.
func (t *tree) set(i int, b *block, freed *[]*block) { t.setWith(i, b, freed, false) }

// setNew is set with the nodes it copies or adds made new, none reused:
// a reconstruction's, as the cost model prices them (Pool.calibrate).
func (t *tree) setNew(i int, b *block, freed *[]*block) { t.setWith(i, b, freed, true) }

func (t *tree) setWith(i int, b *block, freed *[]*block, fresh bool) {
	slot := t.leafSlotWith(i, freed, fresh)
	if *slot == nil {
		*slot = newLeafWith(fresh)
	} else {
		*slot = ownWith(*slot, freed, fresh)
	}
	(*slot).put(t, i, b, freed)
}

// appendBlocks puts bs at indices [t.n, t.n+len(bs)) of t, which belongs
// to a unique root, as set would one at a time, but a leaf at a time: the
// slots past t.n are empty. It takes over the caller's references to bs.
func (t *tree) appendBlocks(bs []*block, freed *[]*block) {
	for len(bs) > 0 {
		i := t.n
		slot := t.leafSlot(i, freed)
		if *slot == nil {
			*slot = newLeaf()
		} else {
			*slot = own(*slot, freed)
		}
		leaf := (*slot).blks[i&(fan-1):]
		k := min(len(leaf), len(bs))
		for j, b := range bs[:k] {
			leaf[j] = b
		}
		t.n += k
		bs = bs[k:]
	}
}

// setLeaf puts the fan blocks bs at indices [i, i+fan) of t, i a multiple
// of fan, as set would one at a time, but in a new leaf: when another
// version shares the old leaf, its blocks are not each retained by a copy
// and released again as they are replaced (two atomic operations on every
// block of a state that copy on write replaces whole). The old leaf loses
// t's reference; its blocks left without references are appended to freed.
func (t *tree) setLeaf(i int, bs *[fan]*block, freed *[]*block) {
	slot := t.leafSlot(i, freed)
	old, leaf := *slot, newLeaf()
	copy(leaf.blks, bs[:])
	for k := range bs {
		if old == nil || old.blks[k] == nil {
			t.n++
		}
	}
	*slot = leaf
	if old != nil {
		releaseNode(old, freed)
	}
}

// leafSlot returns where t keeps the leaf of index i, after growing t to
// reach i and making the interior nodes on the path t's alone; the leaf
// there, which may be nil, is left as it is.
func (t *tree) leafSlot(i int, freed *[]*block) **node { return t.leafSlotWith(i, freed, false) }

// leafSlotWith is leafSlot with the nodes it adds or copies made new when
// fresh.
func (t *tree) leafSlotWith(i int, freed *[]*block, fresh bool) **node {
	if t.root == nil {
		// An empty tree takes i's height at once: grown a level at a
		// time, each empty root would stay under the next as its first
		// child, below every block the tree holds (a window's tree rebuilt
		// from its floor up, tier.go).
		t.height = 1
		for i >= capacity(t.height) {
			t.height++
		}
	}
	for i >= capacity(t.height) {
		up := newInteriorWith(fresh)
		up.kids[0] = t.root // the tree's reference moves to up
		t.root = up
		t.height++
	}
	slot := &t.root
	for h := t.height; h > 1; h-- {
		n := *slot
		if n == nil {
			n = newInteriorWith(fresh)
		} else {
			n = ownWith(n, freed, fresh)
		}
		*slot = n
		slot = &n.kids[(i>>(fanBits*(h-1)))&(fan-1)]
	}
	return slot
}

// A node and its slots are one allocation (leafNode, interiorNode), and
// a node whose last reference is dropped is emptied and kept for the next
// one made (leaves, interiors): a decode step that starts a leaf every 32
// rows, and a bulk append's leaves, then allocate nothing once a head's
// release has given its nodes back, and start no collection.
var leaves, interiors sync.Pool

// leafNode is a leaf and its slots, made in one allocation.
type leafNode struct {
	node
	slots [fan]*block
}

// interiorNode is an interior node and its slots, made in one allocation.
type interiorNode struct {
	node
	slots [fan]*node
}

// newInteriorWith returns an empty interior node with one reference,
// made new when fresh, else a kept one where there is one.
func newInteriorWith(fresh bool) *node {
	var n *node
	if !fresh {
		n, _ = interiors.Get().(*node)
	}
	if n == nil {
		in := &interiorNode{}
		in.kids = in.slots[:]
		n = &in.node
	}
	n.rc.Store(1)
	return n
}

// newLeaf returns an empty leaf with one reference.
func newLeaf() *node { return newLeafWith(false) }

// newLeafWith is newLeaf, made new when fresh.
func newLeafWith(fresh bool) *node {
	var n *node
	if !fresh {
		n, _ = leaves.Get().(*node)
	}
	if n == nil {
		l := &leafNode{}
		l.blks = l.slots[:]
		n = &l.node
	}
	n.rc.Store(1)
	return n
}

// recycle empties n, whose last reference was dropped, and keeps it for
// newLeafWith or newInteriorWith: nothing reaches a node but through a counted
// reference.
func recycle(n *node) {
	if n.kids != nil {
		clear(n.kids)
		interiors.Put(n)
		return
	}
	clear(n.blks)
	leaves.Put(n)
}

// own returns n itself when its holder holds it alone, else a copy that
// the holder holds alone (taking references to n's children), giving up the
// holder's reference to n.
func own(n *node, freed *[]*block) *node { return ownWith(n, freed, false) }

// ownWith is own, its copy made new when fresh.
func ownWith(n *node, freed *[]*block, fresh bool) *node {
	if n.rc.Load() == 1 {
		return n
	}
	var c *node
	if n.kids != nil {
		c = newInteriorWith(fresh)
		copy(c.kids, n.kids)
		for _, k := range c.kids {
			if k != nil {
				k.rc.Add(1)
			}
		}
	} else {
		c = newLeafWith(fresh)
		copy(c.blks, n.blks)
		for _, b := range c.blks {
			if b != nil {
				b.Retain()
			}
		}
	}
	releaseNode(n, freed)
	return c
}

// releaseNode drops one reference to n; the last one releases its children
// and appends the blocks left without references to freed.
func releaseNode(n *node, freed *[]*block) {
	if n.rc.Add(-1) != 0 {
		return
	}
	for _, k := range n.kids {
		if k != nil {
			releaseNode(k, freed)
		}
	}
	for _, b := range n.blks {
		if b != nil {
			releaseBlock(b, freed)
		}
	}
	recycle(n)
}

// firstDiff returns the first block index, below both trees' ends, at
// which a and b hold different blocks (the lesser end when none), walking
// only the subtrees they do not share: a rollback or merge to a version
// of the same line finds where the two part in a path or two. A tree that
// grew taller keeps its old root as its first subtree, so the taller one
// is compared from its first subtree of the other's height. It is 0,
// anywhere, when their expired ends differ.
func firstDiff(a, b *tree) int {
	if a.lo != b.lo {
		return 0
	}
	n := min(a.n, b.n)
	if n == 0 {
		return 0
	}
	x, y := a.root, b.root
	for h := a.height; h > b.height && x != nil; h-- {
		x = x.kids[0]
	}
	for h := b.height; h > a.height && y != nil; h-- {
		y = y.kids[0]
	}
	return diffNodes(x, y, min(a.height, b.height), 0, n)
}

// diffNodes is firstDiff below nodes x and y of the given height, whose
// first block is base; n when they hold the same blocks below n.
func diffNodes(x, y *node, height, base, n int) int {
	switch {
	case base >= n || x == y:
		return n
	case x == nil || y == nil:
		return base
	case height == 1:
		for i := range min(fan, n-base) {
			if x.blks[i] != y.blks[i] {
				return base + i
			}
		}
		return n
	}
	span := 1 << (fanBits * (height - 1))
	for i := range fan {
		if d := diffNodes(x.kids[i], y.kids[i], height-1, base+i*span, n); d < n {
			return d
		}
	}
	return n
}

// unshared reports whether n, a node of the given height, and its first
// subtree are held by one reference each: a hint (the counts may change
// meanwhile) that releasing n frees its blocks, where a tree that shares
// its older subtrees with another (path copying) frees one path.
func unshared(n *node, height int) bool {
	if n.rc.Load() != 1 {
		return false
	}
	if height > 1 {
		for _, k := range n.kids {
			if k != nil {
				return k.rc.Load() == 1
			}
		}
	}
	return true
}

// releaseBlock drops one reference to b, appending it to freed when it
// was the last; a block left with one reference tells its release hook
// (the prefix cache's, which may hold it alone now).
func releaseBlock(b *block, freed *[]*block) {
	if b.Release() {
		*freed = append(*freed, b)
	}
}

// retain takes one more reference to r.
func (r *root) retain() *root {
	r.rc.Add(1)
	return r
}

// byRow reorders the blocks of *list from cuts[0] on, which are the blocks
// of one column after another (column c's in [cuts[c], cuts[c+1])), so that
// they take turns: the first of each column, then the second, and so on,
// each column's in its own order. A column that holds fewer blocks (wider
// blocks, or blocks shared and so not freed) drops out when it runs out.
func byRow(list *[]*block, cuts []int) {
	from, to := cuts[0], cuts[len(cuts)-1]
	if to-from < 2 {
		return
	}
	l := *list
	for k := 0; len(l) < to+(to-from); k++ { // the turns, appended past to
		for c := range len(cuts) - 1 {
			if i := cuts[c] + k; i < cuts[c+1] {
				l = append(l, l[i])
			}
		}
	}
	copy(l[from:to], l[to:])
	clear(l[to:])
	*list = l[:to]
}

// blockBytes sums the sizes of blocks.
func blockBytes(list []*block) int64 { return blocks.Bytes(list) }

// exclusiveBytes is the bytes of the blocks of r that only r holds: those
// its release would free.
func exclusiveBytes(r *root) int64 {
	var n int64
	exclusiveBlocks(r, func(b *block) { n += int64(b.Bytes()) })
	return n
}

// onlyBlocks calls f once with each block that only the references refs
// reach: refs lists one reference to a root per holder (a root held twice
// through them is listed twice), and a block is theirs when every root,
// node and block on each of its paths is held through them alone. This is
// the one count of what dropping a set of holders frees, for holders that
// share nodes and blocks among themselves (a group's registered states
// along one chain share their prefix and their members' unchanged roots):
// each block is counted once, whoever of them holds it, where summing
// each holder's exclusiveBlocks would count the shared ones nowhere.
// A node's height (1 for a leaf) never changes, and a node is reached
// only from roots' trees of its height or from nodes one higher, so the
// references to every node are counted before it is judged.
func onlyBlocks(refs []*root, f func(*block)) {
	if len(refs) == 1 {
		exclusiveBlocks(refs[0], f)
		return
	}
	held := make(map[*root]int32, len(refs))
	for _, r := range refs {
		held[r]++
	}
	nodes := map[*node]int32{}
	var byHeight [][]*node
	reach := func(n *node, h int) {
		if nodes[n] == 0 {
			for len(byHeight) <= h {
				byHeight = append(byHeight, nil)
			}
			byHeight[h] = append(byHeight[h], n)
		}
		nodes[n]++
	}
	for r, k := range held {
		if r.rc.Load() != k {
			continue // held elsewhere too
		}
		for _, t := range r.cols {
			if t.root != nil {
				reach(t.root, t.height)
			}
		}
	}
	blks := map[*block]int32{}
	for h := len(byHeight) - 1; h >= 1; h-- {
		for _, n := range byHeight[h] {
			if n.rc.Load() != nodes[n] {
				continue
			}
			for _, k := range n.kids {
				if k != nil {
					reach(k, h-1)
				}
			}
			for _, b := range n.blks {
				if b != nil {
					blks[b]++
				}
			}
		}
	}
	for b, k := range blks {
		if b.Refs() == k {
			f(b)
		}
	}
}

// exclusiveBlocks calls f with each block of r that only r holds.
func exclusiveBlocks(r *root, f func(*block)) {
	exclusiveWalk(r, func(b *block) bool { f(b); return true })
}

// holdsAlone reports whether r holds a block alone, one exclusiveBlocks
// would list; it stops at the first.
func holdsAlone(r *root) bool {
	found := false
	exclusiveWalk(r, func(*block) bool { found = true; return false })
	return found
}

// exclusiveWalk calls f with each block of r that only r holds, until f
// returns false; it reports whether f never did.
func exclusiveWalk(r *root, f func(*block) bool) bool {
	if r == nil || r.rc.Load() != 1 {
		return true
	}
	for _, t := range r.cols {
		if t.root != nil && !exclusiveNodeWalk(t.root, f) {
			return false
		}
	}
	return true
}

func exclusiveNodeWalk(n *node, f func(*block) bool) bool {
	if n.rc.Load() != 1 {
		return true
	}
	for _, k := range n.kids {
		if k != nil && !exclusiveNodeWalk(k, f) {
			return false
		}
	}
	for _, b := range n.blks {
		if b != nil && b.Refs() == 1 && !f(b) {
			return false
		}
	}
	return true
}

// held returns block i of t, or nil when t holds none there: below lo
// (expired, its subtree perhaps pruned) or past the end. Walks over every
// block of a tree use it, so that a window's dropped blocks are skipped.
func (t *tree) held(i int) *block {
	if i < t.lo || i >= t.n {
		return nil
	}
	if leaf := t.leafAt(i); leaf != nil {
		return leaf.blks[i&(fan-1)]
	}
	return nil
}

// heldIn yields the blocks t holds at indices [lo, hi), in order, a leaf
// at a time: the indices expired or never set are skipped.
func (t *tree) heldIn(lo, hi int) iter.Seq[*block] {
	return func(yield func(*block) bool) {
		for i := max(lo, t.lo); i < min(hi, t.n); {
			end := min(hi, t.n, (i|(fan-1))+1) // the end of i's leaf
			if leaf := t.leafAt(i); leaf != nil {
				for _, b := range leaf.blks[i&(fan-1) : (end-1)&(fan-1)+1] {
					if b != nil && !yield(b) {
						return
					}
				}
			}
			i = end
		}
	}
}

// leafAt returns the leaf of t that holds index i, nil when the path to
// it was dropped.
func (t *tree) leafAt(i int) *node {
	n := t.root
	for h := t.height; h > 1 && n != nil; h-- {
		n = n.kids[(i>>(fanBits*(h-1)))&(fan-1)]
	}
	return n
}

// drop releases t's references to blocks [t.lo, hi), in a tree of a root
// its holder holds alone: shared nodes on the way are copied first, so
// other versions keep their blocks. Subtrees left empty are removed.
func (t *tree) drop(hi int, freed *[]*block) {
	hi = min(hi, t.n)
	if hi <= t.lo || t.root == nil {
		return
	}
	t.root = own(t.root, freed)
	dropRange(t.root, t.height, 0, t.lo, hi, freed)
	t.lo = hi
}

// dropRange drops blocks [lo, hi) under n, a node of height h that its
// parent holds alone and whose first block is base, and reports whether n
// is left empty. It visits only the slots that reach [lo, hi): a window
// drops a block a column every few appends, and a walk of every slot of
// the path cost an append more than its copy. The slots before them hold
// nothing, as every block below a tree's lo was dropped when lo passed
// it, so n is empty when the slots after them hold nothing either.
func dropRange(n *node, h, base, lo, hi int, freed *[]*block) bool {
	span := 1
	if h > 1 {
		span = capacity(h - 1)
	}
	first, end := max(lo-base, 0)/span, min((hi-base+span-1)/span, fan)
	if h == 1 {
		for k := first; k < end; k++ {
			if b := n.blks[k]; b != nil {
				releaseBlock(b, freed)
				n.blks[k] = nil
			}
		}
		for _, b := range n.blks[end:] {
			if b != nil {
				return false
			}
		}
		return true
	}
	empty := true
	for k := first; k < end; k++ {
		c, kb := n.kids[k], base+k*span
		switch {
		case c == nil:
		case kb >= lo && kb+span <= hi:
			releaseNode(c, freed)
			n.kids[k] = nil
		default:
			c = own(c, freed)
			n.kids[k] = c
			if dropRange(c, h-1, kb, lo, hi, freed) {
				releaseNode(c, freed)
				n.kids[k] = nil
			}
		}
		empty = empty && n.kids[k] == nil
	}
	for _, c := range n.kids[end:] {
		if c != nil {
			return false
		}
	}
	return empty
}

const maxInt = int(^uint(0) >> 1)

// block and sizeClass are the allocator's (package internal/blocks).
type (
	block     = blocks.Block
	sizeClass = blocks.Class
)

// put sets slot i of leaf n of t to b, as set does once the path is t's.
func (n *node) put(t *tree, i int, b *block, freed *[]*block) {
	k := i & (fan - 1)
	if old := n.blks[k]; old != nil {
		releaseBlock(old, freed)
	} else {
		t.n++
	}
	n.blks[k] = b
}
