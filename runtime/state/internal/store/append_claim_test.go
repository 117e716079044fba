package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestFailedAppendReturnsItsClaim: an append past a tail block a snapshot
// shares claims the block's free bytes (Block.ClaimFill), then fails to
// take its new block (the pool is full). The failed call changes
// nothing: a smaller append that fits in the tail goes on in place after
// it, as it does without it, needing no block. By Append and AppendAsync
// on the short path, and by Append of a layout of more columns than the
// short path takes, on the general path (writeTx.take); and where the
// head held its tail alone when it failed, whose fill the general path
// set before it took its blocks, with the snapshot after the failure.
func TestFailedAppendReturnsItsClaim(t *testing.T) {
	for _, c := range []struct {
		async      bool
		cols, fail int
		late       bool // the snapshot after the failed call: the head held its tail alone
	}{
		{false, 1, 0, false}, {false, 1, 1, false}, {true, 1, 0, false}, {true, 1, 1, false},
		{false, maxRowCols + 1, 0, false}, {false, maxRowCols + 1, 1, false},
		{false, 1, 1, true}, {true, 1, 1, true}, {false, maxRowCols + 1, 1, true},
	} {
		t.Run(fmt.Sprintf("async=%v/cols=%d/failed=%d/late=%v", c.async, c.cols, c.fail, c.late), func(t *testing.T) {
			rig := newQueuedRig(t)
			p := must[*Pool](t)(NewPool(rig.b, PoolOptions{BlockBytes: 256, MaxBytes: int64(2*c.cols) * 256}))
			st := rig.stream(t)
			l := &Layout{Type: "One", Growth: Append}
			for k := range c.cols {
				l.Columns = append(l.Columns, Column{Name: fmt.Sprint("K", k), ElemSize: 4, Width: 4})
			}
			rows := func(n int, seed byte) [][]byte {
				cols := make([][]byte, c.cols)
				for k := range cols {
					cols[k] = make([]byte, 16*n)
					for i := range cols[k] {
						cols[k][i] = seed + byte(i+k)
					}
				}
				return cols
			}
			h := must[*Head](t)(p.NewHead(l, "me"))
			defer h.Release()
			check(t, h.Append(rows(3, 1)))
			snap := func() {
				s := must[*Snap](t)(h.Snapshot())
				t.Cleanup(func() { s.Release() })
			}
			if !c.late {
				snap()
			}
			o := must[*Head](t)(p.NewHead(l, "other"))
			defer o.Release()
			check(t, o.Append(rows(1, 9))) // the pool is full
			app := func(r [][]byte) error {
				if c.async {
					if err := h.AppendAsync(st, r); err != nil {
						return err
					}
					return st.Sync()
				}
				return h.Append(r)
			}
			for range c.fail {
				// 17 rows: a new block in each column, which the pool lacks.
				if err := app(rows(14, 2)); !errors.Is(err, ErrNoMemory) {
					t.Fatalf("the append past the pool: %v, want ErrNoMemory", err)
				}
			}
			if c.late {
				snap()
			}
			check(t, app(rows(2, 3)))
			got := make([][]byte, c.cols)
			for k := range got {
				got[k] = make([]byte, 5*16)
			}
			check(t, h.Read(0, 5, got))
			want := rows(3, 1)
			for k, col := range rows(2, 3) {
				if !bytes.Equal(got[k], append(want[k], col...)) {
					t.Fatalf("column %d reads other rows", k)
				}
			}
			checkInv(t, p)
		})
	}
}
