package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A group whose first member is a windowed append state and whose
// second is a mutable state: cuts taken before rows expire, group
// rollbacks to them, branches merged back, and Group.At (which a member
// without a history refuses).

func TestGroupWindowModel(t *testing.T) {
	for seed := uint64(0); seed < 12; seed++ {
		for _, desc := range []Descendants{Keep, Invalidate} {
			t.Run(fmt.Sprintf("%d/%v", seed, desc), func(t *testing.T) { runBGWModel(t, seed, desc, 250) })
		}
	}
}

func runBGWModel(t *testing.T, seed uint64, desc Descendants, steps int) {
	rng := rand.New(rand.NewPCG(seed, 11))
	w := 2 + rng.IntN(8)
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l0 := bwLayout(w, 1+rng.IntN(4), desc, Mandatory)
	l1 := rec(desc)
	g := must[*Group](t)(NewGroup(p, "s", l0, l1))
	m0 := &bwModel{w: w, rows: map[Version][]uint32{}, parent: map[Version]Version{}}
	m1 := map[Version][]byte{}
	p1 := map[Version]Version{}
	cur := [2]Version{g.Head(0).Version(), g.Head(1).Version()}
	m0.rows[cur[0]] = nil
	m1[cur[1]] = make([]byte, 32)
	isAnc1 := func(a, b Version) bool {
		for {
			if a == b {
				return true
			}
			q, ok := p1[b]
			if !ok {
				return false
			}
			b = q
		}
	}
	type cut struct {
		c  *GroupSnap
		vs [2]Version
	}
	var cuts []cut
	valid := func(c cut) bool { return m0.isAncestor(c.vs[0], cur[0]) && isAnc1(c.vs[1], cur[1]) }
	next := uint32(1)
	checkRec := func(what string, x bwReader, v Version) {
		t.Helper()
		if x.Version() != v {
			t.Fatalf("%s: member 1 at %d, want %d", what, x.Version(), v)
		}
		dst := [][]byte{make([]byte, 32)}
		if err := x.Read(0, 4, dst); err != nil || string(dst[0]) != string(m1[v]) {
			t.Fatalf("%s: member 1 reads %v, %v; want %v", what, dst[0], err, m1[v])
		}
	}
	for step := 0; step < steps; step++ {
		op := rng.IntN(100)
		what := fmt.Sprintf("step %d op %d", step, op)
		switch {
		case op < 35:
			n := 1 + rng.IntN(w)
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = next
				next++
			}
			check(t, g.Head(0).Append(bwVals(vals)))
			nv := g.Head(0).Version()
			m0.rows[nv] = append(slices.Clone(m0.rows[cur[0]]), vals...)
			m0.parent[nv] = cur[0]
			cur[0] = nv
		case op < 50:
			seed := byte(rng.IntN(256))
			check(t, g.Head(1).Write(0, recRow(seed)))
			nv := g.Head(1).Version()
			m1[nv] = recRow(seed)[0]
			p1[nv] = cur[1]
			cur[1] = nv
		case op < 62:
			c := must[*GroupSnap](t)(g.Snapshot())
			cuts = append(cuts, cut{c, cur})
		case op < 68:
			if len(cuts) == 0 {
				continue
			}
			i := rng.IntN(len(cuts))
			check(t, cuts[i].c.Release())
			cuts = slices.Delete(cuts, i, i+1)
		case op < 82:
			if len(cuts) == 0 {
				continue
			}
			c := cuts[rng.IntN(len(cuts))]
			err := g.Rollback(c.c)
			if ok := valid(c); err == nil {
				if !ok {
					t.Fatalf("%s: Rollback off the line succeeded", what)
				}
				cur = c.vs
			} else if ok {
				t.Fatalf("%s: Rollback to %v from %v: %v", what, c.vs, cur, err)
			}
		case op < 92: // branch, append past the window on it, merge
			b := must[*Group](t)(g.Branch())
			bv := cur
			for range 1 + rng.IntN(3) {
				n := 1 + rng.IntN(w)
				vals := make([]uint32, n)
				for i := range vals {
					vals[i] = next
					next++
				}
				check(t, b.Head(0).Append(bwVals(vals)))
				nv := b.Head(0).Version()
				m0.rows[nv] = append(slices.Clone(m0.rows[bv[0]]), vals...)
				m0.parent[nv] = bv[0]
				bv[0] = nv
			}
			bwCheck(t, what+" branch", b.Head(0), m0, bv[0], rng)
			if rng.IntN(3) > 0 {
				check(t, g.Merge(b))
				cur = bv
			}
			check(t, b.Release())
		default:
			if _, err := g.At(cur[0]); !errors.Is(err, ErrNotRetained) {
				t.Fatalf("%s: Group.At with a windowed member: %v, want ErrNotRetained", what, err)
			}
		}
		bwCheck(t, what+" member 0", g.Head(0), m0, cur[0], rng)
		checkRec(what, g.Head(1), cur[1])
		for i, c := range cuts {
			if desc == Invalidate && !valid(c) {
				continue
			}
			bwCheck(t, fmt.Sprintf("%s cut %d", what, i), c.c.Snap(0), m0, c.vs[0], rng)
			checkRec(fmt.Sprintf("%s cut %d", what, i), c.c.Snap(1), c.vs[1])
		}
	}
	for _, c := range cuts {
		check(t, c.c.Release())
	}
	check(t, g.Release())
	if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.Live != 0 || ps.LogicalBytes != 0 || ps.Blocks != 0 {
		t.Fatalf("after releasing everything: %+v", ps)
	}
}
