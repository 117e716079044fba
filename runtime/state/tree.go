package state

import "sync/atomic"

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
}

func newRoot(ncols int) *root {
	r := &root{cols: make([]tree, ncols)}
	r.rc.Store(1)
	return r
}

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

// uniquePath reports whether block i of t is reachable only through t (a
// tree of a unique root): every node on its path and the block itself are
// held once. Only such a block may be written in place.
func (t *tree) uniquePath(i int) bool {
	n := t.root
	for h := t.height; h > 1; h-- {
		if n.rc.Load() != 1 {
			return false
		}
		n = n.kids[(i>>(fanBits*(h-1)))&(fan-1)]
	}
	return n.rc.Load() == 1 && n.blks[i&(fan-1)].Refs() == 1
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
func (t *tree) set(i int, b *block, freed *[]*block) {
	if t.root == nil {
		t.root = &node{blks: make([]*block, fan)}
		t.root.rc.Store(1)
		t.height = 1
	}
	for i >= capacity(t.height) {
		up := &node{kids: make([]*node, fan)}
		up.rc.Store(1)
		up.kids[0] = t.root // the tree's reference moves to up
		t.root = up
		t.height++
	}
	t.root = own(t.root, freed)
	n := t.root
	for h := t.height; h > 1; h-- {
		k := (i >> (fanBits * (h - 1))) & (fan - 1)
		c := n.kids[k]
		if c == nil {
			c = &node{}
			if h-1 > 1 {
				c.kids = make([]*node, fan)
			} else {
				c.blks = make([]*block, fan)
			}
			c.rc.Store(1)
		} else {
			c = own(c, freed)
		}
		n.kids[k] = c
		n = c
	}
	k := i & (fan - 1)
	if old := n.blks[k]; old != nil {
		releaseBlock(old, freed)
	} else {
		t.n++
	}
	n.blks[k] = b
}

// own returns n itself when its holder holds it alone, else a copy that
// the holder holds alone (taking references to n's children), giving up the
// holder's reference to n.
func own(n *node, freed *[]*block) *node {
	if n.rc.Load() == 1 {
		return n
	}
	c := &node{}
	c.rc.Store(1)
	if n.kids != nil {
		c.kids = make([]*node, fan)
		copy(c.kids, n.kids)
		for _, k := range c.kids {
			if k != nil {
				k.rc.Add(1)
			}
		}
	} else {
		c.blks = make([]*block, fan)
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

// release drops one reference to r; the last one releases its trees and
// appends the blocks left without references to freed.
func (r *root) release(freed *[]*block) {
	if r.rc.Add(-1) != 0 {
		return
	}
	for _, t := range r.cols {
		if t.root != nil {
			releaseNode(t.root, freed)
		}
	}
}

// own returns r itself when its holder holds it alone, else a copy (taking
// references to the trees' roots) that the holder holds alone, giving up
// the holder's reference to r.
func (r *root) own(freed *[]*block) *root {
	if r.unique() {
		return r
	}
	c := &root{rows: r.rows, cols: make([]tree, len(r.cols))}
	c.rc.Store(1)
	copy(c.cols, r.cols)
	for _, t := range c.cols {
		if t.root != nil {
			t.root.rc.Add(1)
		}
	}
	r.release(freed)
	return c
}
