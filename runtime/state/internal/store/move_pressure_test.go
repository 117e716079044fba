package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// optRow is a mutable optional layout of one 256-byte row: one block.
func optRow(typ string) *Layout {
	return &Layout{Type: typ, Columns: []Column{{Name: "Row", ElemSize: 8, Width: 32}}, Growth: Mutable, Bound: 1, Retention: Optional}
}

// TestGroupRollbackTierTargets: a group's rollback to a cut whose
// snapshots are in the host tier brings each back and keeps it: bringing
// back the second does not send the first back out (a less recently used
// handle gives the room), and the members take the cut's rows.
func TestGroupRollbackTierTargets(t *testing.T) {
	p := tierPool(t, 6, 64<<10)
	x := headOf(t, p, optRow("Other"), "x")
	check(t, x.Write(0, wideRow(90)))
	g := must[*Group](t)(NewGroup(p, "a", optRow("A"), optRow("B")))
	defer g.Release()
	check(t, g.Head(0).Write(0, wideRow(1)))
	check(t, g.Head(1).Write(0, wideRow(2)))
	cut := must[*GroupSnap](t)(g.Snapshot())
	defer cut.Release()
	check(t, g.Head(0).Write(0, wideRow(3))) // the cut holds its own blocks now
	check(t, g.Head(1).Write(0, wideRow(4)))
	check(t, x.Read(0, 1, [][]byte{make([]byte, 256)})) // x used after the cut
	m1 := headOf(t, p, wide("Session", Mandatory), "m1")
	fill(t, m1, 1, 50)
	m2 := headOf(t, p, wide("Session", Mandatory), "m2")
	fill(t, m2, 2, 60)
	if cut.Snap(0).tier == nil || cut.Snap(1).tier == nil || x.tier != nil {
		t.Fatalf("cut in the tier: %v %v, x: %v; want the cut only", cut.Snap(0).tier != nil, cut.Snap(1).tier != nil, x.tier != nil)
	}
	check(t, m1.Release()) // room for one snapshot: x gives the other's
	check(t, g.Rollback(cut))
	if got := readWide(t, g.Head(0)); !bytes.Equal(got, wideRow(1)[0]) {
		t.Fatal("member 0 took other rows")
	}
	if got := readWide(t, g.Head(1)); !bytes.Equal(got, wideRow(2)[0]) {
		t.Fatal("member 1 took other rows")
	}
	checkInv(t, p)
}

// TestStepFailuresThenRollback: failed steps between a snapshot and a
// rollback to it leave nothing behind: the head, the snapshot, a branch
// and every retained version read as before, and the line the head goes
// on with after the rollback is the one it would have had.
func TestStepFailuresThenRollback(t *testing.T) {
	for _, desc := range []Descendants{Keep, Invalidate} {
		t.Run(fmt.Sprint(desc), func(t *testing.T) {
			p := newPool(t, PoolOptions{BlockBytes: 64})
			h, rows := stepHead(t, p)
			defer h.Release()
			v := h.Version()
			past := map[Version][][]byte{}
			for w := Version(1); w <= v; w++ {
				if s, err := h.At(w); err == nil {
					past[w] = readAll(t, s)
					check(t, s.Release())
				}
			}
			s := must[*Snap](t)(h.Snapshot())
			defer s.Release()
			b := must[*Head](t)(h.Branch())
			defer b.Release()
			step := stepOn(p.Backend(), []int{16, 8}, false)
			if err := h.Step([][]byte{{9}}, true, junkStep(p.Backend(), nil)); !errors.Is(err, errStep) {
				t.Fatalf("failing step: %v", err)
			}
			sameHead(t, "after a failed step", h, v, rows)
			check(t, h.Step([][]byte{{9}}, true, step))
			next := readAll(t, h)
			if err := h.Step([][]byte{{10}}, true, stepOn(p.Backend(), []int{16, 8}, true)); !errors.Is(err, errStep) {
				t.Fatalf("failing step: %v", err)
			}
			check(t, h.Rollback(s))
			sameHead(t, "after the rollback", h, v, rows)
			sameHead(t, "the branch", b, v, rows)
			if got := readAll(t, s); !equalCols(got, rows) {
				t.Fatal("the snapshot's rows changed")
			}
			for w, want := range past {
				x, err := h.At(w)
				if errors.Is(err, ErrNotRetained) && w < v-3 {
					continue // the step after the snapshot dropped the oldest checkpoint
				}
				if err != nil {
					t.Fatalf("At(%d) after the rollback: %v", w, err)
				}
				if got := readAll(t, x); !equalCols(got, want) {
					t.Fatalf("At(%d) after the rollback: other rows", w)
				}
				check(t, x.Release())
			}
			check(t, h.Step([][]byte{{9}}, true, step))
			if got := readAll(t, h); !equalCols(got, next) {
				t.Fatal("the step after the rollback made other rows")
			}
			if x, err := h.At(h.Version()); err != nil || !equalCols(readAll(t, x), next) {
				t.Fatalf("At of the step after the rollback: %v", err)
			} else {
				check(t, x.Release())
			}
			checkInv(t, p)
		})
	}
}

// TestGroupMergeTierHeads: a group's merge of a child group whose
// members, and its own, are in the host tier brings all four back and
// moves the members to the child's rows.
func TestGroupMergeTierHeads(t *testing.T) {
	p := tierPool(t, 6, 64<<10)
	g := must[*Group](t)(NewGroup(p, "a", optRow("A"), optRow("B")))
	defer g.Release()
	check(t, g.Head(0).Write(0, wideRow(1)))
	check(t, g.Head(1).Write(0, wideRow(2)))
	b := must[*Group](t)(g.Branch())
	defer b.Release()
	check(t, b.Head(0).Write(0, wideRow(3)))
	check(t, b.Head(1).Write(0, wideRow(4)))
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 4, 50)
	if g.Head(0).tier == nil && b.Head(0).tier == nil {
		t.Fatal("no member in the tier")
	}
	check(t, m.Release())
	v := b.Head(0).Version()
	check(t, g.Merge(b))
	if got := readWide(t, g.Head(0)); !bytes.Equal(got, wideRow(3)[0]) || g.Head(0).Version() != v {
		t.Fatal("member 0 took other rows")
	}
	if got := readWide(t, g.Head(1)); !bytes.Equal(got, wideRow(4)[0]) {
		t.Fatal("member 1 took other rows")
	}
	checkInv(t, p)
}
