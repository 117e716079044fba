package blocks

import "fmt"

// Check checks the allocator's books against the blocks in use (each with
// the references the caller counted to it): every class's free lists and
// counts, the slabs' free extents, and the reserved bytes. The store's
// invariant tests call it; it takes the lock, so nothing must allocate
// meanwhile.
func (a *Allocator) Check(refs map[*Block]int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	used := map[*Class]int64{}
	for b := range refs {
		if b.Zeroed() {
			return fmt.Errorf("block %#x in use is marked zeroed", b.ptr)
		}
		used[b.cls]++
	}
	var reserved int64
	for _, c := range a.classes {
		if err := c.check(refs, used[c]); err != nil {
			return err
		}
		reserved += (c.nfree + c.inUse) * int64(c.bytes)
	}
	reserved += a.loose        // the slabs' free extents
	reserved += a.pendingBytes // freed behind fences that have not returned
	if err := a.checkSlabs(); err != nil {
		return err
	}
	if reserved != a.reserved {
		return fmt.Errorf("classes hold %d bytes, %d bytes reserved", reserved, a.reserved)
	}
	return nil
}

// checkSlabs checks the slabs' free extents: in order, within their slab,
// neither overlapping nor touching (neighbours merge), and summing to
// a.loose. a.mu is held.
func (a *Allocator) checkSlabs() error {
	var loose int64
	for _, s := range a.slabs {
		if a.slabOf[s.ptr] != s {
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
	if loose != a.loose {
		return fmt.Errorf("free extents hold %d bytes, the pool counts %d", loose, a.loose)
	}
	return nil
}

// check checks one size class's free lists and counts against the blocks
// in use, inUse of them its own. a.mu is held.
func (c *Class) check(refs map[*Block]int, inUse int64) error {
	if b := c.hot.Load(); b != nil {
		if refs[b] > 0 || b.Refs() != 0 || b.cls != c {
			return fmt.Errorf("hot block %#x is in use (%d references, count %d) or of another class", b.ptr, refs[b], b.Refs())
		}
		inUse++ // counted in use until drained
	}
	if inUse != c.inUse {
		return fmt.Errorf("%d blocks of %d bytes referenced, the class counts %d in use", inUse, c.bytes, c.inUse)
	}
	free := 0
	check := func(b *Block) error {
		free++
		if refs[b] > 0 {
			return fmt.Errorf("block %#x is both free and in use", b.ptr)
		}
		if b.cls != c {
			return fmt.Errorf("block %#x of %d bytes on the free list of %d", b.ptr, b.cls.bytes, c.bytes)
		}
		return nil
	}
	for _, b := range c.clean {
		if err := check(b); err != nil {
			return err
		}
		if !b.Zeroed() {
			return fmt.Errorf("clean block %#x is not marked zeroed (owner %q)", b.ptr, b.owner)
		}
	}
	for o, fl := range c.dirty {
		for _, b := range fl.blocks {
			if err := check(b); err != nil {
				return err
			}
			if b.owner != o {
				return fmt.Errorf("block %#x on %q's list has owner %q", b.ptr, o, b.owner)
			}
			if b.Zeroed() {
				return fmt.Errorf("zeroed block %#x on %q's list, not the clean one", b.ptr, o)
			}
		}
	}
	if int64(free) != c.nfree {
		return fmt.Errorf("%d blocks on free lists, the class counts %d", free, c.nfree)
	}
	return nil
}

// Clean returns the blocks on c's clean list, for tests.
func (a *Allocator) Clean(c *Class) []*Block {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*Block(nil), c.clean...)
}

// DirtyLists counts the owners c keeps a free list for, for tests.
func (a *Allocator) DirtyLists(c *Class) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(c.dirty)
}
