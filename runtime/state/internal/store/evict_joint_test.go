package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestJointSetsMatchBlockUnion: the joint sets, found by a walk that
// stops at roots and nodes an earlier handle covered whole, are the sets
// a union over every block of every handle finds, on random optional
// heads, snapshots and branches: appends, rows rewritten in place of a
// mutable state, rollbacks, windows that expire rows, and handles
// released.
func TestJointSetsMatchBlockUnion(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			p := newPool(t, PoolOptions{BlockBytes: 256})
			l := wide("Cache", Optional)
			l.Descendants = Keep
			switch seed % 3 {
			case 1:
				l.Window = 40 + rng.IntN(40)
			case 2:
				l.Growth, l.Bound = Mutable, 100+rng.IntN(200)
			}
			var heads []*Head
			var snaps []*Snap
			for range 3 { // lines that share nothing: sets apart
				heads = append(heads, must[*Head](t)(p.NewHead(l, "a")))
			}
			for range 400 {
				h := heads[rng.IntN(len(heads))]
				switch k := rng.IntN(20); {
				case k < 10 && l.Growth != Mutable:
					check(t, h.Append(wideRow(byte(rng.IntN(256)))))
				case k < 12 && l.Growth == Mutable:
					// A row, or a leaf's every row: versions that then
					// share a leaf and no block besides.
					at, n := rng.IntN(h.Len()), 1
					if rng.IntN(3) == 0 {
						at, n = at/32*32, min(32, h.Len()-at/32*32)
					}
					for i := at; i < at+n; i++ {
						check(t, h.Write(i, wideRow(byte(rng.IntN(256)))))
					}
				case k < 15:
					snaps = append(snaps, must[*Snap](t)(h.Snapshot()))
				case k < 17 && len(heads) < 12:
					heads = append(heads, must[*Head](t)(h.Branch()))
				case k < 18 && len(snaps) > 0:
					s := snaps[rng.IntN(len(snaps))]
					if err := h.Rollback(s); err != nil && !errors.Is(err, ErrNotAncestor) && !errors.Is(err, ErrExpired) {
						t.Fatal(err)
					}
				case k < 19 && len(snaps) > 1:
					i := rng.IntN(len(snaps))
					check(t, snaps[i].Release())
					snaps = slices.Delete(snaps, i, i+1)
				case len(heads) > 3:
					i := rng.IntN(len(heads))
					check(t, heads[i].Release())
					heads = slices.Delete(heads, i, i+1)
				}
			}
			live := eviction{p}.listedVictims()
			got, want := partition(jointSets(live)), partition(jointSetsByBlocks(live))
			if !slices.Equal(got, want) {
				t.Fatalf("joint sets %v, by every block %v", got, want)
			}
			for _, s := range snaps {
				check(t, s.Release())
			}
			for _, h := range heads {
				check(t, h.Release())
			}
		})
	}
}

// partition describes sets of handles, each by its members' addresses,
// in a canonical order.
func partition(sets []evictable) []string {
	var out []string
	for _, x := range sets {
		var m []string
		for _, j := range x.(jointVictims).members {
			m = append(m, fmt.Sprintf("%p", j))
		}
		slices.Sort(m)
		out = append(out, fmt.Sprint(m))
	}
	slices.Sort(out)
	return out
}

// jointSetsByBlocks is jointSets by a union over every block each
// candidate's versions hold.
func jointSetsByBlocks(live []evictable) []evictable {
	var cands []jointMember
	first := map[*block]int{}
	var parent []int
	find := func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
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
			k := len(cands)
			cands, parent = append(cands, j), append(parent, k)
			for _, r := range h.roots {
				blks, _ := rootBlocks(r, nil)
				for _, b := range blks {
					if o, seen := first[b]; !seen {
						first[b] = k
					} else if a, c := find(o), find(k); a != c {
						parent[c] = a
					}
				}
			}
		}
		h.unlock()
	}
	sets := map[int][]jointMember{}
	for k := range cands {
		sets[find(k)] = append(sets[find(k)], cands[k])
	}
	var out []evictable
	for k := range cands {
		if m := sets[k]; len(m) > 1 {
			out = append(out, jointVictims{m})
		}
	}
	return out
}

// TestJointSetsJoinBySharedNode: two pairs of snapshots whose versions
// share a whole leaf of blocks and nothing else are one set, found by
// the shared node alone: the second pair's walk stops there.
func TestJointSetsJoinBySharedNode(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := wide("Cache", Optional)
	l.Growth, l.Bound, l.Descendants = Mutable, 64, Keep
	h := must[*Head](t)(p.NewHead(l, "a"))
	for i := range 64 {
		check(t, h.Write(i, wideRow(byte(i))))
	}
	a1, a2 := must[*Snap](t)(h.Snapshot()), must[*Snap](t)(h.Snapshot())
	for i := 32; i < 64; i++ { // the second leaf's every block
		check(t, h.Write(i, wideRow(byte(100+i))))
	}
	b1, b2 := must[*Snap](t)(h.Snapshot()), must[*Snap](t)(h.Snapshot())
	check(t, h.Release())
	live := eviction{p}.listedVictims()
	got := jointSets(live)
	if want := partition(jointSetsByBlocks(live)); !slices.Equal(partition(got), want) || len(got) != 1 || len(got[0].(jointVictims).members) != 4 {
		t.Fatalf("joint sets %v, want the four snapshots as one: %v", partition(got), want)
	}
	for _, s := range []*Snap{a1, a2, b1, b2} {
		check(t, s.Release())
	}
}
