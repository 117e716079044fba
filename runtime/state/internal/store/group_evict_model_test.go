package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A group of reconstructable members (a checkpointed append state
// and a replayed mutable state) under a MaxBytes cap that a mandatory
// filler head presses on: eviction of the members and of cuts, followed by
// Group.At, Group.Rollback, reads and failing steps, against the model.

func TestGroupEvictModel(t *testing.T) {
	for seed := uint64(0); seed < 16; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runBGEModel(t, seed, 300) })
	}
}

func runBGEModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 13))
	capBlocks := 24 + rng.IntN(24)
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: int64(capBlocks) * 256})
	l0 := kv(Append, 120, Keep)
	l0.Checkpoint = &CheckpointPolicy{Every: 1 + rng.IntN(4), Keep: 2 + rng.IntN(4)}
	l0.Retention = Reconstructable
	l1 := recLayout(1+rng.IntN(4), 2+rng.IntN(4), Keep)
	l1.Retention = Reconstructable
	g := must[*Group](t)(NewGroup(p, "s", l0, l1))
	filler := must[*Head](t)(p.NewHead(wide("Filler", Mandatory), "f"))
	fillRows := 0
	m := &bgModel{rows: map[bgKey][][]byte{}, parent: map[bgKey]bgKey{}, at: map[Version]Version{}}
	cur := [2]Version{g.Head(0).Version(), g.Head(1).Version()}
	m.rows[bgKey{0, cur[0]}] = [][]byte{{}, {}}
	m.rows[bgKey{1, cur[1]}] = [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
	m.at[cur[0]] = cur[1]
	// soft accepts ErrNoMemory: the call changed nothing.
	soft := func(what string, err error) bool {
		t.Helper()
		if err == nil {
			return true
		}
		if !errors.Is(err, ErrNoMemory) {
			t.Fatalf("%s: %v", what, err)
		}
		return false
	}
	commit := func(i int, rows [][]byte) {
		t.Helper()
		m.commit(t, g, &cur, i, rows)
	}
	var cuts []*bgCut
	var stats struct{ at, atOK, rb, nomem int }
	readSoft := func(what string, x bwReader, k bgKey) {
		t.Helper()
		want := m.rows[k]
		n := len(want[1]) / 8
		got, err := bgRead(x, n)
		if errors.Is(err, ErrNoMemory) {
			stats.nomem++
			return
		}
		if err != nil {
			t.Fatalf("%s: Read: %v", what, err)
		}
		if x.Version() != k.v || x.Len() != n || string(got[0]) != string(want[0]) || string(got[1]) != string(want[1]) {
			t.Fatalf("%s: v%d (want v%d, %d rows) reads other rows", what, x.Version(), k.v, n)
		}
	}
	for step := 0; step < steps; step++ {
		op := rng.IntN(100)
		what := fmt.Sprintf("step %d op %d", step, op)
		switch {
		case op < 18:
			if g.Head(0).Len() > 110 {
				continue
			}
			rows := kvRows(1+rng.IntN(4), byte(rng.IntN(256)))
			if soft(what+" Append", g.Head(0).Append(rows)) {
				commit(0, concat(m.rows[bgKey{0, cur[0]}], rows))
			}
		case op < 36:
			in := [][]byte{{byte(rng.IntN(256)), 1}}
			mode := 0
			if rng.IntN(4) == 0 {
				mode = 1
			}
			err := g.Head(1).StepHostWith(in, true, bgStep{mode})
			if mode == 1 {
				if !errors.Is(err, errBG) && !errors.Is(err, ErrNoMemory) {
					t.Fatalf("%s: failing step: %v", what, err)
				}
			} else if soft(what+" Step", err) {
				rows := bgClone(m.rows[bgKey{1, cur[1]}])
				recur(rows, in)
				commit(1, rows)
			}
			if g.Head(1).Version() != cur[1] {
				t.Fatalf("%s: member 1 at %d, want %d", what, g.Head(1).Version(), cur[1])
			}
		case op < 46:
			c, err := g.Snapshot()
			if soft(what+" Snapshot", err) {
				cuts = append(cuts, &bgCut{c: c, vs: cur})
			}
		case op < 52:
			if len(cuts) == 0 {
				continue
			}
			i := rng.IntN(len(cuts))
			check(t, cuts[i].c.Release())
			cuts = slices.Delete(cuts, i, i+1)
		case op < 62:
			if len(cuts) == 0 {
				continue
			}
			c := cuts[rng.IntN(len(cuts))]
			ok := m.isAncestor(bgKey{0, c.vs[0]}, bgKey{0, cur[0]}) && m.isAncestor(bgKey{1, c.vs[1]}, bgKey{1, cur[1]})
			err := g.Rollback(c.c)
			switch {
			case err == nil:
				if !ok {
					t.Fatalf("%s: Rollback off the line succeeded", what)
				}
				stats.rb++
				cur = c.vs
			case errors.Is(err, ErrNoMemory):
			case !ok && errors.Is(err, ErrNotAncestor):
			default:
				t.Fatalf("%s: Rollback to %v from %v (on the line %v): %v", what, c.vs, cur, ok, err)
			}
		case op < 78: // filler grows or shrinks: pressure
			if rng.IntN(3) > 0 {
				n := 1 + rng.IntN(capBlocks/4)
				for range n {
					if err := filler.Append(wideRow(byte(fillRows))); err != nil {
						if !errors.Is(err, ErrNoMemory) {
							t.Fatal(err)
						}
						break
					}
					fillRows++
				}
			} else {
				check(t, filler.Release())
				filler = must[*Head](t)(p.NewHead(wide("Filler", Mandatory), "f"))
				fillRows = 0
			}
		default:
			var line []Version
			for k := (bgKey{0, cur[0]}); ; {
				line = append(line, k.v)
				q, ok := m.parent[k]
				if !ok {
					break
				}
				k = q
			}
			v := line[rng.IntN(min(len(line), 10))]
			stats.at++
			c, err := g.At(v)
			if err != nil {
				if !errors.Is(err, ErrNotRetained) && !errors.Is(err, ErrNoMemory) {
					t.Fatalf("%s: At(%d): %v", what, v, err)
				}
				continue
			}
			stats.atOK++
			readSoft(what+" At member 0", c.Snap(0), bgKey{0, v})
			readSoft(what+" At member 1", c.Snap(1), bgKey{1, m.at[v]})
			if rng.IntN(2) == 0 {
				cuts = append(cuts, &bgCut{c: c, vs: [2]Version{v, m.at[v]}})
			} else {
				check(t, c.Release())
			}
		}
		readSoft(what+" member 0", g.Head(0), bgKey{0, cur[0]})
		readSoft(what+" member 1", g.Head(1), bgKey{1, cur[1]})
		for i, c := range cuts {
			for j := range 2 {
				readSoft(fmt.Sprintf("%s cut %d member %d", what, i, j), c.c.Snap(j), bgKey{j, c.vs[j]})
			}
		}
		if ps := p.Stats(); ps.ReservedBytes > int64(capBlocks)*256 {
			t.Fatalf("%s: reserved %d over the cap", what, ps.ReservedBytes)
		}
	}
	ps := p.Stats()
	t.Logf("%+v evicted %d rebuilt %d", stats, ps.EvictedBytes, ps.RebuiltBytes)
	for _, c := range cuts {
		check(t, c.c.Release())
	}
	check(t, g.Release())
	check(t, filler.Release())
	if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.Live != 0 || ps.LogicalBytes != 0 || ps.Blocks != 0 || ps.HistoryBytes != 0 {
		t.Fatalf("after releasing everything: %+v", ps)
	}
}
