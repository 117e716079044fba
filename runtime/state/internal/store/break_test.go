package store

import (
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestRollbackAfterMergeKeepsTheChildsTail: a head merged to a branch that
// wrote in place in the shared tail block, then rolled back (Keep) to a
// snapshot before the branch's rows, must not write its next row over the
// branch's row: the branch stays live and reads it.
func TestRollbackAfterMergeKeepsTheChildsTail(t *testing.T) {
	p := must[*Pool](t)(NewPool(device.Host(), PoolOptions{BlockBytes: 256}))
	defer p.Close()
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "me")) // 16 rows a key block
	defer h.Release()
	check(t, h.Append(kvRows(3, 1)))
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	b := must[*Head](t)(h.Branch())
	defer b.Release()
	check(t, b.Append(kvRows(2, 2))) // in place in the shared tail block
	wantB := concat(kvRows(3, 1), kvRows(2, 2))
	check(t, h.Merge(b))
	check(t, h.Rollback(s))
	check(t, h.Append(kvRows(2, 3)))
	if !equalCols(readAll(t, h), concat(kvRows(3, 1), kvRows(2, 3))) {
		t.Errorf("the head reads other rows")
	}
	if !equalCols(readAll(t, b), wantB) {
		t.Errorf("the branch reads other rows after the head's rollback and append")
	}
}
