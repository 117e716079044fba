package store

import (
	"math/rand/v2"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// The three figures of docs/BENCHMARKS.md, "Block sizes", measured in bytes
// (deterministic, so tests assert them and benchmarks report them beside
// the figures of the old 64 KiB default).

// kvCacheLayout is a decoder KV cache's row: keys and values of 128
// float16 each, a position and a step.
func kvCacheLayout(dim int) *Layout {
	return &Layout{Type: "KV", Columns: []Column{
		{Name: "Keys", ElemSize: 2, Width: dim}, {Name: "Values", ElemSize: 2, Width: dim},
		{Name: "Pos", ElemSize: 8, Width: 1}, {Name: "At", ElemSize: 8, Width: 1},
	}}
}

func zeroRows(l *Layout, n int) [][]byte {
	cols := make([][]byte, len(l.Columns))
	for i, c := range l.Columns {
		cols[i] = make([]byte, n*c.RowBytes())
	}
	return cols
}

// oneRowRatio is a one-row session's physical bytes over its logical.
func oneRowRatio(t testing.TB, opt PoolOptions, l *Layout) float64 {
	p, err := NewPool(device.Host(), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h, err := p.NewHead(l, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if err := h.Append(zeroRows(l, 1)); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	return float64(st.PhysicalBytes) / float64(st.LogicalBytes)
}

// beamRatio is a 64-way beam search's physical bytes over the ideal: a
// prompt of prefix rows, then 64 branches that each append tail rows one
// at a time; ideal is the prompt once plus every beam's own rows.
func beamRatio(t testing.TB, opt PoolOptions, l *Layout, prefix, tail int) float64 {
	p, err := NewPool(device.Host(), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h, err := p.NewHead(l, "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Append(zeroRows(l, prefix)); err != nil {
		t.Fatal(err)
	}
	var beams []*Head
	for range 64 {
		b, err := h.Branch()
		if err != nil {
			t.Fatal(err)
		}
		beams = append(beams, b)
	}
	row := zeroRows(l, 1)
	for range tail {
		for _, b := range beams {
			if err := b.Append(row); err != nil {
				t.Fatal(err)
			}
		}
	}
	var rowSum int64
	for _, c := range l.Columns {
		rowSum += int64(c.RowBytes())
	}
	ideal := int64(prefix+64*tail) * rowSum
	phys := p.Stats().PhysicalBytes
	h.Release()
	for _, b := range beams {
		b.Release()
	}
	return float64(phys) / float64(ideal)
}

// historyRatio is a checkpointed state's history bytes over the bytes
// its deltas change: writes of one row at scattered places of a mutable
// state, or appends of one row, 64 versions, with no checkpoint after the
// first so that every delta is kept.
func historyRatio(t testing.TB, opt PoolOptions, l *Layout, mutable bool) float64 {
	l = l.clone()
	l.Checkpoint = &CheckpointPolicy{Every: 1 << 20, Keep: 1}
	if mutable {
		l.Growth, l.Bound = Mutable, 4096
	}
	p, err := NewPool(device.Host(), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h, err := p.NewHead(l, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	rng := rand.New(rand.NewPCG(1, 2))
	row := zeroRows(l, 1)
	var changed int64
	for range 64 {
		if mutable {
			err = h.Write(rng.IntN(l.Bound), row)
		} else {
			err = h.Append(row)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range row {
			changed += int64(len(c))
		}
	}
	return float64(h.Stats().HistoryBytes) / float64(changed)
}

var oldDefault = PoolOptions{BlockBytes: 64 << 10}

func TestRowSizedBlockFigures(t *testing.T) {
	wideRows := []*Layout{
		kvCacheLayout(256), // 1040-byte rows in four columns
		kvCacheLayout(1024),
		{Type: "One", Columns: []Column{{Name: "A", ElemSize: 4, Width: 256}}},
		{Type: "Odd", Columns: []Column{{Name: "A", ElemSize: 1, Width: 1025}, {Name: "B", ElemSize: 8, Width: 3}}},
		{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 4, Width: 100000}}},
	}
	for _, l := range wideRows {
		if r := oneRowRatio(t, PoolOptions{}, l); r > 2 {
			t.Errorf("%s (%v): a one-row session costs %.2fx its logical bytes, want at most 2x", l.Type, l.Columns, r)
		}
	}
	for _, dim := range []int{128, 256, 1024} {
		for _, shape := range [][2]int{{1000, 100}, {512, 16}, {37, 5}} {
			if r := beamRatio(t, PoolOptions{}, kvCacheLayout(dim), shape[0], shape[1]); r > 1.2 {
				t.Errorf("dim %d, prompt %d, %d steps: beam search at %.2fx the ideal, want at most 1.2x", dim, shape[0], shape[1], r)
			}
		}
	}
	for _, l := range append(wideRows[:4], kvCacheLayout(128)) {
		for _, mutable := range []bool{false, true} {
			if r := historyRatio(t, PoolOptions{}, l, mutable); r > 2 {
				t.Errorf("%s (mutable %v): history costs %.2fx the bytes its deltas change, want at most 2x", l.Type, mutable, r)
			}
		}
	}
}

// TestBlockRowsHonoured: a layout's BlockRows sets its columns' blocks,
// on a row-sized pool and on one with a block size alike.
func TestBlockRowsHonoured(t *testing.T) {
	l := kvCacheLayout(128) // 256-byte keys and values, 8-byte Pos and At
	l.BlockRows = 16
	for _, opt := range []PoolOptions{{}, {BlockBytes: 1 << 10}} {
		p := newPool(t, opt)
		h := must[*Head](t)(p.NewHead(l, "s"))
		check(t, h.Append(zeroRows(l, 17)))
		// Every column holds exactly 16 rows a block: Keys and Values
		// blocks of 4 KiB, two each; Pos and At 128 bytes rounded up to
		// 256 (the alignment's room stays unused), two each.
		if st := h.Stats(); st.PhysicalBytes != 4*4096+4*256 {
			t.Errorf("pool %+v: %d physical bytes, want %d", opt, st.PhysicalBytes, 4*4096+4*256)
		}
		check(t, h.Release())
	}
	l.BlockRows = -1
	if _, err := newPool(t, PoolOptions{}).NewHead(l, "s"); err == nil {
		t.Fatal("negative BlockRows accepted")
	}
}

// BenchmarkBlockFigures reports the three figures for the old default
// (64 KiB blocks) and for row-sized blocks: one-row session (1040-byte
// rows), 64-way beam search (528-byte rows, a 1000-row prompt, 100 steps)
// and history (one-row writes of 528-byte rows).
func BenchmarkBlockFigures(b *testing.B) {
	for _, tc := range []struct {
		name string
		opt  PoolOptions
	}{{"64KiB", oldDefault}, {"rowsized", PoolOptions{}}} {
		b.Run(tc.name, func(b *testing.B) {
			var one, beam, hist float64
			for b.Loop() {
				one = oneRowRatio(b, tc.opt, kvCacheLayout(256))
				beam = beamRatio(b, tc.opt, kvCacheLayout(128), 1000, 100)
				hist = historyRatio(b, tc.opt, kvCacheLayout(128), true)
			}
			b.ReportMetric(one, "onerow-x")
			b.ReportMetric(beam, "beam-x")
			b.ReportMetric(hist, "history-x")
		})
	}
}

// BenchmarkAppendRow appends one row (a decode step: 528 bytes in four
// columns) to a state, and appends the same bytes to four plain Go slices
// side by side: ratio is the store's time over the slices'. Both start
// over every 4096 rows.
func BenchmarkAppendRow(b *testing.B) {
	for _, tc := range []struct {
		name string
		opt  PoolOptions
	}{{"64KiB", oldDefault}, {"rowsized", PoolOptions{}}} {
		b.Run(tc.name, func(b *testing.B) {
			l := kvCacheLayout(128)
			p := benchPool(b, benchBackend(b), tc.opt)
			row := zeroRows(l, 1)
			var h *Head
			renew := func() {
				if h != nil {
					h.Release()
				}
				var err error
				if h, err = p.NewHead(l, "s"); err != nil {
					b.Fatal(err)
				}
			}
			renew()
			n := 0
			store := func() {
				if n++; n%4096 == 0 {
					renew()
				}
				if err := h.Append(row); err != nil {
					b.Fatal(err)
				}
			}
			plainCols := make([][]byte, len(row))
			m := 0
			plain := func() {
				if m++; m%4096 == 0 {
					for i := range plainCols {
						plainCols[i] = nil
					}
				}
				for i, c := range row {
					plainCols[i] = append(plainCols[i], c...)
				}
			}
			sideBySide(b, 256, store, "store-ns/row", plain, "slice-ns/row")
			h.Release()
		})
	}
}

func TestDeltaRows(t *testing.T) {
	classes := map[int]bool{}
	for n := 1; n <= 4096; n++ {
		k := deltaRows(n)
		if k < n || float64(k) > 1.25*float64(n) {
			t.Fatalf("deltaRows(%d) = %d: want n <= k <= 1.25n", n, k)
		}
		classes[k] = true
	}
	if len(classes) > 8+4*10 {
		t.Fatalf("%d sizes for deltas of 1 to 4096 rows", len(classes))
	}
}
