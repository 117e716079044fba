package store

import "testing"

// TestMoveAllocatesNothing: a rollback or a merge, of one head or of a
// group's members, allocates nothing once the heads have their blocks (a
// speculative decoder rolls back every step).
func TestMoveAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	p := newPool(t, PoolOptions{})
	h := must[*Head](t)(p.NewHead(rec(Keep), "s"))
	defer h.Release()
	check(t, h.Write(0, recRow(1)))
	var s Snap
	check(t, h.SnapshotInto(&s))
	defer s.Release()
	var c Head
	check(t, h.BranchInto(&c))
	defer c.Release()
	g := newTestGroup(t, p, Keep)
	defer g.Release()
	check(t, g.Head(1).Write(0, recRow(2)))
	cut := must[*GroupSnap](t)(g.Snapshot())
	defer cut.Release()
	child := must[*Group](t)(g.Branch())
	defer child.Release()
	for name, f := range map[string]func() error{
		"Head.Rollback":  func() error { return h.Rollback(&s) },
		"Head.Merge":     func() error { return h.Merge(&c) },
		"Group.Rollback": func() error { return g.Rollback(cut) },
		"Group.Merge":    func() error { return g.Merge(child) },
	} {
		check(t, f()) // the first may free what the head held past the target
		var err error
		if n := testing.AllocsPerRun(100, func() { err = f() }); n > 0 {
			t.Errorf("%s: %.2f allocations a call; want none", name, n)
		}
		check(t, err)
	}
}
