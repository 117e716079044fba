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
// merges, rollbacks, releases) against a reference that keeps every
// version of every member as a full copy, and its ancestry as a list of
// versions. After each call every live group reads as the reference says,
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

// gmVersion is one version of one member in the reference: its rows.
type gmVersion struct {
	kv  [][]byte
	rec []byte
}

// gmGroup is a live group and, per member, its ancestry in the reference
// (the versions it went through, last is current).
type gmGroup struct {
	g    *Group
	line [2][]int
}

type gmCut struct {
	cut  *GroupSnap
	last [2]int
}

func runGroupModel(t *testing.T, seed uint64, steps int, hist bool) {
	statetest.LogReplay(t, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	p := newPool(t, PoolOptions{BlockBytes: 512})
	versions := []gmVersion{{kv: [][]byte{{}, {}}, rec: make([]byte, 32)}} // 0: the empty state of both
	kvL, recL := kv(Append, 1<<20, Keep), rec(Keep)
	if hist {
		kvL.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 3}
		recL.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 3}
	}
	root := must[*Group](t)(NewGroup(p, "s", kvL, recL))
	// storeV is the store's version of each reference version of member
	// 0, which At takes; the reference's indices are the commit order.
	storeV := map[int]Version{0: root.Head(0).Version()}
	rebuilt, notRetained := 0, 0
	defer func() {
		if hist && rebuilt == 0 {
			t.Errorf("seed %d: At rebuilt no cut (%d not retained)", seed, notRetained)
		}
	}()
	groups := []*gmGroup{{g: root, line: [2][]int{{0}, {0}}}}
	var cuts []*gmCut
	cur := func(x *gmGroup, m int) gmVersion { return versions[x.line[m][len(x.line[m])-1]] }
	verify := func(step int, what string) {
		for gi, x := range groups {
			if !equalCols(readAll(t, x.g.Head(0)), cur(x, 0).kv) || !bytes.Equal(readRec(t, x.g.Head(1)), cur(x, 1).rec) {
				t.Fatalf("seed %d step %d (%s): group %d reads otherwise than the reference", seed, step, what, gi)
			}
		}
		for ci, c := range cuts {
			if !equalCols(readAll(t, c.cut.Snap(0)), versions[c.last[0]].kv) || !bytes.Equal(readRec(t, c.cut.Snap(1)), versions[c.last[1]].rec) {
				t.Fatalf("seed %d step %d (%s): cut %d changed", seed, step, what, ci)
			}
		}
	}
	for step := 0; step < steps; step++ {
		x := groups[rng.IntN(len(groups))]
		var what string
		if hist && rng.IntN(6) == 0 {
			// The cut when member 0 made version i: member 1 at its
			// last version made before.
			what = "at"
			i := x.line[0][rng.IntN(len(x.line[0]))]
			want := 0
			for _, j := range x.line[1] {
				if j <= i {
					want = j
				}
			}
			c, err := x.g.At(storeV[i])
			switch {
			case errors.Is(err, ErrNotRetained):
				notRetained++
			case err != nil:
				t.Fatalf("seed %d step %d: At: %v", seed, step, err)
			default:
				rebuilt++
				cuts = append(cuts, &gmCut{cut: c, last: [2]int{i, want}})
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
				v := cur(x, m)
				seedByte := byte(rng.Uint32())
				if m == 0 {
					rows := kvRows(1+rng.IntN(3), seedByte)
					check(t, x.g.Head(0).Append(rows))
					v = gmVersion{kv: concat(v.kv, rows)}
					storeV[len(versions)] = x.g.Head(0).Version()
				} else {
					at := rng.IntN(4)
					row := recRow(seedByte)[0][:8]
					check(t, x.g.Head(1).Write(at, [][]byte{row}))
					r := slices.Clone(v.rec)
					copy(r[at*8:], row)
					v = gmVersion{rec: r}
				}
				versions = append(versions, v)
				x.line[m] = append(x.line[m], len(versions)-1)
			}
		case op < 5:
			what = "snapshot"
			c := must[*GroupSnap](t)(x.g.Snapshot())
			cuts = append(cuts, &gmCut{cut: c, last: [2]int{x.line[0][len(x.line[0])-1], x.line[1][len(x.line[1])-1]}})
		case op < 6 && len(groups) < 6:
			what = "branch"
			b := must[*Group](t)(x.g.Branch())
			groups = append(groups, &gmGroup{g: b, line: [2][]int{slices.Clone(x.line[0]), slices.Clone(x.line[1])}})
		case op < 7 && len(cuts) > 0:
			what = "rollback"
			c := cuts[rng.IntN(len(cuts))]
			var at [2]int
			ok := true
			for m := range 2 {
				at[m] = slices.Index(x.line[m], c.last[m])
				ok = ok && at[m] >= 0
			}
			err := x.g.Rollback(c.cut)
			if ok != (err == nil) || !ok && !errors.Is(err, ErrNotAncestor) {
				t.Fatalf("seed %d step %d: rollback: %v, the reference says possible %v", seed, step, err, ok)
			}
			if ok {
				for m := range 2 {
					x.line[m] = x.line[m][:at[m]+1]
				}
			}
		case op < 8 && len(groups) > 1:
			what = "merge"
			y := groups[rng.IntN(len(groups))]
			ok := true
			for m := range 2 {
				ok = ok && slices.Contains(y.line[m], x.line[m][len(x.line[m])-1])
			}
			err := x.g.Merge(y.g)
			if ok != (err == nil) || !ok && !errors.Is(err, ErrDiverged) {
				t.Fatalf("seed %d step %d: merge: %v, the reference says possible %v", seed, step, err, ok)
			}
			if ok {
				x.line = [2][]int{slices.Clone(y.line[0]), slices.Clone(y.line[1])}
			}
		case op < 9 && len(cuts) > 3 || len(cuts) > 8:
			what = "release cut"
			i := rng.IntN(len(cuts))
			check(t, cuts[i].cut.Release())
			cuts = slices.Delete(cuts, i, i+1)
		case len(groups) > 1 && x != groups[0]:
			what = "release group"
			check(t, x.g.Release())
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
