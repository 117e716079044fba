package store

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// Serving paths: the calls a serving loop makes per step, each measured
// through the public API against the baseline a user would pick, side by
// side in one benchmark (docs/BENCHMARKS.md, "Serving paths"). Every one
// runs on a pool made with PoolOptions{}, whose blocks follow the rows.
// `-bench Serving` picks them all.

// BenchmarkServingBulkAppend appends a batch of 1.5 MiB (64K rows of 24
// bytes in two columns) to a state, against copy() of the same bytes into
// a preallocated Go buffer of as much memory (64 batches' worth, written in
// turn, as the head's blocks are; the head starts over every 64 batches):
// ratio is the store's time over memmove's, the inverse of the throughput
// ratio. A round is 64 batches, a head's whole life: its release, every
// 64 batches, counts in every round (with rounds of fewer, the median
// left it out).
func BenchmarkServingBulkAppend(b *testing.B) { benchBulkAppend(b, 0, false) }

// BenchmarkServingBulkAppendBlockRows is BenchmarkServingBulkAppend with
// the rows a block holds set (Layout.BlockRows, the contract's `block
// rows=N`): the store's bookkeeping is per block, so that its cost over
// memmove's falls as the blocks grow (docs/BENCHMARKS.md, "Bulk appends
// and the rows of a block"). rows/block reports the rows of a block of
// the first column; default is the pool's choice for the layout.
func BenchmarkServingBulkAppendBlockRows(b *testing.B) {
	for _, rows := range []int{0, 64, 256, 1024} {
		name := "default"
		if rows > 0 {
			name = fmt.Sprint(rows)
		}
		b.Run(name, func(b *testing.B) { benchBulkAppend(b, rows, true) })
	}
}

// benchBulkAppend is BenchmarkServingBulkAppend's side by side, with
// blockRows rows a block (0: the pool's choice), reporting them when
// perBlock is set.
func benchBulkAppend(b *testing.B, blockRows int, perBlock bool) {
	const batch = 1 << 16
	rows := kvRows(batch, 3)
	p := benchPool(b, benchBackend(b), PoolOptions{})
	l := kv(Append, 0, Keep)
	l.BlockRows = blockRows
	var h *Head
	n := 0
	store := func() {
		if n%64 == 0 {
			if h != nil {
				h.Release()
			}
			var err error
			if h, err = p.NewHead(l, "s"); err != nil {
				b.Fatal(err)
			}
		}
		n++
		if err := h.Append(rows); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([][]byte, len(rows))
	for i, c := range rows {
		dst[i] = make([]byte, 64*len(c))
	}
	m := 0
	memmove := func() {
		for k, c := range rows {
			copy(dst[k][m%64*len(c):], c)
		}
		m++
	}
	// Warm both: the store's slabs and the buffer's pages are touched once.
	for range 64 {
		store()
		memmove()
	}
	ta := sideBySide(b, 64, store, "ns/append", memmove, "ns/memmove")
	b.ReportMetric(float64(len(rows[0])+len(rows[1]))/float64(ta.Nanoseconds())*1e3, "MB/s")
	if perBlock {
		b.ReportMetric(float64(h.perBlock[0]), "rows/block")
	}
	h.Release()
}

// BenchmarkServingAppendAsync appends on a host stream with AppendAsync
// (staging copy, append, queued copies, an event), 8 calls and then the
// stream's Sync per round, against two baselines, in turn: the backend's
// own CopyHtoDAsync of the same bytes from page-locked memory to one
// allocation, 8 copies (each to its own part of it, as the appends' rows
// go to their own blocks: copies to one place would stay in the CPU's
// cache) and then Sync; and the same copies from a ring of page-locked
// staging buffers the rows are copied into first, with an event recorded
// after each (what a user queueing rows from Go memory would write). bulk:
// 496 rows of 528 bytes in four columns (256 KiB); row: one row of 2064
// bytes in four columns. ratio and staged-ratio are the medians over
// rounds of AppendAsync's time over each baseline's.
func BenchmarkServingAppendAsync(b *testing.B) {
	for _, tc := range []struct {
		name      string
		dim, rows int
	}{{"bulk256KiB", 128, 496}, {"row2KiB", 512, 1}} {
		b.Run(tc.name, func(b *testing.B) { benchAppendAsync(b, PoolOptions{}, kvCacheLayout(tc.dim), tc.rows) })
	}
}

// benchAppendAsync measures 8 AppendAsync calls of rows rows of l on a
// host stream, then the stream's Sync, against the two baselines of
// BenchmarkServingAppendAsync, in turn, on a pool made with opt. It
// returns the bytes of one call.
func benchAppendAsync(b *testing.B, opt PoolOptions, l *Layout, rows int) (bytes int) {
	be := device.Host()
	defer be.Close()
	sb := be.(device.Streams)
	p, err := NewPool(be, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	st, err := sb.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	l.Growth = Append
	batch := zeroRows(l, rows)
	n := 0
	for _, c := range batch {
		n += len(c)
	}
	pin, err := sb.HostAlloc(n)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.HostFree(pin)
	const calls = 8
	dst, err := be.Alloc(calls * n) // each call's bytes to their own place, as the head's are
	if err != nil {
		b.Fatal(err)
	}
	defer be.Free(dst)
	synced := func(queue func()) func() time.Duration {
		return func() time.Duration {
			start := time.Now()
			queue()
			if err := st.Sync(); err != nil {
				b.Fatal(err)
			}
			return time.Since(start)
		}
	}
	var h *Head
	store := synced(func() {
		for range calls {
			if err := h.AppendAsync(st, batch); err != nil {
				b.Fatal(err)
			}
		}
	})
	raw := synced(func() {
		for k := range calls {
			if err := sb.CopyHtoDAsync(st, dst+device.Ptr(k*n), pin); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What a user would write to queue rows from Go memory without
	// AppendAsync: a ring of page-locked staging buffers, each copied into
	// and queued from, with an event that says when it may be refilled.
	ring := make([][]byte, calls)
	landed := make([]device.Event, calls)
	for k := range ring {
		if ring[k], err = sb.HostAlloc(n); err != nil {
			b.Fatal(err)
		}
		defer sb.HostFree(ring[k])
	}
	defer func() {
		for _, ev := range landed {
			if ev != nil {
				ev.Close()
			}
		}
	}()
	staged := synced(func() {
		for k, buf := range ring {
			if ev := landed[k]; ev != nil {
				if err := ev.Wait(); err != nil {
					b.Fatal(err)
				}
				ev.Close()
			}
			off := 0
			for _, c := range batch {
				off += copy(buf[off:], c)
			}
			if err := sb.CopyHtoDAsync(st, dst+device.Ptr(k*n), buf); err != nil {
				b.Fatal(err)
			}
			if landed[k], err = sb.Record(st); err != nil {
				b.Fatal(err)
			}
		}
	})
	fresh := func() time.Duration { // a new head a round, made and released untimed
		if h, err = p.NewHead(l, "a"); err != nil {
			b.Fatal(err)
		}
		defer h.Release()
		return store()
	}
	fresh() // the pool's slabs and staging taken once
	staged()
	var ta, tr, ts time.Duration
	var vsRaw, vsStaged []float64
	for i := 0; b.Loop(); i++ {
		var da, dr, ds time.Duration
		switch i % 3 { // each goes first in turn
		case 0:
			da, dr, ds = fresh(), raw(), staged()
		case 1:
			dr, ds, da = raw(), staged(), fresh()
		default:
			ds, da, dr = staged(), fresh(), raw()
		}
		ta, tr, ts = ta+da, tr+dr, ts+ds
		vsRaw = append(vsRaw, float64(da)/float64(dr))
		vsStaged = append(vsStaged, float64(da)/float64(ds))
	}
	per := float64(len(vsRaw) * calls)
	b.ReportMetric(float64(ta.Nanoseconds())/per, "ns/append-async")
	b.ReportMetric(float64(tr.Nanoseconds())/per, "ns/raw-async")
	b.ReportMetric(float64(ts.Nanoseconds())/per, "ns/staged-async")
	b.ReportMetric(median(vsRaw), "ratio")
	b.ReportMetric(median(vsStaged), "staged-ratio")
	return n
}

// median returns the median of xs, which it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// BenchmarkServingAppendOneRow appends one row (a decode step) to a state,
// and appends the same bytes to one Go slice per column, regrown by append,
// side by side: ratio is the store's time over the slices'. Both start
// over every 4096 rows. 528B: keys and values of 128 two-byte elements and
// two 8-byte columns; 2KiB: of 512. The store-only sub-benchmarks run the
// store's side alone, for -benchmem: allocations per row in steady state.
func BenchmarkServingAppendOneRow(b *testing.B) {
	for _, dim := range []int{128, 512} {
		l := kvCacheLayout(dim)
		name := "528B"
		if dim == 512 {
			name = "2KiB"
		}
		b.Run(name, func(b *testing.B) {
			store := oneRowStore(b, l)
			row := zeroRows(l, 1)
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
		})
		b.Run(name+"/store-only", func(b *testing.B) {
			store := oneRowStore(b, l)
			for range 8192 {
				store() // steady state: the head's renewals reuse the pool's blocks
			}
			b.ReportAllocs()
			for b.Loop() {
				store()
			}
		})
	}
}

// oneRowStore returns a function that appends one row of l to a head of a
// row-sized pool, starting a new head every 4096 rows.
func oneRowStore(b *testing.B, l *Layout) func() {
	p := benchPool(b, benchBackend(b), PoolOptions{})
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
	b.Cleanup(func() { h.Release() })
	n := 0
	return func() {
		if n++; n%4096 == 0 {
			renew()
		}
		if err := h.Append(row); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServingBulkAppendPerBlock runs BenchmarkServingBulkAppend's
// store side alone, a round a head's whole life (64 batches and the
// release), timing the backend's batch copies apart: beyond-copy is the
// median over rounds of what the store spends per block besides them, in
// nanoseconds (2389 row-sized blocks a batch), and copy-share the median
// of the copies' part of its time.
func BenchmarkServingBulkAppendPerBlock(b *testing.B) {
	const batch = 1 << 16
	rows := kvRows(batch, 3)
	tb := &copyTimer{Backend: benchBackend(b)}
	if _, ok := tb.Backend.(device.BatchCopier); !ok {
		b.Skip("the backend copies no batch")
	}
	p := benchPool(b, tb, PoolOptions{})
	l := kv(Append, 0, Keep)
	round := func() (total, copies time.Duration, blocks int) {
		h, err := p.NewHead(l, "s")
		if err != nil {
			b.Fatal(err)
		}
		for _, per := range h.perBlock { // a batch's blocks, column by column
			blocks += (batch + per - 1) / per
		}
		tb.took = 0
		start := time.Now()
		for range 64 {
			if err := h.Append(rows); err != nil {
				b.Fatal(err)
			}
		}
		h.Release()
		return time.Since(start), tb.took, blocks
	}
	round() // the slabs' pages touched once
	var beyond, share []float64
	for b.Loop() {
		total, copies, blocks := round()
		beyond = append(beyond, float64(total-copies)/64/float64(blocks))
		share = append(share, float64(copies)/float64(total))
	}
	b.ReportMetric(median(beyond), "beyond-copy-ns/block")
	b.ReportMetric(median(share), "copy-share")
}

// copyTimer times the batch copies of the backend it wraps: the device of
// BenchmarkServingBulkAppendPerBlock alone, so it stays here.
type copyTimer struct {
	device.Backend
	took time.Duration
}

func (c *copyTimer) CopiesHtoD(cs []device.HostCopy) error {
	start := time.Now()
	err := c.Backend.(device.BatchCopier).CopiesHtoD(cs)
	c.took += time.Since(start)
	return err
}

func (c *copyTimer) CopiesHtoDAsync(st device.Stream, cs []device.HostCopy) error {
	return c.Backend.(device.BatchCopier).CopiesHtoDAsync(st, cs)
}

// BenchmarkServingAppendDevice appends rows with AppendDevice, the call a
// kernel that writes the rows itself makes first: row, one row of the 528
// B layout (a head renewed every 4096 rows); bulk, 64K rows of 24 bytes (a
// head renewed every 64 calls). It measures the store alone: the kernel's
// writes are not part of it.
func BenchmarkServingAppendDevice(b *testing.B) {
	for _, tc := range []struct {
		name   string
		l      *Layout
		n, per int
	}{{"row", kvCacheLayout(128), 1, 4096}, {"bulk", kv(Append, 0, Keep), 1 << 16, 64}} {
		b.Run(tc.name, func(b *testing.B) {
			p := benchPool(b, benchBackend(b), PoolOptions{})
			tc.l.Growth = Append
			var h *Head
			k := 0
			for b.Loop() {
				if k%tc.per == 0 {
					if h != nil {
						h.Release()
					}
					var err error
					if h, err = p.NewHead(tc.l, "s"); err != nil {
						b.Fatal(err)
					}
				}
				k++
				if _, err := h.AppendDevice(tc.n); err != nil {
					b.Fatal(err)
				}
			}
			h.Release()
		})
	}
}

// BenchmarkServingReadAsync reads 8 rows of the 528 B layout back to the
// host on a stream and waits for them: rows appended one at a time, so
// that their key and value blocks lie apart (16 of them, and the narrow
// columns' block). -benchmem shows the calls' allocations.
func BenchmarkServingReadAsync(b *testing.B) {
	be, l, h := readBenchHead(b, 256)
	st, err := be.(device.Streams).NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	dst := zeroRows(l, 8)
	b.ReportAllocs()
	for b.Loop() {
		if err := h.ReadAsync(st, 100, 108, dst); err != nil {
			b.Fatal(err)
		}
		if err := st.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServingAppendTable appends rows one at a time (a decode step)
// to a head of the 528 B layout that holds a live block table, as a head
// whose kernels read it does, at a context of 256, 4096 and 16384 rows,
// side by side with a head of as many rows and no table (decodeSideBySide).
func BenchmarkServingAppendTable(b *testing.B) {
	decodeSideBySide(b, benchBackend(b), "table-ns/row", func(h *Head) func() {
		t, err := h.BlockTable()
		if err != nil {
			b.Fatal(err)
		}
		return func() { t.Release() }
	}, nil)
}

// BenchmarkServingWindowTable is BenchmarkServingAppendTable on a window
// of 1024 rows: the head with a live table against one without, both of
// the window's layout.
func BenchmarkServingWindowTable(b *testing.B) {
	l := kvCacheLayout(128)
	l.Growth, l.Window = Append, 1024
	decodeLayoutSideBySide(b, benchBackend(b), l, l, "table-ns/row", func(h *Head) func() {
		t, err := h.BlockTable()
		if err != nil {
			b.Fatal(err)
		}
		return func() { t.Release() }
	}, nil)
}

// BenchmarkServingCheckpointStep is a decode step of a head whose
// contract keeps history (a checkpoint every 16 versions, 8 kept, so a
// rollback or At can reach back): one-row appends against the same
// appends to a head of the same columns without history.
func BenchmarkServingCheckpointStep(b *testing.B) {
	plain := kvCacheLayout(128)
	plain.Growth = Append
	l := kvCacheLayout(128)
	l.Growth, l.Checkpoint = Append, &CheckpointPolicy{Every: 16, Keep: 8}
	decodeLayoutSideBySide(b, benchBackend(b), l, plain, "checkpoint-ns/row", nil, nil)
}

// BenchmarkServingRecordStream is a decode step that records its stream
// on the head after each one-row append (the kernel that reads every row
// of the state was queued on it), against the appends alone, as
// BenchmarkServingAppendTable; the head recorded the stream once before.
func BenchmarkServingRecordStream(b *testing.B) {
	be, st := benchStream(b)
	record := func(h *Head) {
		if err := h.RecordStream(st); err != nil {
			b.Fatal(err)
		}
	}
	// Recorded once before the rounds, as a session's first step records
	// all its rows once.
	decodeSideBySide(b, be, "recorded-ns/row", func(h *Head) func() { record(h); return func() {} }, record)
}

// BenchmarkServingSnapshotStep is a decode step that takes a snapshot
// after each one-row append and releases the step before's (speculative
// decoding's draft point), against the appends alone, as
// BenchmarkServingAppendTable.
func BenchmarkServingSnapshotStep(b *testing.B) { benchSnapshotStep(b, false) }

// BenchmarkServingSnapshotTableStep is BenchmarkServingSnapshotStep on a
// head that holds a live block table: each step's snapshot shares the
// narrow columns' tail blocks, so the next append copies them and moves
// those columns' tables.
func BenchmarkServingSnapshotTableStep(b *testing.B) { benchSnapshotStep(b, true) }

// benchSnapshotStep is BenchmarkServingSnapshotStep, on heads that hold a
// live block table with table.
func benchSnapshotStep(b *testing.B, table bool) {
	last := map[*Head]*Snap{}
	unit := "snapshot-ns/row"
	if table {
		unit = "snapshot-table-ns/row"
	}
	decodeSideBySide(b, benchBackend(b), unit, func(h *Head) func() {
		var t *BlockTable
		if table {
			var err error
			if t, err = h.BlockTable(); err != nil {
				b.Fatal(err)
			}
		}
		return func() {
			if s := last[h]; s != nil {
				s.Release()
				delete(last, h)
			}
			if t != nil {
				t.Release()
			}
		}
	}, func(h *Head) {
		s, err := h.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		if prev := last[h]; prev != nil {
			prev.Release()
		}
		last[h] = s
	})
}

// BenchmarkServingSpeculativeStep is speculative decoding's rejected
// draft after each one-row append: a snapshot, four draft rows appended
// and the stream their kernel ran on recorded, then a rollback to the
// snapshot, against the appends alone, as BenchmarkServingAppendTable;
// the head recorded the stream once before.
func BenchmarkServingSpeculativeStep(b *testing.B) {
	be, st := benchStream(b)
	draft := zeroRows(kvCacheLayout(128), 4)
	decodeSideBySide(b, be, "speculative-ns/row", func(h *Head) func() {
		if err := h.RecordStream(st); err != nil {
			b.Fatal(err)
		}
		return func() {}
	}, func(h *Head) {
		s, err := h.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Append(draft); err != nil {
			b.Fatal(err)
		}
		if err := h.RecordStream(st); err != nil {
			b.Fatal(err)
		}
		if err := h.Rollback(s); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(); err != nil {
			b.Fatal(err)
		}
	})
}

// benchStream returns the benchmarks' backend and a stream of it, closed
// when b ends; b is skipped on a backend with no streams.
func benchStream(b *testing.B) (device.Backend, device.Stream) {
	be := benchBackend(b)
	sb, ok := be.(device.Streams)
	if !ok {
		b.Skip("the backend has no streams")
	}
	st, err := sb.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return be, st
}

// decodeSideBySide runs rounds of 256 one-row appends to two heads of the
// 528 B layout on be with ctx rows already, at a ctx of 256, 4096 and 16384: one
// with setup done on it (nil: none) and after, each append, step (nil:
// none); the other plain. ratio is the median over rounds of the first's
// time over the second's. The heads are made anew, untimed, each round,
// and each is made first and timed first in turn.
func decodeSideBySide(b *testing.B, be device.Backend, unit string, setup func(*Head) func(), step func(*Head)) {
	l := kvCacheLayout(128)
	l.Growth = Append
	decodeLayoutSideBySide(b, be, l, l, unit, setup, step)
}

// decodeLayoutSideBySide is decodeSideBySide on heads of layout l, the
// plain one of layout plain (of the same columns).
func decodeLayoutSideBySide(b *testing.B, be device.Backend, l, plain *Layout, unit string, setup func(*Head) func(), step func(*Head)) {
	row := zeroRows(l, 1)
	for _, ctx := range []int{256, 4096, 16384} {
		b.Run(fmt.Sprint(ctx), func(b *testing.B) {
			p := benchPool(b, be, PoolOptions{})
			head := func(with bool) (*Head, func()) {
				hl := plain
				if with {
					hl = l
				}
				h, err := p.NewHead(hl, "s")
				if err != nil {
					b.Fatal(err)
				}
				for range ctx {
					if err := h.Append(row); err != nil {
						b.Fatal(err)
					}
				}
				end := func() {}
				if with && setup != nil {
					end = setup(h)
				}
				return h, func() { end(); h.Release() }
			}
			appends := func(h *Head, with bool) time.Duration {
				start := time.Now()
				for range 256 {
					if err := h.Append(row); err != nil {
						b.Fatal(err)
					}
					if with && step != nil {
						step(h)
					}
				}
				return time.Since(start)
			}
			var tw, tp time.Duration
			var ratios []float64
			for i := 0; b.Loop(); i++ {
				var hw, hp *Head
				var endW, endP func()
				var dw, dp time.Duration
				if i%2 == 0 {
					hw, endW = head(true)
					hp, endP = head(false)
					dw, dp = appends(hw, true), appends(hp, false)
				} else {
					hp, endP = head(false)
					hw, endW = head(true)
					dp, dw = appends(hp, false), appends(hw, true)
				}
				endW()
				endP()
				tw, tp = tw+dw, tp+dp
				ratios = append(ratios, float64(dw)/float64(dp))
			}
			n := float64(len(ratios) * 256)
			b.ReportMetric(float64(tw.Nanoseconds())/n, unit)
			b.ReportMetric(float64(tp.Nanoseconds())/n, "plain-ns/row")
			b.ReportMetric(median(ratios), "ratio")
		})
	}
}

// BenchmarkServingKernelStep is a decode step whose kernel writes its own
// row: AppendDevice of one row of the 528 B layout, then RecordStream on
// the kernel's stream (no kernel is queued: the store's part alone), a
// head renewed every 4096 rows. -benchmem shows the calls' allocations.
func BenchmarkServingKernelStep(b *testing.B) {
	be, st := benchStream(b)
	p := benchPool(b, be, PoolOptions{})
	l := kvCacheLayout(128)
	l.Growth = Append
	var h *Head
	k := 0
	for b.Loop() {
		if k%4096 == 0 {
			if h != nil {
				h.Release()
			}
			var err error
			if h, err = p.NewHead(l, "s"); err != nil {
				b.Fatal(err)
			}
		}
		k++
		if _, err := h.AppendDevice(1); err != nil {
			b.Fatal(err)
		}
		if err := h.RecordStream(st); err != nil {
			b.Fatal(err)
		}
	}
	h.Release()
}

// BenchmarkServingDraftSnapshot is a decode step that snapshots its draft
// (cc of internal/peerbench): a snapshot, one 2 KiB row appended, the
// snapshot released, on a head of 64 rows and more, renewed every 2048
// steps. Beside BenchmarkServingAppendOneRow's append alone it prices the
// snapshot and the path copy it makes the append pay (docs/BENCHMARKS.md,
// "What a draft's snapshot costs").
func BenchmarkServingDraftSnapshot(b *testing.B) {
	p := benchPool(b, benchBackend(b), PoolOptions{})
	l := kvCacheLayout(512)
	row := zeroRows(l, 1)
	var h *Head
	for i := 0; b.Loop(); i++ {
		if i%2048 == 0 {
			if h != nil {
				check(b, h.Release())
			}
			h = must[*Head](b)(p.NewHead(l, "s"))
			for range 64 {
				check(b, h.Append(row))
			}
		}
		s := must[*Snap](b)(h.Snapshot())
		check(b, h.Append(row))
		check(b, s.Release())
	}
	check(b, h.Release())
}
