package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestRollbackAppendAllocatesNothing: a write after a rollback to a
// version nothing else holds past goes on in the head's own segment, so a
// speculative decoder's rollback and next append allocate nothing, with
// either policy, for a head and for a group's members.
func TestRollbackAppendAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	if raceDetector {
		t.Skip("under the race detector, sync.Pool drops the tree nodes kept for reuse at random")
	}
	for _, desc := range []Descendants{Invalidate, Keep} {
		p := newPool(t, PoolOptions{})
		h := must[*Head](t)(p.NewHead(kv(Append, 0, desc), "s"))
		defer h.Release()
		row := kvRows(1, 1)
		check(t, h.Append(row))
		var s Snap
		check(t, h.SnapshotInto(&s))
		defer s.Release()
		g := newTestGroup(t, p, desc)
		defer g.Release()
		check(t, g.Head(0).Append(row))
		cut := must[*GroupSnap](t)(g.Snapshot())
		defer cut.Release()
		var err error
		for name, f := range map[string]func() error{
			"Head": func() error {
				for range 3 {
					if err := h.Append(row); err != nil {
						return err
					}
				}
				if err := h.Rollback(&s); err != nil {
					return err
				}
				return h.Append(row)
			},
			"Group": func() error {
				if err := g.Head(0).Append(row); err != nil {
					return err
				}
				if err := g.Rollback(cut); err != nil {
					return err
				}
				return g.Head(0).Append(row)
			},
		} {
			check(t, f()) // the first takes the blocks the next ones reuse
			seg := h.pos.seg
			if name == "Group" {
				seg = g.Head(0).pos.seg
			}
			if n := testing.AllocsPerRun(100, func() { err = f() }); n > 0 {
				t.Errorf("%v, %s: %.2f allocations a rollback and append; want none", desc, name, n)
			}
			check(t, err)
			if now := h.pos.seg; name == "Head" && now != seg {
				t.Errorf("%v: the head's writes after its rollbacks started a new segment", desc)
			}
		}
	}
}

// TestLineageReuseModel runs random writes, snapshots, branches,
// rollbacks, merges and releases on one lineage, with either policy, and
// checks the store's ancestry against a plain record of each version's
// parent: isAncestor between the positions of every two handles still
// valid, which calls succeed (a rollback needs its target to be an
// ancestor, a merge its head), and which handles a rollback invalidates.
// Heads that roll back to versions of their own segment go on writing in
// it (segment.held); the test counts those writes, and the ones that
// started a segment, to make sure it saw both.
func TestLineageReuseModel(t *testing.T) {
	for _, desc := range []Descendants{Invalidate, Keep} {
		var reused, started int
		for seed := range uint64(30) {
			t.Run(fmt.Sprintf("%v/%d", desc, seed), func(t *testing.T) {
				r, s := lineageModel(t, desc, seed, 800)
				reused, started = reused+r, started+s
			})
		}
		t.Logf("%v: writes after a move: %d went on in the head's segment, %d started one", desc, reused, started)
		if reused == 0 || started == 0 {
			t.Errorf("%v: writes after a move: %d reused a segment, %d started one; want both", desc, reused, started)
		}
	}
}

type modelHandle struct {
	h       *Head // or s
	s       *Snap
	v       Version
	invalid bool
}

func (x *modelHandle) pos() position {
	if x.h != nil {
		return x.h.pos
	}
	return x.s.pos
}

func (x *modelHandle) storeInvalid() bool {
	if x.h != nil {
		return x.h.invalid.Load()
	}
	return x.s.invalid.Load()
}

func lineageModel(t *testing.T, desc Descendants, seed uint64, steps int) (reused, started int) {
	rng := rand.New(rand.NewPCG(seed, 17))
	p := newPool(t, PoolOptions{BlockBytes: 256})
	root := must[*Head](t)(p.NewHead(kv(Append, 0, desc), "m"))
	parent := map[Version]Version{}
	// anc reports whether version a is b or an ancestor of b.
	anc := func(a, b Version) bool {
		for {
			if a == b {
				return true
			}
			q, ok := parent[b]
			if !ok {
				return false
			}
			b = q
		}
	}
	heads := []*modelHandle{{h: root, v: root.Version()}}
	var snaps []*modelHandle
	row := kvRows(1, 3)
	// moved: the heads whose last call moved them (a rollback or merge),
	// to tell a write that reused a segment from one at a tip.
	moved := map[*Head]bool{}
	maxSnaps := 1 + int(seed%6) // few: a rollback often abandons versions no one holds
	pick := func(list []*modelHandle) *modelHandle { return list[rng.IntN(len(list))] }
	for step := range steps {
		op := rng.IntN(100)
		var what string
		switch {
		case op < 35: // write
			x := pick(heads)
			what = fmt.Sprintf("write on head at %d", x.v)
			seg := x.h.pos.seg
			err := x.h.Append(row)
			if x.invalid {
				if !errors.Is(err, ErrInvalidated) {
					t.Fatalf("step %d: %s, invalidated: %v; want ErrInvalidated", step, what, err)
				}
				break
			}
			check(t, err)
			nv := x.h.Version()
			parent[nv] = x.v
			x.v = nv
			if moved[x.h] {
				if x.h.pos.seg == seg {
					reused++
				} else {
					started++
				}
			}
			moved[x.h] = false
		case op < 55: // snapshot
			x := pick(heads)
			what = fmt.Sprintf("snapshot of head at %d", x.v)
			if len(snaps) >= maxSnaps { // make room: snapshots of recent versions
				i := rng.IntN(len(snaps))
				check(t, snaps[i].s.Release())
				snaps = append(snaps[:i], snaps[i+1:]...)
			}
			s, err := x.h.Snapshot()
			if x.invalid {
				if err == nil {
					t.Fatalf("step %d: %s, invalidated, succeeded", step, what)
				}
				break
			}
			check(t, err)
			snaps = append(snaps, &modelHandle{s: s, v: x.v})
		case op < 63: // branch
			x := pick(heads)
			what = fmt.Sprintf("branch of head at %d", x.v)
			if len(heads) >= 6 {
				break
			}
			c, err := x.h.Branch()
			if x.invalid {
				if err == nil {
					t.Fatalf("step %d: %s, invalidated, succeeded", step, what)
				}
				break
			}
			check(t, err)
			heads = append(heads, &modelHandle{h: c, v: x.v})
		case op < 83: // rollback
			if len(snaps) == 0 {
				break
			}
			x, s := pick(heads), pick(snaps)
			if rng.IntN(2) == 0 { // most often, one of x's ancestors
				for _, i := range rng.Perm(len(snaps)) {
					if anc(snaps[i].v, x.v) {
						s = snaps[i]
						break
					}
				}
			}
			what = fmt.Sprintf("rollback of head at %d to %d", x.v, s.v)
			err := x.h.Rollback(s.s)
			want := !x.invalid && !s.invalid && anc(s.v, x.v)
			if (err == nil) != want {
				t.Fatalf("step %d: %s: %v; the reference says success %v", step, what, err, want)
			}
			if err != nil {
				break
			}
			if desc == Invalidate {
				// Every other handle whose ancestry holds a version on
				// the line from s.v (excluded) to x.v.
				abandoned := map[Version]bool{}
				for v := x.v; v != s.v; v = parent[v] {
					abandoned[v] = true
				}
				for _, y := range append(append([]*modelHandle{}, heads...), snaps...) {
					if y == x {
						continue
					}
					for v := y.v; ; {
						if abandoned[v] {
							y.invalid = true
							break
						}
						q, ok := parent[v]
						if !ok {
							break
						}
						v = q
					}
				}
			}
			x.v = s.v
			moved[x.h] = true
		case op < 93: // merge
			if len(heads) < 2 {
				break
			}
			x, c := pick(heads), pick(heads)
			if rng.IntN(2) == 0 { // most often, one of x's descendants
				for _, i := range rng.Perm(len(heads)) {
					if heads[i] != x && anc(x.v, heads[i].v) {
						c = heads[i]
						break
					}
				}
			}
			if x == c {
				break
			}
			what = fmt.Sprintf("merge of head at %d with child at %d", x.v, c.v)
			err := x.h.Merge(c.h)
			want := !x.invalid && !c.invalid && anc(x.v, c.v)
			if (err == nil) != want {
				t.Fatalf("step %d: %s: %v; the reference says success %v", step, what, err, want)
			}
			if err != nil {
				break
			}
			x.v = c.v
			moved[x.h] = true
		default: // release
			if rng.IntN(2) == 0 && len(snaps) > 0 {
				i := rng.IntN(len(snaps))
				what = fmt.Sprintf("release of snapshot at %d", snaps[i].v)
				check(t, snaps[i].s.Release())
				snaps = append(snaps[:i], snaps[i+1:]...)
			} else if i := rng.IntN(len(heads)); validOthers(heads, i) {
				what = fmt.Sprintf("release of head at %d", heads[i].v)
				check(t, heads[i].h.Release())
				delete(moved, heads[i].h)
				heads = append(heads[:i], heads[i+1:]...)
			}
		}
		all := append(append([]*modelHandle{}, heads...), snaps...)
		for _, a := range all {
			if got := a.storeInvalid(); got != a.invalid {
				t.Fatalf("step %d, after %s: a handle at %d is invalidated: %v; the reference says %v", step, what, a.v, got, a.invalid)
			}
			if !a.invalid && a.pos().v != a.v {
				t.Fatalf("step %d, after %s: a handle at version %d has position version %d", step, what, a.v, a.pos().v)
			}
		}
		for _, a := range all {
			for _, b := range all {
				if a.invalid || b.invalid {
					continue // no call asks about an invalidated handle's ancestry
				}
				if got, want := isAncestor(a.pos(), b.pos()), anc(a.v, b.v); got != want {
					t.Fatalf("step %d, after %s: isAncestor(%d, %d) = %v; the reference says %v", step, what, a.v, b.v, got, want)
				}
			}
		}
		// Invalidated handles answer ErrInvalidated until released:
		// release some, so that the lineage keeps valid ones (the head
		// that rolled back stays valid).
		if rng.IntN(3) == 0 {
			heads = releaseInvalid(t, heads)
			snaps = releaseInvalid(t, snaps)
		}
	}
	for _, x := range snaps {
		check(t, x.s.Release())
	}
	for _, x := range heads {
		check(t, x.h.Release())
	}
	return reused, started
}

// releaseInvalid releases the invalidated handles of list and returns the
// others.
func releaseInvalid(t *testing.T, list []*modelHandle) []*modelHandle {
	out := list[:0]
	for _, x := range list {
		switch {
		case !x.invalid:
			out = append(out, x)
		case x.h != nil:
			check(t, x.h.Release())
		default:
			check(t, x.s.Release())
		}
	}
	return out
}

// validOthers reports whether a head of list but i is not invalidated.
func validOthers(list []*modelHandle, i int) bool {
	for j, x := range list {
		if j != i && !x.invalid {
			return true
		}
	}
	return false
}

// TestMergedHeadHoldsItsVersion: a head merged to its child holds the
// child's version, so the child's rollback past it, with Keep, starts a
// segment: the head's version is then no ancestor of the child's, and a
// second merge diverges.
func TestMergedHeadHoldsItsVersion(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "m"))
	defer h.Release()
	row := kvRows(1, 5)
	check(t, h.Append(row))
	c := must[*Head](t)(h.Branch())
	defer c.Release()
	check(t, c.Append(row))
	s := must[*Snap](t)(c.Snapshot())
	defer s.Release()
	check(t, c.Append(row))
	check(t, h.Merge(c))
	check(t, c.Rollback(s))
	check(t, c.Append(row))
	if isAncestor(h.pos, c.pos) {
		t.Fatalf("the merged head's version %d is an ancestor of the child's %d after the child's rollback past it", h.Version(), c.Version())
	}
	if err := h.Merge(c); !errors.Is(err, ErrDiverged) {
		t.Fatalf("a merge after the child's rollback past the head: %v; want ErrDiverged", err)
	}
}
