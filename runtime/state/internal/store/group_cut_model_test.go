package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestGroupCutModel drives optional groups of three members that keep
// checkpoints, and their cuts (SnapshotInto, Snapshot, At of past
// versions), under a MaxBytes cap that mandatory one-block heads press on,
// with and without a host tier: members written, cuts taken, members of a
// cut released one by one, cuts released, groups rolled back to cuts
// (evicted, in the tier, partly released, off the group's line). Against
// plain Go slices of every version it checks, after every step:
//
//   - rows: each member of a cut that answers reads its version's rows;
//   - whole: a cut's members are evicted together or not at all, both by
//     the flags the pool keeps and by what reads answer, whichever of the
//     eviction, the tier's drop and a return left them;
//   - rollback: one succeeds exactly when the cut is of the group's line
//     and whole, and leaves every member at the cut's version;
//   - the pool's invariants, and at the end that every byte goes back.
//
// Which check catches which defect, found by reverting each fix: whole a
// cut's snapshots evicted one by one, and a cut whose member stayed in the
// tier when another came back, whose eviction then dropped the members in
// device memory alone; at 3,000 steps, a new group refused room while
// cuts that share their blocks among themselves, each freeing nothing
// alone, held it (jointVictims).
func TestGroupCutModel(t *testing.T) {
	steps := modelSteps(t, 400)
	for _, tier := range []bool{false, true} {
		for _, seed := range statetest.Seeds(0, 1, 2, 3, 4, 5) {
			t.Run(fmt.Sprintf("tier=%v/%d", tier, seed), func(t *testing.T) { runGroupCutModel(t, seed, tier, steps) })
		}
	}
}

// cutFiller is a mandatory head of one 256-byte block: the pressure.
var cutFiller = &Layout{Type: "Small", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}, Growth: Mutable, Bound: 1}

// cutKey names a version of member m of the model's group generation gen
// (a new group replaces one evicted).
type cutKey struct {
	gen, m int
	v      Version
}

// modelCut is a cut the model holds: its group's generation, its members'
// versions, and which members were released alone.
type modelCut struct {
	c        *GroupSnap
	gen      int
	vs       []Version
	released []bool
}

// cutModel is the reference: every version's rows, its parent, and each of
// member 0's versions with every member's version at its commit.
type cutModel struct {
	t      *testing.T
	rows   map[cutKey][][]byte // every version's columns
	parent map[cutKey]Version
	at     map[cutKey][]Version // member 0's version -> every member's at its commit
	cur    []Version
	gen    int
}

// cutLayouts returns the members' layouts: optional, mutable, keeping
// checkpoints.
func cutLayouts(rng *rand.Rand) []*Layout {
	l0 := kv(Mutable, 16, Keep)
	l1 := rec(Keep)
	l2 := &Layout{Type: "W", Columns: []Column{{Name: "Row", ElemSize: 8, Width: 32}}, Growth: Mutable, Bound: 2, Descendants: Keep}
	ls := []*Layout{l0, l1, l2}
	for _, l := range ls {
		l.Retention = Optional
		l.Checkpoint = &CheckpointPolicy{Every: 1 + rng.IntN(2), Keep: 2 + rng.IntN(4)}
	}
	return ls
}

// layoutRowBytes returns each column's row bytes.
func layoutRowBytes(l *Layout) []int {
	var rb []int
	for _, c := range l.Columns {
		rb = append(rb, c.ElemSize*c.Width)
	}
	return rb
}

// isAncestor reports whether a is b or an ancestor of b on member i.
func (m *cutModel) isAncestor(gen, i int, a, b Version) bool {
	for v := b; ; {
		if v == a {
			return true
		}
		q, ok := m.parent[cutKey{gen, i, v}]
		if !ok {
			return false
		}
		v = q
	}
}

// readWhole reads every row of s, of layout l.
func readWhole(s *Snap, l *Layout) ([][]byte, error) {
	n := l.Bound
	dst := make([][]byte, len(l.Columns))
	for c, rb := range layoutRowBytes(l) {
		dst[c] = make([]byte, n*rb)
	}
	return dst, s.Read(0, n, dst)
}

func runGroupCutModel(t *testing.T, seed uint64, tier bool, steps int) {
	rng := rand.New(rand.NewPCG(seed, 77))
	capBlocks := 40 + rng.IntN(40)
	opt := PoolOptions{BlockBytes: 256, MaxBytes: int64(capBlocks) * 256}
	if tier {
		opt.HostTier = int64(8+rng.IntN(40)) * 256
	}
	p := newPool(t, opt)
	ls := cutLayouts(rng)
	m := &cutModel{t: t, rows: map[cutKey][][]byte{}, parent: map[cutKey]Version{}, at: map[cutKey][]Version{}}
	var g *Group
	var fills []*Head
	newGroup := func() {
		m.gen++
		for {
			var err error
			g, err = NewGroup(p, "o", ls...)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrNoMemory) || len(fills) == 0 {
				t.Fatal(err)
			}
			k := min(len(fills), 8)
			for _, h := range fills[:k] {
				check(t, h.Release())
			}
			fills = fills[k:]
		}
		m.cur = make([]Version, 3)
		for i, l := range ls {
			m.cur[i] = g.Head(i).Version()
			cols := make([][]byte, len(l.Columns))
			for c, rb := range layoutRowBytes(l) {
				cols[c] = make([]byte, l.Bound*rb)
			}
			m.rows[cutKey{m.gen, i, m.cur[i]}] = cols
		}
		m.at[cutKey{m.gen, 0, m.cur[0]}] = slices.Clone(m.cur)
	}
	newGroup()
	var cuts []*modelCut
	var stats struct{ snap, at, atOK, rb, rbOK, evictedReads, tierReads, regroup, nomem, relMember, split int }
	isSoft := func(err error) bool { return errors.Is(err, ErrNoMemory) }
	// checkCut reads every member not released: each reads its version's
	// rows or every one answers ErrEvicted.
	checkCut := func(what string, c *modelCut) {
		t.Helper()
		var ok, evicted []int
		dropped := map[bool][]int{}
		for i := range 3 {
			if c.released[i] {
				continue
			}
			s := c.c.Snap(i)
			s.mu.RLock()
			dropped[s.evicted && s.tier == nil] = append(dropped[s.evicted && s.tier == nil], i)
			if s.tier != nil {
				stats.tierReads++
			}
			s.mu.RUnlock()
		}
		inTier := map[bool]int{}
		for i := range 3 {
			if !c.released[i] {
				s := c.c.Snap(i)
				s.mu.RLock()
				inTier[s.tier != nil]++
				s.mu.RUnlock()
			}
		}
		if inTier[true] > 0 && inTier[false] > 0 {
			stats.split++
		}
		if len(dropped[true]) > 0 && len(dropped[false]) > 0 {
			t.Fatalf("%s: cut gen %d %v: members %v dropped, members %v not (released %v)", what, c.gen, c.vs, dropped[true], dropped[false], c.released)
		}
		for i := range 3 {
			if c.released[i] {
				continue
			}
			s := c.c.Snap(i)
			got, err := readWhole(s, ls[i])
			switch {
			case err == nil:
				if s.Version() != c.vs[i] {
					t.Fatalf("%s: member %d at version %d, want %d", what, i, s.Version(), c.vs[i])
				}
				if want := m.rows[cutKey{c.gen, i, c.vs[i]}]; !sameCols(got, want) {
					t.Fatalf("%s: cut gen %d member %d v%d reads other rows", what, c.gen, i, c.vs[i])
				}
				ok = append(ok, i)
			case errors.Is(err, ErrEvicted):
				evicted = append(evicted, i)
			case isSoft(err):
				stats.nomem++
				return
			default:
				t.Fatalf("%s: member %d: %v", what, i, err)
			}
		}
		if len(ok) > 0 && len(evicted) > 0 {
			t.Fatalf("%s: cut gen %d %v: members %v readable, members %v evicted (released %v)", what, c.gen, c.vs, ok, evicted, c.released)
		}
		if len(evicted) > 0 {
			stats.evictedReads++
		}
	}
	groupErr := func(what string, err error) bool {
		t.Helper()
		if err == nil {
			return true
		}
		if errors.Is(err, ErrEvicted) {
			// The optional group was evicted: a new one.
			check(t, g.Release())
			newGroup()
			stats.regroup++
			return false
		}
		if isSoft(err) {
			stats.nomem++
			return false
		}
		t.Fatalf("%s: %v", what, err)
		return false
	}
	for step := 0; step < steps; step++ {
		op := rng.IntN(100)
		what := fmt.Sprintf("step %d op %d", step, op)
		switch {
		case op < 25: // a member writes
			i := rng.IntN(3)
			l := ls[i]
			from := rng.IntN(l.Bound)
			n := 1 + rng.IntN(l.Bound-from)
			seed := byte(rng.IntN(256))
			rows := make([][]byte, len(l.Columns))
			for c, rb := range layoutRowBytes(l) {
				rows[c] = make([]byte, n*rb)
				for k := range rows[c] {
					rows[c][k] = seed + byte(k*7) + byte(c)
				}
			}
			if !groupErr(what+" Write", g.Head(i).Write(from, rows)) {
				continue
			}
			old := m.rows[cutKey{m.gen, i, m.cur[i]}]
			next := make([][]byte, len(old))
			for c, rb := range layoutRowBytes(l) {
				next[c] = slices.Clone(old[c])
				copy(next[c][from*rb:], rows[c])
			}
			v := g.Head(i).Version()
			m.parent[cutKey{m.gen, i, v}] = m.cur[i]
			m.cur[i] = v
			m.rows[cutKey{m.gen, i, v}] = next
			if i == 0 {
				m.at[cutKey{m.gen, 0, v}] = slices.Clone(m.cur)
			}
		case op < 37: // a cut
			var c *GroupSnap
			var err error
			if rng.IntN(2) == 0 {
				c = new(GroupSnap)
				err = g.SnapshotInto(c)
			} else {
				c, err = g.Snapshot()
			}
			if groupErr(what+" Snapshot", err) {
				stats.snap++
				cuts = append(cuts, &modelCut{c: c, gen: m.gen, vs: slices.Clone(m.cur), released: make([]bool, 3)})
			}
		case op < 45: // a past cut
			var line []Version
			for v := m.cur[0]; ; {
				line = append(line, v)
				q, ok := m.parent[cutKey{m.gen, 0, v}]
				if !ok {
					break
				}
				v = q
			}
			v := line[rng.IntN(min(len(line), 6))]
			stats.at++
			c, err := g.At(v)
			if err != nil {
				if errors.Is(err, ErrNotRetained) {
					continue
				}
				groupErr(what+" At", err)
				continue
			}
			stats.atOK++
			want, known := m.at[cutKey{m.gen, 0, v}]
			if !known {
				// reached by a rollback: the versions At found
				want = []Version{c.Snap(0).Version(), c.Snap(1).Version(), c.Snap(2).Version()}
			}
			cuts = append(cuts, &modelCut{c: c, gen: m.gen, vs: slices.Clone(want), released: make([]bool, 3)})
			checkCut(what+" At", cuts[len(cuts)-1])
		case op < 52: // release a member alone
			if len(cuts) == 0 {
				continue
			}
			c := cuts[rng.IntN(len(cuts))]
			i := rng.IntN(3)
			check(t, c.c.Snap(i).Release())
			c.released[i] = true
			stats.relMember++
		case op < 58: // release a cut
			if len(cuts) == 0 {
				continue
			}
			k := rng.IntN(len(cuts))
			check(t, cuts[k].c.Release())
			cuts = slices.Delete(cuts, k, k+1)
		case op < 70: // rollback
			if len(cuts) == 0 {
				continue
			}
			c := cuts[rng.IntN(len(cuts))]
			stats.rb++
			err := g.Rollback(c.c)
			anc := c.gen == m.gen
			for i := range 3 {
				anc = anc && m.isAncestor(m.gen, i, c.vs[i], m.cur[i])
			}
			rel := slices.Contains(c.released, true)
			switch {
			case err == nil:
				if !anc || rel {
					t.Fatalf("%s: rollback to gen %d %v from %v (ancestor %v, released %v) succeeded", what, c.gen, c.vs, m.cur, anc, c.released)
				}
				stats.rbOK++
				m.cur = slices.Clone(c.vs)
				for i := range 3 {
					if g.Head(i).Version() != m.cur[i] {
						t.Fatalf("%s: member %d at %d after rollback, want %d", what, i, g.Head(i).Version(), m.cur[i])
					}
				}
			case errors.Is(err, ErrReleased) && rel:
			case errors.Is(err, ErrNotAncestor) && !anc:
			case errors.Is(err, ErrEvicted):
				// the cut or the group: tell which
				if g.Head(0).Len() == 0 {
					groupErr(what, err)
				}
				checkCut(what+" rollback evicted", c)
			case isSoft(err):
				stats.nomem++
			default:
				t.Fatalf("%s: rollback to gen %d %v from %v (ancestor %v, released %v): %v", what, c.gen, c.vs, m.cur, anc, c.released, err)
			}
		default: // pressure
			if rng.IntN(3) > 0 || len(fills) == 0 {
				for range 1 + rng.IntN(capBlocks/3) {
					h, err := p.NewHead(cutFiller, "z")
					if err != nil {
						if !isSoft(err) {
							t.Fatal(err)
						}
						break
					}
					fills = append(fills, h)
				}
			} else {
				k := rng.IntN(len(fills) + 1)
				for _, h := range fills[:k] {
					check(t, h.Release())
				}
				fills = fills[k:]
			}
		}
		for i, c := range cuts {
			checkCut(fmt.Sprintf("%s cut %d", what, i), c)
		}
		if step%25 == 0 {
			checkInv(t, p)
		}
	}
	t.Logf("%+v %+v", stats, p.Stats())
	checkInv(t, p)
	for _, c := range cuts {
		check(t, c.c.Release())
	}
	for _, h := range fills {
		check(t, h.Release())
	}
	check(t, g.Release())
	p.WaitPending()
	if st := p.Stats(); st.PhysicalBytes != 0 || st.TierBytes != 0 || st.Live != 0 || st.LogicalBytes != 0 {
		t.Fatalf("after releasing everything: %+v", st)
	}
}
