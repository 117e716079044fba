package store

import "testing"

// BenchmarkWindowAppendRow appends rows of 1 KiB keys, 1 KiB values and
// a token, one at a time, to a window of 512 rows in a pool of
// row-sized blocks, as a decode step of a sliding-window model does:
// each append past the window drops the oldest row's blocks. A head
// takes 4096 rows (eight windows), then the next starts.
func BenchmarkWindowAppendRow(b *testing.B) {
	p := benchPool(b, benchBackend(b), PoolOptions{})
	l := &Layout{Type: "KVW", Columns: []Column{
		{Name: "Keys", ElemSize: 4, Width: 256}, {Name: "Values", ElemSize: 4, Width: 256}, {Name: "Token", ElemSize: 4, Width: 1},
	}, Growth: Append, Window: 512}
	row := zeroRows(l, 1)
	var h *Head
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%4096 == 0 {
			if h != nil {
				check(b, h.Release())
			}
			h = must[*Head](b)(p.NewHead(l, "s"))
		}
		check(b, h.Append(row))
	}
	check(b, h.Release())
}
