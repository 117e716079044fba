package store

import (
	"bytes"
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
