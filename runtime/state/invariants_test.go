package state

import (
	"fmt"
)

// checkInvariants walks every live handle of p and checks the structure:
// every reference count equals the references actually held, every tree
// holds exactly the blocks its rows need, the blocks in use are the pool's
// count, and no block is both free and in use. It returns the first
// violation.
func checkInvariants(p *Pool) error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	rootRefs := map[*root]int{}
	var histBlocks []*block
	var shapes = map[*root]shape{}
	for h := range p.live {
		switch x := h.(type) {
		case *Head:
			x.mu.Lock()
			if x.r != nil {
				rootRefs[x.r]++
				shapes[x.r] = x.shape
			}
			if x.hist != nil {
				for _, r := range x.hist.roots() {
					rootRefs[r]++
					shapes[r] = x.shape
				}
				histBlocks = append(histBlocks, x.hist.deltaBlocks()...)
			}
			x.mu.Unlock()
		case *Snap:
			if x.r != nil {
				rootRefs[x.r]++
				shapes[x.r] = x.shape
			}
		}
	}
	nodeRefs := map[*node]int{}
	blockRefs := map[*block]int{}
	var walk func(n *node, seen map[*node]bool)
	seen := map[*node]bool{}
	walk = func(n *node, seen map[*node]bool) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, k := range n.kids {
			if k != nil {
				nodeRefs[k]++
				walk(k, seen)
			}
		}
		for _, b := range n.blks {
			if b != nil {
				blockRefs[b]++
			}
		}
	}
	for r, refs := range rootRefs {
		if got := int(r.rc.Load()); got != refs {
			return fmt.Errorf("root with %d rows has count %d, %d references", r.rows, got, refs)
		}
		sh := shapes[r]
		for c, t := range r.cols {
			per := sh.perBlock[c]
			if want := (r.rows + per - 1) / per; t.n != want {
				return fmt.Errorf("column %d of a root with %d rows holds %d blocks, want %d", c, r.rows, t.n, want)
			}
			if t.root == nil {
				continue
			}
			if t.n > capacity(t.height) {
				return fmt.Errorf("column %d holds %d blocks in a tree of height %d", c, t.n, t.height)
			}
			// A window drops the blocks wholly below its floor, and
			// only those.
			if lo := sh.floor(r.rows) / per; t.lo != lo {
				return fmt.Errorf("column %d of a root with %d rows dropped blocks below %d, want %d", c, r.rows, t.lo, lo)
			}
			for i := 0; i < t.lo; i++ {
				if present(t, i) {
					return fmt.Errorf("column %d still holds expired block %d (floor block %d)", c, i, t.lo)
				}
			}
			for i := t.lo; i < t.n; i++ {
				if t.get(i) == nil {
					return fmt.Errorf("column %d misses block %d of %d", c, i, t.n)
				}
			}
			nodeRefs[t.root]++
			walk(t.root, seen)
		}
	}
	deltaBlocks := map[*block]bool{}
	for _, b := range histBlocks {
		blockRefs[b]++
		deltaBlocks[b] = true
		if !b.delta {
			return fmt.Errorf("block %#x of a delta is not marked", b.ptr)
		}
	}
	var got int64
	for b := range deltaBlocks {
		got += int64(b.cls.bytes)
	}
	if got != p.history.Load() {
		return fmt.Errorf("histories hold %d delta bytes, the pool counts %d", got, p.history.Load())
	}
	for n, refs := range nodeRefs {
		if got := int(n.rc.Load()); got != refs {
			return fmt.Errorf("node has count %d, %d references", got, refs)
		}
	}
	for b, refs := range blockRefs {
		if got := int(b.rc.Load()); got != refs {
			return fmt.Errorf("block %#x has count %d, %d references", b.ptr, got, refs)
		}
		if b.zeroed {
			return fmt.Errorf("block %#x in use is marked zeroed", b.ptr)
		}
	}
	used := map[*sizeClass]int64{}
	for b := range blockRefs {
		used[b.cls]++
	}
	var reserved int64
	for _, c := range p.classes {
		if err := checkClass(c, blockRefs, used[c]); err != nil {
			return err
		}
		reserved += (c.nfree + c.inUse) * int64(c.bytes)
	}
	reserved += p.loose // the slabs' free extents
	if err := checkSlabs(p); err != nil {
		return err
	}
	if reserved != p.reserved {
		return fmt.Errorf("classes hold %d bytes, %d bytes reserved", reserved, p.reserved)
	}
	var logical int64
	for h := range p.live {
		logical += h.logicalBytes()
	}
	if logical != p.logical.Load() {
		return fmt.Errorf("live handles hold %d logical bytes, the pool counts %d", logical, p.logical.Load())
	}
	return nil
}

// checkSlabs checks the slabs' free extents: in order, within their slab,
// neither overlapping nor touching (neighbours merge), and summing to
// p.loose.
func checkSlabs(p *Pool) error {
	var loose int64
	for _, s := range p.slabs {
		if p.slabOf[s.ptr] != s {
			return fmt.Errorf("slab %#x is not indexed", s.ptr)
		}
		end := int64(-1)
		for _, e := range s.free {
			if e.n <= 0 || e.off <= end || e.off+e.n > s.bytes {
				return fmt.Errorf("slab %#x of %d bytes: extent [%d, %d) after %d", s.ptr, s.bytes, e.off, e.off+e.n, end)
			}
			end = e.off + e.n
			loose += e.n
		}
	}
	if loose != p.loose {
		return fmt.Errorf("free extents hold %d bytes, the pool counts %d", loose, p.loose)
	}
	return nil
}

// checkClass checks one size class's free lists and counts against the
// blocks in use, inUse of them its own.
func checkClass(p *sizeClass, blockRefs map[*block]int, inUse int64) error {
	if b := p.hot.Load(); b != nil {
		if blockRefs[b] > 0 || b.rc.Load() != 0 || b.cls != p {
			return fmt.Errorf("hot block %#x is in use (%d references, count %d) or of another class", b.ptr, blockRefs[b], b.rc.Load())
		}
		inUse++ // counted in use until drained
	}
	if inUse != p.inUse {
		return fmt.Errorf("%d blocks of %d bytes referenced, the class counts %d in use", inUse, p.bytes, p.inUse)
	}
	free := 0
	check := func(b *block) error {
		free++
		if blockRefs[b] > 0 {
			return fmt.Errorf("block %#x is both free and in use", b.ptr)
		}
		if b.cls != p {
			return fmt.Errorf("block %#x of %d bytes on the free list of %d", b.ptr, b.cls.bytes, p.bytes)
		}
		return nil
	}
	for _, b := range p.clean {
		if err := check(b); err != nil {
			return err
		}
		if !b.zeroed {
			return fmt.Errorf("clean block %#x is not marked zeroed (owner %q)", b.ptr, b.owner)
		}
	}
	for o, fl := range p.dirty {
		for _, b := range fl.blocks {
			if err := check(b); err != nil {
				return err
			}
			if b.owner != o {
				return fmt.Errorf("block %#x on %q's list has owner %q", b.ptr, o, b.owner)
			}
			if b.zeroed {
				return fmt.Errorf("zeroed block %#x on %q's list, not the clean one", b.ptr, o)
			}
		}
	}
	if int64(free) != p.nfree {
		return fmt.Errorf("%d blocks on free lists, the class counts %d", free, p.nfree)
	}
	return nil
}

// present reports whether block i of t is in the tree, walking only
// nodes that exist.
func present(t tree, i int) bool {
	n := t.root
	for h := t.height; h > 1; h-- {
		if n == nil {
			return false
		}
		n = n.kids[(i>>(fanBits*(h-1)))&(fan-1)]
	}
	return n != nil && n.blks[i&(fan-1)] != nil
}
