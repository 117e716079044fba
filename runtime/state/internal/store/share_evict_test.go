package store

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

// TestShareEvictsLeastRecentlyUsedFirst: cached blocks go in the order
// their last holder let them go, a chain's end before its start, and a
// block a head adopted again, or held longer, after those no head used
// since.
func TestShareEvictsLeastRecentlyUsedFirst(t *testing.T) {
	l := prompt(4, 64) // blocks of 4 rows; an entry is 2 blocks of 256 bytes
	// The chains below take 9 entries, 18 blocks: the pool's cap.
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 18 * 256})
	chains := map[string][]int32{"A": tokens(1, 12), "B": tokens(2, 12), "C": tokens(3, 4), "D": tokens(4, 8)}
	released := func(toks []int32) {
		h, _ := session(t, p, l, "w", "d", toks)
		check(t, h.Release())
	}
	x, _ := session(t, p, l, "x", "d", chains["D"]) // registers D first, holds it longest
	released(chains["A"])
	released(chains["B"])
	y, n := session(t, p, l, "y", "d", chains["A"][:4]) // holds A's first block
	if n != 4 {
		t.Fatalf("adopted %d rows of A's first block, want 4", n)
	}
	released(chains["C"])
	released(chains["A"]) // adopts A whole, and lets it go again
	check(t, x.Release())
	check(t, y.Release())

	want := []string{"B3", "B2", "B1", "C1", "A3", "A2", "D2", "D1", "A1"}
	if got := freeOrder(p, chains); !slices.Equal(got, want) {
		t.Fatalf("free entries, least recently used first: %v, want %v", got, want)
	}
	if err := checkFreeList(p); err != nil {
		t.Fatal(err)
	}
	// 20 mandatory rows take 10 blocks: the first 5 entries of the list.
	m := must[*Head](t)(p.NewHead(l, "m"))
	defer m.Release()
	check(t, m.Append(promptRows(tokens(9, 20), 0, 20)))
	if got := freeOrder(p, chains); !slices.Equal(got, want[5:]) {
		t.Fatalf("after evicting 5 entries: %v, want %v", got, want[5:])
	}
	for name, rows := range map[string]int{"B": 0, "C": 0, "A": 8, "D": 8} {
		h := must[*Head](t)(p.NewSharedHead(l, "probe", "d"))
		if n := must[int](t)(h.AdoptPrefix(keyBytes(chains[name]))); n != rows {
			t.Errorf("chain %s: %d rows left to adopt, want %d", name, n, rows)
		}
		check(t, h.Release())
	}
}

// freeOrder names the cache's free entries, front first, by the chain of
// chains whose tokens they hold and their place in it, from 1.
func freeOrder(p *Pool, chains map[string][]int32) []string {
	c := &p.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for e := c.free.front; e != nil; e = e.next {
		name := "?"
		for n, toks := range chains {
			for i := 0; i+4 <= len(toks); i += 4 {
				if bytes.Equal(e.keys, keyBytes(toks[i:i+4])) {
					name = fmt.Sprint(n, i/4+1)
				}
			}
		}
		out = append(out, name)
	}
	return out
}

// TestShareEvictTakesTheFrontWhenItsVictimWasTaken: reclaims that run at
// once list the same least recently used entries; one whose victim
// another reclaim evicted first evicts the next free entry instead of
// nothing, so it does not fail for want of memory the cache could give.
func TestShareEvictTakesTheFrontWhenItsVictimWasTaken(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := prompt(4, 64)
	chains := map[string][]int32{"A": tokens(1, 4), "B": tokens(2, 4), "C": tokens(3, 4)}
	for _, name := range []string{"A", "B", "C"} {
		h, _ := session(t, p, l, "w", "d", chains[name])
		check(t, h.Release())
	}
	first, second := p.cache.victims(p), p.cache.victims(p)
	if len(first) != 3 || len(second) != 3 {
		t.Fatalf("%d and %d victims listed, want the 3 cached entries each time", len(first), len(second))
	}
	for i, x := range []evictable{first[0], second[0]} {
		if n, ok := x.evict(); !ok || n != 2*256 {
			t.Fatalf("reclaim %d: evicted %d bytes (%v), want one entry of 2 blocks", i+1, n, ok)
		}
	}
	if got, want := freeOrder(p, chains), []string{"C1"}; !slices.Equal(got, want) {
		t.Fatalf("free entries after two reclaims took the least recently used: %v, want %v", got, want)
	}
	if err := checkFreeList(p); err != nil {
		t.Fatal(err)
	}
}

// TestShareFreeListFollowsNewChildren: a head that computed a cached
// prefix itself, rather than adopting it, registers its next block after
// the cached chain; the chain, which no head holds, is then no victim
// (evicting it would strand the held block after it) until that block is
// free, and then it goes after it.
func TestShareFreeListFollowsNewChildren(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := prompt(4, 64)
	toks := tokens(1, 12)
	chains := map[string][]int32{"X": toks}
	a, _ := session(t, p, l, "a", "d", toks[:8])
	check(t, a.Release())
	if got, want := freeOrder(p, chains), []string{"X2", "X1"}; !slices.Equal(got, want) {
		t.Fatalf("free entries after the writer's release: %v, want %v", got, want)
	}
	b := must[*Head](t)(p.NewSharedHead(l, "b", "d"))
	check(t, b.Append(promptRows(toks, 0, 12))) // matches X1 and X2, registers X3 after them
	if got := freeOrder(p, chains); len(got) != 0 {
		t.Fatalf("free entries while a head holds the block after them: %v, want none", got)
	}
	if err := checkFreeList(p); err != nil {
		t.Fatal(err)
	}
	check(t, b.Release())
	if got, want := freeOrder(p, chains), []string{"X3", "X2", "X1"}; !slices.Equal(got, want) {
		t.Fatalf("free entries after the second head's release: %v, want %v", got, want)
	}
	if err := checkFreeList(p); err != nil {
		t.Fatal(err)
	}
}
