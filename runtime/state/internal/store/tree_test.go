package store

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestSetLeafMatchesSet: replacing a whole leaf with setLeaf leaves a tree,
// its blocks' reference counts and the freed list as setting the leaf's
// blocks one at a time does, whether another version shares the tree or
// not, over full and partial leaves and leaves past the end.
func TestSetLeafMatchesSet(t *testing.T) {
	be := device.Host()
	defer be.Close()
	p, err := NewPool(be, PoolOptions{})
	check(t, err)
	defer p.Close()
	for _, n := range []int{0, 5, fan, 2 * fan, 3*fan + 7, fan * fan, fan*fan + 1} {
		for k := 0; k*fan <= n; k += max(1, n/fan/3) {
			for _, shared := range []bool{false, true} {
				t.Run(fmt.Sprintf("n=%d/leaf=%d/shared=%v", n, k, shared), func(t *testing.T) {
					setLeafCase(t, p, n, k, shared)
				})
			}
		}
	}
}

// setLeafCase builds two trees of n blocks, block for block alike, shares
// both when shared, then replaces leaf k: on one with setLeaf, on the other
// with set, and compares them, before and after every reference is gone.
func setLeafCase(t *testing.T, p *Pool, n, k int, shared bool) {
	pa, err := p.alloc("s", n+fan, false)
	check(t, err)
	pb, err := p.alloc("s", n+fan, false)
	check(t, err)
	pair := map[*block]*block{}
	index := map[*block]int{}
	for i := range pa {
		pair[pa[i]], index[pa[i]], index[pb[i]] = pb[i], i, i
	}
	var a, b tree
	var fa, fb []*block
	for i := range n {
		a.set(i, pa[i], &fa)
		b.set(i, pb[i], &fb)
	}
	var sa, sb tree // the other version
	if shared && n > 0 {
		sa, sb = a, b
		a.root.rc.Add(1)
		b.root.rc.Add(1)
	}
	var leaf [fan]*block
	copy(leaf[:], pa[n:])
	a.setLeaf(k*fan, &leaf, &fa)
	for i := range fan {
		b.set(k*fan+i, pb[n+i], &fb)
	}
	compare := func(when string) {
		t.Helper()
		if a.n != b.n || a.height != b.height {
			t.Fatalf("%s: setLeaf gives n %d height %d, set n %d height %d", when, a.n, a.height, b.n, b.height)
		}
		for i := range max(a.n, n) + fan {
			if x, y := a.held(i), b.held(i); (x == nil) != (y == nil) || x != nil && pair[x] != y {
				t.Fatalf("%s: block %d differs", when, i)
			}
		}
		for x, y := range pair {
			if x.Refs() != y.Refs() {
				t.Fatalf("%s: block %d has %d references after setLeaf, %d after set", when, index[x], x.Refs(), y.Refs())
			}
		}
		ia, ib := indices(fa, index), indices(fb, index)
		if !slices.Equal(ia, ib) {
			t.Fatalf("%s: setLeaf freed %v, set freed %v", when, ia, ib)
		}
	}
	compare("after the leaf's write")
	for _, tr := range []*tree{&a, &sa} {
		if tr.root != nil {
			releaseNode(tr.root, &fa)
		}
	}
	for _, tr := range []*tree{&b, &sb} {
		if tr.root != nil {
			releaseNode(tr.root, &fb)
		}
	}
	compare("after release")
	if len(fa) != len(pa) {
		t.Fatalf("after release: %d of %d blocks freed", len(fa), len(pa))
	}
	p.free(fa)
	p.free(fb)
}

// indices returns the indices of list's blocks, in order.
func indices(list []*block, index map[*block]int) []int {
	out := make([]int, len(list))
	for i, b := range list {
		out[i] = index[b]
	}
	return out
}

// TestAppendBlocksAndHeldIn appends blocks in chunks of 1 to 70 with
// appendBlocks to one tree and one at a time with set to another (a
// version sharing the first now and then), drops a prefix of both as a
// window does, and checks that both hold the same blocks at every index
// and that heldIn yields, over ranges of every kind, what held finds.
func TestAppendBlocksAndHeldIn(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	const total = 3*fan*fan + 11
	blks, err := p.alloc("s", total, false)
	check(t, err)
	var a, b tree
	var fa, fb []*block
	var shared []tree
	for i, k := 0, 1; i < total; k = k%70 + 1 {
		chunk := blks[i:min(total, i+k)]
		if k%9 == 0 && a.root != nil {
			a.root.rc.Add(1) // another version holds the tree as it is
			shared = append(shared, a)
		}
		for _, x := range chunk {
			x.Retain() // b's reference
		}
		a.appendBlocks(chunk, &fa)
		for j, x := range chunk {
			b.set(i+j, x, &fb)
		}
		i += len(chunk)
	}
	if a.n != total || b.n != total {
		t.Fatalf("%d and %d blocks, want %d", a.n, b.n, total)
	}
	a.drop(fan*fan+5, &fa)
	b.drop(fan*fan+5, &fb)
	for i := range total {
		if a.held(i) != b.held(i) {
			t.Fatalf("index %d: %p against %p", i, a.held(i), b.held(i))
		}
	}
	for _, r := range [][2]int{{0, total}, {0, 0}, {5, 6}, {fan - 1, fan + 1}, {fan*fan - 3, fan*fan + 40}, {fan*fan + 5, total + 9}, {total - 1, total}, {2 * fan, 2*fan + fan}} {
		var want []*block
		for i := r[0]; i < r[1]; i++ {
			if x := a.held(i); x != nil {
				want = append(want, x)
			}
		}
		if got := slices.Collect(a.heldIn(r[0], r[1])); !slices.Equal(got, want) {
			t.Fatalf("heldIn(%d, %d): %d blocks, want %d", r[0], r[1], len(got), len(want))
		}
	}
	for _, s := range shared {
		releaseNode(s.root, &fa)
	}
	releaseNode(a.root, &fa)
	releaseNode(b.root, &fb)
	if len(fa)+len(fb) != total {
		t.Fatalf("%d blocks freed, want %d", len(fa)+len(fb), total)
	}
	p.free(append(fa, fb...))
}

// TestFirstDiff: firstDiff finds the first index at which two versions of
// a tree hold different blocks, as a walk over every index does, when one
// was written at a few places since it shared the other's nodes (path
// copying), grew past it, or expired its first blocks.
func TestFirstDiff(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	const total = 2*fan*fan + 7
	blks, err := p.alloc("s", total+40, false)
	check(t, err)
	var a tree
	var freed []*block
	a.appendBlocks(blks[:total], &freed)
	spare := blks[total:]
	brute := func(x, y *tree) int {
		if x.lo != y.lo {
			return 0
		}
		for i := range min(x.n, y.n) {
			if x.held(i) != y.held(i) {
				return i
			}
		}
		return min(x.n, y.n)
	}
	var kept []tree
	for _, at := range [][]int{{}, {total - 1}, {fan*fan + 3, 40}, {0}, {fan, fan*fan - 1, total - 2}} {
		s := a
		s.root.rc.Add(1) // another version holds a as it is
		kept = append(kept, s)
		for _, i := range at {
			b := spare[0]
			spare = spare[1:]
			a.set(i, b, &freed)
		}
		if got, want := firstDiff(&a, &s), brute(&a, &s); got != want {
			t.Fatalf("written at %v: firstDiff %d, want %d", at, got, want)
		}
		if got := firstDiff(&s, &s); got != s.n {
			t.Fatalf("a tree against itself: %d, want its end %d", got, s.n)
		}
	}
	s := a
	s.root.rc.Add(1)
	kept = append(kept, s)
	a.appendBlocks(spare[:3], &freed)
	if got := firstDiff(&a, &s); got != s.n {
		t.Fatalf("grown past the other: %d, want the other's end %d", got, s.n)
	}
	a.drop(5, &freed)
	if got := firstDiff(&a, &s); got != 0 {
		t.Fatalf("expired blocks on one side only: %d, want 0", got)
	}
	// A tree that grew a level keeps its old root as its first subtree:
	// compared from there, both ways.
	extra := must[[]*block](t)(p.alloc("s", fan*fan+5, false))
	var c tree
	c.appendBlocks(extra[:fan*fan], &freed)
	low := c
	low.root.rc.Add(1)
	kept = append(kept, low)
	c.appendBlocks(extra[fan*fan:fan*fan+2], &freed)
	if c.height != low.height+1 {
		t.Fatalf("heights %d and %d; the test wants one level apart", c.height, low.height)
	}
	for k, at := range []int{-1, fan*fan - 1, fan + 1, 0} {
		if at >= 0 {
			c.set(at, extra[fan*fan+1+k], &freed)
		}
		if got, want := firstDiff(&c, &low), brute(&c, &low); got != want || firstDiff(&low, &c) != want {
			t.Fatalf("one level apart, written at %d: firstDiff %d and %d, want %d", at, got, firstDiff(&low, &c), want)
		}
	}
	releaseNode(c.root, &freed)
	for _, k := range kept {
		releaseNode(k.root, &freed)
	}
	releaseNode(a.root, &freed)
	p.free(freed)
}
