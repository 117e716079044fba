package store

import (
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// A short append takes its blocks with their old fills kept
// (handFilled) and sets every one: a head that gives back blocks full of
// its rows and takes them again for fewer rows, by Append, AppendAsync
// and AppendDevice, has each block's fill say the rows it holds now.
func TestShortAppendSetsKeptFills(t *testing.T) {
	be := device.Host()
	defer be.Close()
	sb := be.(device.Streams)
	p, err := NewPool(be, PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	st, err := sb.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appends := map[string]func(h *Head, rows [][]byte) error{
		"Append": func(h *Head, rows [][]byte) error { return h.Append(rows) },
		"AppendAsync": func(h *Head, rows [][]byte) error {
			if err := h.AppendAsync(st, rows); err != nil {
				return err
			}
			return st.Sync()
		},
		"AppendDevice": func(h *Head, rows [][]byte) error {
			_, err := h.AppendDevice(len(rows[1]) / 8)
			return err
		},
	}
	for name, appendRows := range appends {
		for _, n := range []int{1000, 130, 1000, 7, 333} { // full blocks, then fewer rows in them
			h, err := p.NewHead(kv(Append, 0, Keep), "s")
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []int{n, n / 2} {
				if err := appendRows(h, kvRows(k, 1)); err != nil {
					t.Fatalf("%s of %d rows: %v", name, k, err)
				}
			}
			rows := h.r.rows
			for c, per := range h.perBlock {
				rb, tr := h.rowBytes[c], &h.r.cols[c]
				for i := range tr.n {
					want := (min(rows, (i+1)*per) - i*per) * rb
					if !tr.get(i).ClaimFill(want, want) {
						t.Errorf("%s, %d and %d rows: column %d's block %d does not have a fill of %d bytes", name, n, n/2, c, i, want)
					}
				}
			}
			h.Release()
		}
	}
}
