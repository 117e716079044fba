package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A group of a checkpointed append member and a replayed mutable
// member: appends, host steps that succeed, fail or panic after writing
// rows while cuts hold them, writes, cuts, group rollbacks, Group.At
// (also after rollbacks), branches merged back, and member snapshots,
// against a model of every version's rows and of the group's cut at
// every version of member 0.

type bgKey struct {
	m int // member, or branch member (2, 3)
	v Version
}

type bgModel struct {
	rows   map[bgKey][][]byte
	parent map[bgKey]bgKey
	// at maps a version of member 0 to member 1's version when it was made.
	at map[Version]Version
}

// commit records the version member i of g has just made, holding rows,
// as made from cur[i], and moves cur[i] to it; a version of member 0
// records member 1's version beside it.
func (m *bgModel) commit(t *testing.T, g *Group, cur *[2]Version, i int, rows [][]byte) {
	t.Helper()
	nv := g.Head(i).Version()
	k := bgKey{i, nv}
	if _, dup := m.rows[k]; dup {
		t.Fatalf("member %d made version %d twice", i, nv)
	}
	m.rows[k] = rows
	m.parent[k] = bgKey{i, cur[i]}
	cur[i] = nv
	if i == 0 {
		m.at[nv] = cur[1]
	}
}

func (m *bgModel) isAncestor(a, b bgKey) bool { return ancestorIn(m.parent, a, b) }

func bgClone(c [][]byte) [][]byte {
	out := make([][]byte, len(c))
	for i := range c {
		out[i] = slices.Clone(c[i])
	}
	return out
}

// bgRead reads every row of x, of n rows.
func bgRead(x interface {
	Read(from, to int, dst [][]byte) error
}, n int) ([][]byte, error) {
	dst := [][]byte{make([]byte, n*16), make([]byte, n*8)}
	return dst, x.Read(0, n, dst)
}

func bgCheck(t *testing.T, what string, x bwReader, m *bgModel, k bgKey) {
	t.Helper()
	want, ok := m.rows[k]
	if !ok {
		t.Fatalf("%s: no model for %+v", what, k)
	}
	n := len(want[1]) / 8
	if x.Version() != k.v || x.Len() != n {
		t.Fatalf("%s: Version %d Len %d, want %d %d", what, x.Version(), x.Len(), k.v, n)
	}
	got, err := bgRead(x, n)
	if err != nil {
		t.Fatalf("%s: Read: %v", what, err)
	}
	if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
		t.Fatalf("%s: v%d reads other rows", what, k.v)
	}
}

type bgCut struct {
	c  *GroupSnap
	vs [2]Version
}

// bgStep is recur, failing or panicking after writing, as asked.
type bgStep struct{ mode int }

var errBG = errors.New("the step fails")

func (s bgStep) StepHost(rows, in [][]byte) error {
	recur(rows, in)
	switch s.mode {
	case 1:
		return errBG
	case 2:
		panic("the step panics")
	}
	return nil
}

func TestGroupReplayModel(t *testing.T) {
	for seed := uint64(0); seed < 16; seed++ {
		for _, desc := range []Descendants{Keep, Invalidate} {
			t.Run(fmt.Sprintf("%d/%v", seed, desc), func(t *testing.T) { runGroupReplayModel(t, seed, desc, 250) })
		}
	}
}

func runGroupReplayModel(t *testing.T, seed uint64, desc Descendants, steps int) {
	rng := rand.New(rand.NewPCG(seed, 5))
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l0 := kv(Append, 200, desc)
	l0.Checkpoint = &CheckpointPolicy{Every: 1 + rng.IntN(4), Keep: 1 + rng.IntN(6)}
	l1 := recLayout(1+rng.IntN(4), 1+rng.IntN(6), desc)
	g := must[*Group](t)(NewGroup(p, "s", l0, l1))
	m := &bgModel{rows: map[bgKey][][]byte{}, parent: map[bgKey]bgKey{}, at: map[Version]Version{}}
	cur := [2]Version{g.Head(0).Version(), g.Head(1).Version()}
	m.rows[bgKey{0, cur[0]}] = [][]byte{{}, {}}
	m.rows[bgKey{1, cur[1]}] = [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
	m.at[cur[0]] = cur[1]
	var cuts []*bgCut
	type memberSnap struct {
		s *Snap
		k bgKey
	}
	var msnaps []memberSnap
	commit := func(i int, rows [][]byte) {
		t.Helper()
		m.commit(t, g, &cur, i, rows)
	}
	// invalid reports whether a cut may have been invalidated: with the
	// Invalidate policy, any cut not on the line of both members.
	valid := func(c *bgCut) bool {
		return m.isAncestor(bgKey{0, c.vs[0]}, bgKey{0, cur[0]}) && m.isAncestor(bgKey{1, c.vs[1]}, bgKey{1, cur[1]})
	}
	var stats struct{ at, atOK, rb, fail, panics int }
	for step := 0; step < steps; step++ {
		op := rng.IntN(100)
		what := fmt.Sprintf("step %d op %d", step, op)
		switch {
		case op < 20: // append
			if g.Head(0).Len() > 190 {
				continue
			}
			n := 1 + rng.IntN(5)
			rows := kvRows(n, byte(rng.IntN(256)))
			check(t, g.Head(0).Append(rows))
			commit(0, concat(m.rows[bgKey{0, cur[0]}], rows))
		case op < 40: // step
			in := [][]byte{{byte(rng.IntN(256)), byte(rng.IntN(256))}}
			mode := 0
			if r := rng.IntN(10); r < 2 {
				mode = 1
			} else if r < 3 {
				mode = 2
			}
			var err error
			panicked := func() (p bool) {
				defer func() {
					if recover() != nil {
						p = true
					}
				}()
				err = g.Head(1).StepHostWith(in, rng.IntN(2) == 0, bgStep{mode})
				return false
			}()
			switch mode {
			case 0:
				check(t, err)
				rows := bgClone(m.rows[bgKey{1, cur[1]}])
				recur(rows, in)
				commit(1, rows)
			case 1:
				stats.fail++
				if !errors.Is(err, errBG) {
					t.Fatalf("%s: a failing step: %v", what, err)
				}
			case 2:
				stats.panics++
				if !panicked {
					t.Fatalf("%s: a panicking step did not panic: %v", what, err)
				}
			}
			if g.Head(1).Version() != cur[1] {
				t.Fatalf("%s: after a step of mode %d member 1 is at %d, want %d", what, mode, g.Head(1).Version(), cur[1])
			}
		case op < 48: // write member 1
			at := rng.IntN(10)
			n := 1 + rng.IntN(10-at)
			rows := kvRows(n, byte(rng.IntN(256)))
			check(t, g.Head(1).Write(at, rows))
			next := bgClone(m.rows[bgKey{1, cur[1]}])
			copy(next[0][at*16:], rows[0])
			copy(next[1][at*8:], rows[1])
			commit(1, next)
		case op < 58: // cut
			c, err := g.Snapshot()
			check(t, err)
			cuts = append(cuts, &bgCut{c: c, vs: cur})
		case op < 63: // release a cut
			if len(cuts) == 0 {
				continue
			}
			i := rng.IntN(len(cuts))
			check(t, cuts[i].c.Release())
			cuts = slices.Delete(cuts, i, i+1)
		case op < 66: // member snapshot
			i := rng.IntN(2)
			s := must[*Snap](t)(g.Head(i).Snapshot())
			msnaps = append(msnaps, memberSnap{s, bgKey{i, cur[i]}})
		case op < 78: // group rollback
			if len(cuts) == 0 {
				continue
			}
			c := cuts[rng.IntN(len(cuts))]
			ok := valid(c)
			err := g.Rollback(c.c)
			if err == nil {
				if !ok {
					t.Fatalf("%s: Rollback to a cut off the line %v (at %v) succeeded", what, c.vs, cur)
				}
				stats.rb++
				cur = c.vs
			} else if ok {
				t.Fatalf("%s: Rollback to a cut on the line %v (at %v): %v", what, c.vs, cur, err)
			}
		case op < 84: // branch, write on it, merge back
			b, err := g.Branch()
			check(t, err)
			bcur := cur
			n := 1 + rng.IntN(3)
			rows := kvRows(n, byte(rng.IntN(256)))
			check(t, b.Head(0).Append(rows))
			k0 := bgKey{0, b.Head(0).Version()}
			m.rows[k0] = concat(m.rows[bgKey{0, bcur[0]}], rows)
			m.parent[k0] = bgKey{0, bcur[0]}
			m.at[k0.v] = bcur[1]
			in := [][]byte{{byte(rng.IntN(256))}}
			check(t, b.Head(1).StepHostWith(in, true, bgStep{}))
			r1 := bgClone(m.rows[bgKey{1, bcur[1]}])
			recur(r1, in)
			k1 := bgKey{1, b.Head(1).Version()}
			m.rows[k1] = r1
			m.parent[k1] = bgKey{1, bcur[1]}
			if rng.IntN(2) == 0 {
				check(t, g.Merge(b))
				cur = [2]Version{k0.v, k1.v}
			}
			check(t, b.Release())
		default: // At
			vs := make([]Version, 0, len(m.at))
			for v := range m.at {
				vs = append(vs, v)
			}
			slices.Sort(vs)
			v := vs[rng.IntN(len(vs))]
			if rng.IntN(10) < 7 { // a version on member 0's line
				var line []Version
				for k := (bgKey{0, cur[0]}); ; {
					line = append(line, k.v)
					p, ok := m.parent[k]
					if !ok {
						break
					}
					k = p
				}
				v = line[rng.IntN(min(len(line), 12))]
			}
			stats.at++
			_, perr := g.Plan(v)
			c, err := g.At(v)
			if (perr == nil) != (err == nil) {
				t.Fatalf("%s: Plan(%d): %v but At(%d): %v", what, v, perr, v, err)
			}
			if rng.IntN(2) == 0 {
				// VersionAt(n) names a version of n rows on the line.
				n := rng.IntN(g.Head(0).Len() + 1)
				if vn, err := g.Head(0).VersionAt(n); err == nil {
					if !m.isAncestor(bgKey{0, vn}, bgKey{0, cur[0]}) || len(m.rows[bgKey{0, vn}][1])/8 != n {
						t.Fatalf("%s: VersionAt(%d) = %d, not a version of %d rows on the line", what, n, vn, n)
					}
				} else if !errors.Is(err, ErrNotRetained) {
					t.Fatalf("%s: VersionAt(%d): %v", what, n, err)
				}
			}
			if err != nil {
				if !errors.Is(err, ErrNotRetained) {
					t.Fatalf("%s: At(%d): %v", what, v, err)
				}
				continue
			}
			stats.atOK++
			if !m.isAncestor(bgKey{0, v}, bgKey{0, cur[0]}) {
				t.Fatalf("%s: At(%d) of a version off member 0's line succeeded", what, v)
			}
			bgCheck(t, what+fmt.Sprintf(" At(%d) member 0", v), c.Snap(0), m, bgKey{0, v})
			bgCheck(t, what+fmt.Sprintf(" At(%d) member 1", v), c.Snap(1), m, bgKey{1, m.at[v]})
			if rng.IntN(3) == 0 {
				cuts = append(cuts, &bgCut{c: c, vs: [2]Version{v, m.at[v]}})
			} else {
				check(t, c.Release())
			}
		}
		bgCheck(t, what+" member 0", g.Head(0), m, bgKey{0, cur[0]})
		bgCheck(t, what+" member 1", g.Head(1), m, bgKey{1, cur[1]})
		for i, c := range cuts {
			if desc == Invalidate && !valid(c) {
				continue
			}
			for j := range 2 {
				bgCheck(t, fmt.Sprintf("%s cut %d member %d", what, i, j), c.c.Snap(j), m, bgKey{j, c.vs[j]})
			}
		}
		for i, s := range msnaps {
			if desc == Invalidate && !m.isAncestor(s.k, bgKey{s.k.m, cur[s.k.m]}) {
				continue
			}
			bgCheck(t, fmt.Sprintf("%s member snap %d", what, i), s.s, m, s.k)
		}
	}
	t.Logf("%+v", stats)
	for _, c := range cuts {
		check(t, c.c.Release())
	}
	for _, s := range msnaps {
		check(t, s.s.Release())
	}
	check(t, g.Release())
	if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.Live != 0 || ps.LogicalBytes != 0 || ps.Blocks != 0 || ps.HistoryBytes != 0 {
		t.Fatalf("after releasing everything: %+v", ps)
	}
}
