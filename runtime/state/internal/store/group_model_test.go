package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestGroupModel runs random group calls (member writes, cuts, branches,
// merges, rollbacks, releases) against the reference (ref_model_test.go):
// a head per member, each of its own lineage that keeps every version. After each call every live group reads as the reference says,
// a call succeeds exactly when the reference says it can, and a failed
// call changes nothing.
func TestGroupModel(t *testing.T) {
	steps := groupModelSteps(t, 2000)
	// From seed 5 on, with a history on both members: cuts rebuilt by At
	// join the snapshots, read, rolled back to and released as they are.
	for _, seed := range statetest.Seeds(1, 2, 3, 4, 5, 6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runGroupModel(t, seed, steps, seed >= 5) })
	}
}

// groupModelSteps returns n, or -model.steps/10 when set (make fuzz
// runs the models long; a step here reads every live group and cut).
func groupModelSteps(_ *testing.T, n int) int { return statetest.Steps(n, 10) }

// gmGroup is a live group and its members' reference heads, one
// lineage per member.
type gmGroup struct {
	g   *Group
	mem [2]*RefHandle
}

// gmCut is a cut and its members' reference snapshots, taken together.
type gmCut struct {
	cut *GroupSnap
	mem [2]*RefHandle
}

func runGroupModel(t *testing.T, seed uint64, steps int, hist bool) {
	statetest.LogReplay(t, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	p := newPool(t, PoolOptions{BlockBytes: 512})
	kvL, recL := kv(Append, 1<<20, Keep), rec(Keep)
	if hist {
		kvL.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 3}
		recL.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 3}
	}
	root := must[*Group](t)(NewGroup(p, "s", kvL, recL))
	rootRef := &gmGroup{g: root}
	// made is the group's order of commits: per member, the commit that
	// made each version (0: the empty state of both), which places a
	// version of one member among the other's for At.
	var made [2]map[Version]int
	clock := 0
	for m, l := range []*Layout{kvL, recL} {
		lin := NewRefLineage("s", l)
		lin.KeepVersions()
		rootRef.mem[m] = lin.NewHead(root.Head(m))
		made[m] = map[Version]int{0: 0}
	}
	rebuilt, notRetained := 0, 0
	defer func() {
		if hist && rebuilt == 0 {
			t.Errorf("seed %d: At rebuilt no cut (%d not retained)", seed, notRetained)
		}
	}()
	groups := []*gmGroup{rootRef}
	var cuts []*gmCut
	verify := func(step int, what string) {
		for gi, x := range groups {
			if !equalCols(readAll(t, x.g.Head(0)), x.mem[0].Cols) || !bytes.Equal(readRec(t, x.g.Head(1)), x.mem[1].Cols[0]) {
				t.Fatalf("seed %d step %d (%s): group %d reads otherwise than the reference", seed, step, what, gi)
			}
			for m := range 2 {
				if v := x.g.Head(m).Version(); v != x.mem[m].V {
					t.Fatalf("seed %d step %d (%s): member %d of group %d at version %d, the reference at %d", seed, step, what, m, gi, v, x.mem[m].V)
				}
			}
		}
		for ci, c := range cuts {
			if !equalCols(readAll(t, c.cut.Snap(0)), c.mem[0].Cols) || !bytes.Equal(readRec(t, c.cut.Snap(1)), c.mem[1].Cols[0]) {
				t.Fatalf("seed %d step %d (%s): cut %d changed", seed, step, what, ci)
			}
		}
	}
	for step := 0; step < steps; step++ {
		x := groups[rng.IntN(len(groups))]
		var what string
		if hist && rng.IntN(6) == 0 {
			// The cut when member 0 made version v: member 1 at its
			// last version made before.
			what = "at"
			line := x.mem[0].Lin.Ancestry(x.mem[0].V)
			v := line[rng.IntN(len(line))]
			want := Version(0)
			for _, w := range x.mem[1].Lin.Ancestry(x.mem[1].V) {
				if made[1][w] <= made[0][v] {
					want = w
				}
			}
			c, err := x.g.At(v)
			switch {
			case errors.Is(err, ErrNotRetained):
				notRetained++
			case err != nil:
				t.Fatalf("seed %d step %d: At: %v", seed, step, err)
			default:
				rebuilt++
				cuts = append(cuts, &gmCut{cut: c, mem: [2]*RefHandle{x.mem[0].At(c.Snap(0), v), x.mem[1].At(c.Snap(1), want)}})
			}
			verify(step, what)
			if st := p.Stats(); st.Live != 2*len(groups)+2*len(cuts) {
				t.Fatalf("seed %d step %d (%s): %d live handles, want %d", seed, step, what, st.Live, 2*len(groups)+2*len(cuts))
			}
			continue
		}
		switch op := rng.IntN(10); {
		case op < 3: // a write of one member or both
			what = "write"
			for m := range 2 {
				if op == m {
					continue
				}
				seedByte := byte(rng.Uint32())
				if m == 0 {
					rows := kvRows(1+rng.IntN(3), seedByte)
					check(t, x.g.Head(0).Append(rows))
					x.mem[0].Append(rows)
				} else {
					at := rng.IntN(4)
					row := recRow(seedByte)[0][:8]
					check(t, x.g.Head(1).Write(at, [][]byte{row}))
					x.mem[1].Write(at, [][]byte{row})
				}
				clock++
				made[m][x.mem[m].V] = clock
			}
		case op < 5:
			what = "snapshot"
			c := must[*GroupSnap](t)(x.g.Snapshot())
			cuts = append(cuts, &gmCut{cut: c, mem: [2]*RefHandle{x.mem[0].Snapshot(c.Snap(0)), x.mem[1].Snapshot(c.Snap(1))}})
		case op < 6 && len(groups) < 6:
			what = "branch"
			b := must[*Group](t)(x.g.Branch())
			groups = append(groups, &gmGroup{g: b, mem: [2]*RefHandle{x.mem[0].Branch(b.Head(0)), x.mem[1].Branch(b.Head(1))}})
		case op < 7 && len(cuts) > 0:
			what = "rollback"
			c := cuts[rng.IntN(len(cuts))]
			ok := x.mem[0].CanRollback(c.mem[0]) && x.mem[1].CanRollback(c.mem[1])
			err := x.g.Rollback(c.cut)
			if ok != (err == nil) || !ok && !errors.Is(err, ErrNotAncestor) {
				t.Fatalf("seed %d step %d: rollback: %v, the reference says possible %v", seed, step, err, ok)
			}
			if ok {
				for m := range 2 {
					x.mem[m].Rollback(c.mem[m])
				}
			}
		case op < 8 && len(groups) > 1:
			what = "merge"
			y := groups[rng.IntN(len(groups))]
			ok := x.mem[0].CanMerge(y.mem[0]) && x.mem[1].CanMerge(y.mem[1])
			err := x.g.Merge(y.g)
			if ok != (err == nil) || !ok && !errors.Is(err, ErrDiverged) {
				t.Fatalf("seed %d step %d: merge: %v, the reference says possible %v", seed, step, err, ok)
			}
			if ok {
				for m := range 2 {
					x.mem[m].Merge(y.mem[m])
				}
			}
		case op < 9 && len(cuts) > 3 || len(cuts) > 8:
			what = "release cut"
			i := rng.IntN(len(cuts))
			check(t, cuts[i].cut.Release())
			for _, r := range cuts[i].mem {
				r.Release()
			}
			cuts = slices.Delete(cuts, i, i+1)
		case len(groups) > 1 && x != groups[0]:
			what = "release group"
			check(t, x.g.Release())
			for _, r := range x.mem {
				r.Release()
			}
			groups = slices.DeleteFunc(groups, func(y *gmGroup) bool { return y == x })
		}
		verify(step, what)
		if st := p.Stats(); st.Live != 2*len(groups)+2*len(cuts) {
			t.Fatalf("seed %d step %d (%s): %d live handles, want %d", seed, step, what, st.Live, 2*len(groups)+2*len(cuts))
		}
	}
	for _, c := range cuts {
		check(t, c.cut.Release())
	}
	for _, x := range groups {
		check(t, x.g.Release())
	}
}
