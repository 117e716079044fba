package store

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// oneColumn is a layout of one column of rows of rb bytes, one row a
// block on a row-sized pool when rb is 1 KiB or more.
func oneColumn(rb int) *Layout {
	return &Layout{Type: "Rows", Columns: []Column{{Name: "B", ElemSize: 1, Width: rb}}, Growth: Append}
}

func seqRows(n, rb int, seed byte) [][]byte {
	c := make([]byte, n*rb)
	for i := range c {
		c[i] = seed + byte(i*31/7)
	}
	return [][]byte{c}
}

// TestCopiesPerRun: a 64-block append into blocks that follow one another
// in memory issues one copy, synchronous or on a stream, and reads of
// those rows (Read, ReadRows, ReadAsync) one copy each; copy on write of
// the 64 blocks one device copy.
func TestCopiesPerRun(t *testing.T) {
	c := statetest.NewStreamCounts(statetest.Host(t))
	p, err := NewPool(c, PoolOptions{})
	check(t, err)
	defer p.Close()
	const n, rb = 64, 1024
	rows := seqRows(n, rb, 1)

	h := must[*Head](t)(p.NewHead(oneColumn(rb), "s"))
	defer h.Release()
	c.Reset()
	check(t, h.Append(rows))
	if c.Calls("CopyHtoD") != 1 || c.Bytes("CopyHtoD") != n*rb {
		t.Fatalf("Append of %d one-row blocks: %d copies of %d bytes, want 1 of %d", n, c.Calls("CopyHtoD"), c.Bytes("CopyHtoD"), n*rb)
	}
	got := [][]byte{make([]byte, n*rb)}
	c.Reset()
	check(t, h.Read(0, n, got))
	if c.Calls("CopyDtoH") != 1 || !bytes.Equal(got[0], rows[0]) {
		t.Fatalf("Read of %d blocks: %d copies (rows equal: %v), want 1", n, c.Calls("CopyDtoH"), bytes.Equal(got[0], rows[0]))
	}
	idx := make([]int, n-2)
	for i := range idx {
		idx[i] = i + 1
	}
	sub := [][]byte{make([]byte, len(idx)*rb)}
	c.Reset()
	check(t, h.ReadRows(idx, sub))
	if c.Calls("CopyDtoH") != 1 || !bytes.Equal(sub[0], rows[0][rb:(n-1)*rb]) {
		t.Fatalf("ReadRows of %d consecutive rows over as many blocks: %d copies, want 1", len(idx), c.Calls("CopyDtoH"))
	}

	st := must[device.Stream](t)(c.NewStream())
	defer st.Close()
	a := must[*Head](t)(p.NewHead(oneColumn(rb), "s"))
	defer a.Release()
	c.Reset()
	check(t, a.AppendAsync(st, rows))
	if c.Calls("CopyHtoDAsync") != 1 || c.Calls("Record") != 1 {
		t.Fatalf("AppendAsync of %d one-row blocks: %d async copies and %d events, want 1 and 1", n, c.Calls("CopyHtoDAsync"), c.Calls("Record"))
	}
	pin := must[[]byte](t)(c.HostAlloc(n * rb))
	defer c.HostFree(pin)
	c.Reset()
	check(t, a.ReadAsync(st, 0, n, [][]byte{pin}))
	check(t, st.Sync())
	if c.Calls("CopyDtoHAsync") != 1 || !bytes.Equal(pin, rows[0]) {
		t.Fatalf("ReadAsync of %d blocks: %d async copies (rows equal: %v), want 1", n, c.Calls("CopyDtoHAsync"), bytes.Equal(pin, rows[0]))
	}

	m := must[*Head](t)(p.NewHead(&Layout{Type: "M", Columns: oneColumn(rb).Columns, Growth: Mutable, Bound: n}, "s"))
	defer m.Release()
	check(t, m.Write(0, rows))
	s := must[*Snap](t)(m.Snapshot())
	defer s.Release()
	c.Reset()
	if _, err := m.WriteDevice(0, n); err != nil {
		t.Fatal(err)
	}
	if c.Calls("CopyDtoD") != 1 || c.Bytes("CopyDtoD") != n*rb {
		t.Fatalf("copy on write of %d shared blocks: %d device copies of %d bytes, want 1 of %d", n, c.Calls("CopyDtoD"), c.Bytes("CopyDtoD"), n*rb)
	}
	check(t, m.Read(0, n, got))
	if !bytes.Equal(got[0], rows[0]) {
		t.Fatal("the rows copied on write differ")
	}
}

// TestCopiesStayInSlabs: copies that span neighbouring blocks stop at the
// end of a slab, even when the next slab's first block follows it in
// memory (on an arena, whose allocations lie back to back).
func TestCopiesStayInSlabs(t *testing.T) {
	a := statetest.NewArena(8 << 20)
	p, err := NewPool(a, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	l := &Layout{Type: "Row", Columns: []Column{{Name: "A", ElemSize: 8, Width: 4}}}
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	// Three slabs' worth, in uneven batches, so that copies cross slabs.
	var want []byte
	for i := 0; p.Stats().Slabs < 3; i++ {
		batch := bytes.Repeat([]byte{byte(i)}, 32*(1+i%300))
		check(t, h.Append([][]byte{batch}))
		want = append(want, batch...)
	}
	got := [][]byte{make([]byte, len(want))}
	check(t, h.Read(0, h.Len(), got))
	if !bytes.Equal(got[0], want) {
		t.Fatal("rows read across slabs differ")
	}
}

// TestAppendAsyncFailedRunChangesNothing: an AppendAsync of several runs
// (four columns) whose third copy, or whose event, fails answers an error
// and changes nothing: rows, version, stats, the pool's bytes; the copies
// queued before the failure landed in blocks given back, and a retry
// stores the rows once.
func TestAppendAsyncFailedRunChangesNothing(t *testing.T) {
	for _, c := range []struct {
		name   string
		inject func(c *statetest.StreamCounts)
	}{
		{"third copy", func(c *statetest.StreamCounts) { c.Faults.ArmMethod("CopyHtoDAsync", 2) }},
		{"event", func(c *statetest.StreamCounts) { c.Faults.Arm(statetest.OpRecord, 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cc := statetest.NewStreamCounts(statetest.Host(t))
			p, err := NewPool(cc, PoolOptions{})
			check(t, err)
			defer p.Close()
			l := kvCacheLayout(128)
			h := must[*Head](t)(p.NewHead(l, "a"))
			defer h.Release()
			st := must[device.Stream](t)(cc.NewStream())
			defer st.Close()
			first, second := seqKV(l, 40, 1), seqKV(l, 70, 2)
			check(t, h.AppendAsync(st, first))
			v, hs, ps := h.Version(), h.Stats(), p.Stats()
			c.inject(cc)
			if err := h.AppendAsync(st, second); !errors.Is(err, statetest.ErrInjected) {
				t.Fatalf("AppendAsync with a failing %s answered %v", c.name, err)
			}
			if h.Len() != 40 || h.Version() != v || h.Stats() != hs {
				t.Errorf("the failed call changed the head: %d rows at version %d (%+v); was 40 at %d (%+v)", h.Len(), h.Version(), h.Stats(), v, hs)
			}
			if got := p.Stats(); got.PhysicalBytes != ps.PhysicalBytes || got.LogicalBytes != ps.LogicalBytes || got.Blocks != ps.Blocks {
				t.Errorf("the failed call changed the pool: %+v; was %+v", got, ps)
			}
			check(t, h.AppendAsync(st, second)) // the retry
			if h.Len() != 110 {
				t.Fatalf("after the retry: %d rows, want 110", h.Len())
			}
			got := zeroRows(l, 110)
			check(t, h.Read(0, 110, got))
			for i := range got {
				if want := append(append([]byte(nil), first[i]...), second[i]...); !bytes.Equal(got[i], want) {
					t.Fatalf("column %d after the retry differs from the rows appended", i)
				}
			}
		})
	}
}

// seqKV returns n rows of l whose bytes derive from seed.
func seqKV(l *Layout, n int, seed byte) [][]byte {
	cols := zeroRows(l, n)
	for i, c := range cols {
		for k := range c {
			c[k] = seed + byte(k*7+i)
		}
	}
	return cols
}

// TestAppendOneRowAllocatesNothing: a one-row Append in steady state
// (the head's blocks come from the pool's free lists, its plan buffer is
// its own) makes no allocation, amortized over the tree's leaves, on the
// host backend and on the CUDA backend over the fake driver.
func TestAppendOneRowAllocatesNothing(t *testing.T) {
	statetest.EachStreamRig(t, testAppendOneRowAllocatesNothing)
}

func testAppendOneRowAllocatesNothing(t *testing.T, r *statetest.StreamRig) {
	if raceDetector && r.Backend.Name() == "cuda" {
		t.Skip("under the race detector, sync.Pool drops entries at random and the driver's calls allocate")
	}
	for _, dim := range []int{128, 512} {
		l := kvCacheLayout(dim)
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{}))
		t.Cleanup(func() { check(t, p.Close()) })
		row := zeroRows(l, 1)
		warm := must[*Head](t)(p.NewHead(l, "s"))
		for range 1024 {
			check(t, warm.Append(row))
		}
		check(t, warm.Release()) // its blocks go back to the free lists
		h := must[*Head](t)(p.NewHead(l, "s"))
		defer h.Release()
		if n := testing.AllocsPerRun(512, func() { check(t, h.Append(row)) }); n != 0 {
			t.Errorf("row of %d bytes: %v allocations per Append, want 0", l.Columns[0].RowBytes()*2+16, n)
		}
		if raceDetector {
			continue // sync.Pool drops the nodes kept for reuse at random
		}
		// AllocsPerRun rounds down: count 128 rows at once, which start four
		// leaves a column, taken from the nodes warm's release gave back.
		if n := testing.AllocsPerRun(2, func() {
			for range 128 {
				check(t, h.Append(row))
			}
		}); n != 0 {
			t.Errorf("row of %d bytes: %v allocations per 128 Appends, want 0", l.Columns[0].RowBytes()*2+16, n)
		}
	}
}

// TestReadAsyncOneBatch: an asynchronous read of rows that lie in many
// blocks apart (rows appended one at a time, a key block and a value
// block each) queues every copy in one batch where the backend takes
// batches, from a head and from a snapshot; a failing batch fails the
// read.
func TestReadAsyncOneBatch(t *testing.T) {
	c := statetest.NewBatchCounts(statetest.Host(t))
	p := must[*Pool](t)(NewPool(c, PoolOptions{}))
	defer p.Close()
	l := kvCacheLayout(128)
	l.Growth = Append
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	want := seqKV(l, 40, 3)
	for i := range 40 {
		row := make([][]byte, len(want))
		for k, col := range want {
			n := len(col) / 40
			row[k] = col[i*n : (i+1)*n]
		}
		check(t, h.Append(row))
	}
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	st := must[device.Stream](t)(c.NewStream())
	defer st.Close()
	for _, read := range []struct {
		name string
		f    func(dst [][]byte) error
	}{
		{"Head.ReadAsync", func(dst [][]byte) error { return h.ReadAsync(st, 0, 40, dst) }},
		{"Snap.ReadAsync", func(dst [][]byte) error { return s.ReadAsync(st, 0, 40, dst) }},
	} {
		c.Reset()
		got := zeroRows(l, 40)
		check(t, read.f(got))
		check(t, st.Sync())
		if c.Calls("CopiesDtoHAsync") != 1 || c.Calls("CopyDtoHAsync") != 0 {
			t.Fatalf("%s of 40 rows in 80 blocks apart: %d batches and %d single copies, want 1 and 0", read.name, c.Calls("CopiesDtoHAsync"), c.Calls("CopyDtoHAsync"))
		}
		for k := range want {
			if !bytes.Equal(got[k], want[k]) {
				t.Fatalf("%s: column %d differs", read.name, k)
			}
		}
		c.Faults.Arm(statetest.OpCopy, 0) // the next batch, any kind, fails
		if err := read.f(got); !errors.Is(err, statetest.ErrInjected) {
			t.Fatalf("%s with a failing batch: %v", read.name, err)
		}
	}
}

// TestFailedBatchChangesNothing: an Append or an AppendAsync whose batch
// of copies fails answers the error and changes nothing (rows, version,
// stats, the pool's bytes); a retry stores the rows once.
func TestFailedBatchChangesNothing(t *testing.T) {
	c := statetest.NewBatchCounts(statetest.Host(t))
	p, err := NewPool(c, PoolOptions{})
	check(t, err)
	defer p.Close()
	l := kvCacheLayout(128)
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	st := must[device.Stream](t)(c.NewStream())
	defer st.Close()
	want := seqKV(l, 5, 1)
	check(t, h.Append(want))
	for i, async := range []bool{false, true} {
		rows := seqKV(l, 3, byte(10+i))
		v, hs, ps := h.Version(), h.Stats(), p.Stats()
		c.Faults.Arm(statetest.OpCopy, 0) // the next batch, any kind, fails
		if async {
			err = h.AppendAsync(st, rows)
		} else {
			err = h.Append(rows)
		}
		if !errors.Is(err, statetest.ErrInjected) {
			t.Fatalf("async %v: a failing batch answered %v", async, err)
		}
		if h.Version() != v || h.Stats() != hs {
			t.Fatalf("async %v: the failed call changed the head: %+v, was %+v", async, h.Stats(), hs)
		}
		if got := p.Stats(); got.PhysicalBytes != ps.PhysicalBytes || got.Blocks != ps.Blocks {
			t.Fatalf("async %v: the failed call changed the pool: %+v, was %+v", async, got, ps)
		}
		if async {
			check(t, h.AppendAsync(st, rows))
		} else {
			check(t, h.Append(rows))
		}
		for k := range want {
			want[k] = append(want[k], rows[k]...)
		}
	}
	got := zeroRows(l, h.Len())
	check(t, h.Read(0, h.Len(), got))
	for k := range got {
		if !bytes.Equal(got[k], want[k]) {
			t.Fatalf("column %d differs from the rows appended", k)
		}
	}
}

// TestOneRowOneCall: on a backend that takes batches of copies, a one-row
// Append of four columns (two new blocks, two blocks written past the
// end) makes one backend call, and an AppendAsync of it queues one piece
// of work and one event; the rows read back.
func TestOneRowOneCall(t *testing.T) {
	c := statetest.NewBatchCounts(statetest.Host(t))
	p, err := NewPool(c, PoolOptions{})
	check(t, err)
	defer p.Close()
	l := kvCacheLayout(128)
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	st := must[device.Stream](t)(c.NewStream())
	defer st.Close()
	var want [][]byte
	for i := range 40 {
		row := seqKV(l, 1, byte(i))
		c.Reset()
		if i%2 == 0 {
			check(t, h.Append(row))
			if c.Calls("CopiesHtoD") != 1 || c.Calls("CopyHtoD") != 0 {
				t.Fatalf("row %d: Append made %d batches and %d single copies, want one batch", i, c.Calls("CopiesHtoD"), c.Calls("CopyHtoD"))
			}
		} else {
			check(t, h.AppendAsync(st, row))
			if c.Calls("CopiesHtoDAsync")+c.Calls("CopyHtoDAsync") != 1 || c.Calls("Record") != 1 {
				t.Fatalf("row %d: AppendAsync queued %d batches, %d single copies and %d events, want one piece of work and one event",
					i, c.Calls("CopiesHtoDAsync"), c.Calls("CopyHtoDAsync"), c.Calls("Record"))
			}
		}
		if want == nil {
			want = row
		} else {
			for k := range want {
				want[k] = append(want[k], row[k]...)
			}
		}
	}
	got := zeroRows(l, 40)
	check(t, h.Read(0, 40, got))
	for k := range got {
		if !bytes.Equal(got[k], want[k]) {
			t.Fatalf("column %d differs from the rows appended", k)
		}
	}
}

// TestRunAllocation: blocks a head took a row at a time for two columns of
// one size come back to the free lists interleaved (a key block, a value
// block, ...); an append of 64 rows that reuses them gets each column's
// blocks in address order, neighbours in one slab, so each column takes
// one copy, not one per block.
func TestRunAllocation(t *testing.T) {
	c := statetest.NewStreamCounts(statetest.Host(t))
	p, err := NewPool(c, PoolOptions{})
	check(t, err)
	defer p.Close()
	l := &Layout{Type: "T", Columns: []Column{{Name: "K", ElemSize: 1, Width: 1024}, {Name: "V", ElemSize: 1, Width: 1024}}, Growth: Append}
	h := must[*Head](t)(p.NewHead(l, "s"))
	for range 64 {
		check(t, h.Append(zeroRows(l, 1)))
	}
	check(t, h.Release())
	h = must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	rows := seqKV(l, 64, 5)
	c.Reset()
	check(t, h.Append(rows))
	if c.Calls("CopyHtoD") != 2 {
		t.Fatalf("64 rows of two columns into reused blocks: %d copies, want 2", c.Calls("CopyHtoD"))
	}
	got := zeroRows(l, 64)
	check(t, h.Read(0, 64, got))
	for i := range got {
		if !bytes.Equal(got[i], rows[i]) {
			t.Fatalf("column %d differs from the rows appended", i)
		}
	}
}

// TestRenewedStateKeepsRowsTogether makes a state of four columns of one
// block size, one row per block, releases it and makes it again many
// times: each generation's row must get its blocks where one row's were
// (freed row by row), so the two wide columns' blocks of a row stay
// neighbours in one slab. Freed column by column, each generation spread a
// row's blocks four times wider, and after a few over four slabs.
func TestRenewedStateKeepsRowsTogether(t *testing.T) {
	l := kvCacheLayout(128) // keys and values: one row per 256-byte block
	p := newPool(t, PoolOptions{})
	row := zeroRows(l, 1)
	const rows = 512
	for gen := range 8 {
		h := must[*Head](t)(p.NewHead(l, "s"))
		for range rows {
			check(t, h.Append(row))
		}
		apart := 0
		for i := range rows {
			k, v := h.r.cols[0].get(i), h.r.cols[1].get(i)
			if !v.Follows(k) {
				apart++
			}
		}
		// A slab of 256 blocks splits a row at most once per slab.
		if apart > rows/64 {
			t.Fatalf("generation %d: %d of %d rows have their key and value blocks apart", gen, apart, rows)
		}
		check(t, h.Release())
	}
}

// TestByRow checks the order byRow gives the blocks of columns of unequal
// lengths, after blocks that are not its to order.
func TestByRow(t *testing.T) {
	mk := func(n int) []*block {
		out := make([]*block, n)
		for i := range out {
			out[i] = new(block)
		}
		return out
	}
	pre, a, b, c := mk(2), mk(3), mk(1), mk(2)
	list := append(append(append(append([]*block(nil), pre...), a...), b...), c...)
	byRow(&list, []int{2, 5, 6, 8})
	want := append(append([]*block(nil), pre...), a[0], b[0], c[0], a[1], c[1], a[2])
	if len(list) != len(want) {
		t.Fatalf("len = %d, want %d", len(list), len(want))
	}
	for i := range want {
		if list[i] != want[i] {
			t.Fatalf("block %d out of place", i)
		}
	}
}

// TestRenewedBulkStateKeepsRuns is TestRenewedStateKeepsRowsTogether for a
// state written in bulk: its columns lie in runs, which its release gives
// back in column order, so a state made again in its place in bulk copies
// each column in a few runs, generation after generation.
func TestRenewedBulkStateKeepsRuns(t *testing.T) {
	c := statetest.NewStreamCounts(statetest.Host(t))
	p, err := NewPool(c, PoolOptions{})
	check(t, err)
	defer p.Close()
	l := kvCacheLayout(128)
	const rows = 192
	batch := seqKV(l, rows, 1)
	for gen := range 6 {
		h := must[*Head](t)(p.NewHead(l, "s"))
		for range 4 {
			c.Reset()
			check(t, h.Append(batch))
			if c.Calls("CopyHtoD") > 8 {
				t.Fatalf("generation %d: an append of %d rows in four columns took %d copies, want a few runs", gen, rows, c.Calls("CopyHtoD"))
			}
		}
		check(t, h.Release())
	}
}

// TestCallsAllocateOnlyWhatTheyHandOut: a decode step's calls take their
// locks without allocating; a write in place allocates nothing, and the
// calls that hand spans to a kernel allocate the spans alone, every
// column's in one array.
func TestCallsAllocateOnlyWhatTheyHandOut(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := kvCacheLayout(128)
	l.Growth, l.Bound = Mutable, 4096
	m := must[*Head](t)(p.NewHead(l, "s"))
	defer m.Release()
	row := zeroRows(l, 1)
	check(t, m.Write(7, row)) // its blocks are m's alone from here
	for range 20000 {
		check(t, m.Write(7, row))
	}
	if n := testing.AllocsPerRun(100, func() { check(t, m.Write(7, row)) }); n != 0 {
		t.Errorf("Write of one row in place: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { must[[][]device.Span](t)(m.WriteDevice(7, 8)) }); n != 2 {
		t.Errorf("WriteDevice of one row in place: %v allocations, want 2 (the spans)", n)
	}
	a := kvCacheLayout(128)
	a.Growth = Append
	h := must[*Head](t)(p.NewHead(a, "s"))
	defer h.Release()
	for range 64 {
		check(t, h.Append(row))
	}
	if n := testing.AllocsPerRun(100, func() { must[[][]device.Span](t)(h.AppendDevice(1)) }); n != 2 {
		t.Errorf("AppendDevice of one row: %v allocations, want 2 (the spans)", n)
	}
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	if n := testing.AllocsPerRun(100, func() { must[[][]device.Span](t)(s.Spans(0, 64)) }); n != 2 {
		t.Errorf("Snap.Spans of 64 rows: %v allocations, want 2 (the spans)", n)
	}
	// A window's append gives back the blocks that slid out of it.
	w := kvCacheLayout(128)
	w.Growth, w.Window = Append, 256
	wh := must[*Head](t)(p.NewHead(w, "s"))
	defer wh.Release()
	for range 1024 {
		check(t, wh.Append(row))
	}
	if n := testing.AllocsPerRun(100, func() { check(t, wh.Append(row)) }); n != 0 {
		t.Errorf("Append of one row to a window: %v allocations, want 0", n)
	}
}

// TestSnapshotStepCostsNoLength: a decode loop that snapshots every step
// (speculative decoding's draft point) releases the step before's
// snapshot, which frees a path's worth of the tree: the bytes a step
// allocates do not grow with the state (room for every block of the
// released root was 135 KB a step at 8192 rows).
func TestSnapshotStepCostsNoLength(t *testing.T) {
	h, _, row := decodeHead(t, newPool(t, PoolOptions{}), 8192)
	prev := must[*Snap](t)(h.Snapshot())
	step := func() {
		check(t, h.Append(row))
		s := must[*Snap](t)(h.Snapshot())
		check(t, prev.Release())
		prev = s
	}
	for range 64 {
		step()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const steps = 256
	for range steps {
		step()
	}
	runtime.ReadMemStats(&after)
	check(t, prev.Release())
	if per := (after.TotalAlloc - before.TotalAlloc) / steps; per > 16<<10 {
		t.Errorf("a step of append, snapshot and release at 8192 rows allocates %d bytes, want at most 16 KiB", per)
	}
}

// decodeHead returns a head of p, of the 528 B layout l (append), with
// rows rows appended one at a time as a decode loop does, and a row of
// it; the head is released when t ends.
func decodeHead(t *testing.T, p *Pool, rows int) (*Head, *Layout, [][]byte) {
	t.Helper()
	l := kvCacheLayout(128)
	l.Growth = Append
	h := must[*Head](t)(p.NewHead(l, "s"))
	t.Cleanup(func() { h.Release() })
	row := zeroRows(l, 1)
	for range rows {
		check(t, h.Append(row))
	}
	return h, l, row
}

// A draft snapshotted before each append and released after it: the
// append makes a root of its own (the snapshot holds the old one), and the
// snapshot's release gives one back for the next (root.keep), so a step
// allocates the snapshot's handle and nothing else. The released snapshot
// answers ErrReleased, whatever root the head now holds.
func TestSnapshotDraftReusesRoots(t *testing.T) {
	if raceDetector {
		t.Skip("under the race detector, sync.Pool drops entries at random")
	}
	l := kvCacheLayout(128)
	p := newPool(t, PoolOptions{})
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	row := zeroRows(l, 1)
	var last *Snap
	step := func() {
		s := must[*Snap](t)(h.Snapshot())
		check(t, h.Append(row))
		check(t, s.Release())
		last = s
	}
	for range 64 {
		step()
	}
	if n := testing.AllocsPerRun(256, step); n > 1 {
		t.Errorf("%v allocations per snapshot, append and release, want 1 (the snapshot)", n)
	}
	if err := last.Read(0, 1, zeroRows(l, 1)); !errors.Is(err, ErrReleased) {
		t.Errorf("a released snapshot read: %v, want ErrReleased", err)
	}
}
