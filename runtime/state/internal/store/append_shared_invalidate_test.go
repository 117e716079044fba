package store

import "testing"

// TestInvalidateSparesParent: a branch that rolls back to its
// snapshot of the branch point invalidates nothing of its parent, which
// appended past the shared tail meanwhile.
func TestInvalidateSparesParent(t *testing.T) {
	l := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 4096, BlockRows: 4, Descendants: Invalidate}
	p := newPool(t, PoolOptions{})
	root := must[*Head](t)(p.NewHead(l, "me"))
	defer root.Release()
	check(t, root.Append(tokRow(1)))
	b := must[*Head](t)(root.Branch())
	defer b.Release()
	s := must[*Snap](t)(b.Snapshot())
	defer s.Release()
	check(t, b.Append(tokRow(2)))
	check(t, root.Append(tokRow(3)))
	check(t, b.Rollback(s))
	if err := root.Append(tokRow(4)); err != nil {
		t.Fatalf("the root, after a branch rolled back to a snapshot of the branch point: %v", err)
	}
}
