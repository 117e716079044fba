package store

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// tableEntries reads column i of t from the device: the entry of block k
// at k, zero below the table's first.
func tableEntries(t *testing.T, b device.Backend, bt *BlockTable, i int) []device.Ptr {
	t.Helper()
	c, err := bt.Column(i)
	if err != nil {
		t.Fatal(err)
	}
	if c.Blocks <= c.First {
		return nil
	}
	raw := make([]byte, 8*(c.Blocks-c.First))
	if err := b.CopyDtoH(raw, c.Ptr); err != nil {
		t.Fatal(err)
	}
	out := make([]device.Ptr, c.Blocks)
	for k := c.First; k < c.Blocks; k++ {
		out[k] = device.Ptr(binary.LittleEndian.Uint64(raw[8*(k-c.First):]))
	}
	return out
}

// spanBases returns the block bases of column i's spans of rows [0, n):
// each span starts a block or is the first row's place in one.
func spanBases(t *testing.T, spans [][]device.Span, i, rowBytes, perBlock int) []device.Ptr {
	t.Helper()
	var out []device.Ptr
	row := 0
	for _, sp := range spans[i] {
		out = append(out, sp.Ptr-device.Ptr(rowBytes*(row%perBlock)))
		row += sp.Rows
	}
	return out
}

func equalPtrs(a, b []device.Ptr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBlockTable: a head's table follows its appends, copy-on-write and
// rollback; a snapshot's never changes.
func TestBlockTable(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := kv(Append, 0, Keep) // keys 16 bytes a row: 16 rows per block
	h := must[*Head](t)(p.NewHead(l, "a"))
	defer h.Release()
	bt := must[*BlockTable](t)(h.BlockTable())
	if got := tableEntries(t, p.Backend(), bt, 0); len(got) != 0 {
		t.Fatalf("an empty head's table has %d entries", len(got))
	}
	check := func(what string, bt *BlockTable, spans func(int, int) ([][]device.Span, error), rows int) {
		t.Helper()
		sp, err := spans(0, rows)
		if err != nil {
			t.Fatal(err)
		}
		for col, rb := range []int{16, 8} {
			c, _ := bt.Column(col)
			want := spanBases(t, sp, col, rb, c.RowsPerBlock)
			if got := tableEntries(t, p.Backend(), bt, col); !equalPtrs(got, want) {
				t.Errorf("%s: column %d table %x, blocks %x", what, col, got, want)
			}
		}
	}
	if err := h.Append(kvRows(40, 1)); err != nil { // 3 key blocks, partly filled last
		t.Fatal(err)
	}
	check("after an append", bt, h.Spans, 40)
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	st := must[*BlockTable](t)(s.BlockTable())
	before := tableEntries(t, p.Backend(), st, 0)
	// A draft past the snapshot's rows, snapshotted and rolled back: the
	// next append writes into the shared last block where the draft's
	// rows lie, which the draft's snapshot still reads, so copy-on-write
	// replaces it in the head, not in the snapshots.
	check("before the draft", bt, h.Spans, 40)
	if err := h.Append(kvRows(1, 9)); err != nil {
		t.Fatal(err)
	}
	draft := must[*Snap](t)(h.Snapshot())
	defer draft.Release()
	if err := h.Rollback(s); err != nil {
		t.Fatal(err)
	}
	if err := h.Append(kvRows(100, 2)); err != nil {
		t.Fatal(err)
	}
	check("after copy-on-write and growth", bt, h.Spans, 140)
	if after := tableEntries(t, p.Backend(), bt, 0); after[2] == before[2] {
		t.Error("the head's table still names the block copy-on-write replaced")
	}
	if got := tableEntries(t, p.Backend(), st, 0); !equalPtrs(got, before) {
		t.Errorf("the snapshot's table changed: %x, was %x", got, before)
	}
	check("snapshot", st, s.Spans, 40)
	if err := h.Rollback(s); err != nil {
		t.Fatal(err)
	}
	check("after rollback", bt, h.Spans, 40)
	if err := bt.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := bt.Column(0); !errors.Is(err, ErrReleased) {
		t.Errorf("Column of a released table: %v; want ErrReleased", err)
	}
	if err := h.Append(kvRows(1, 3)); err != nil {
		t.Fatalf("append after the table's release: %v", err)
	}
	if _, err := st.Column(2); !errors.Is(err, ErrRange) {
		t.Errorf("Column(2) of a two-column table: %v; want ErrRange", err)
	}
}

// TestBlockTableDecodeSteps: a head's table follows a decode loop's
// one-row appends in place, at no cost that grows with the state (no
// allocation per step, the table's address kept while it has room), and
// still moves, with every entry right, when a write in the middle
// replaces a block a snapshot shares, or a window slides past its first
// entries.
func TestBlockTableDecodeSteps(t *testing.T) {
	p := newPool(t, PoolOptions{})
	h, l, row := decodeHead(t, p, 2048)
	bt := must[*BlockTable](t)(h.BlockTable())
	defer bt.Release()
	entries := func(what string) {
		t.Helper()
		sp := must[[][]device.Span](t)(h.Spans(0, h.Len()))
		for col := range l.Columns {
			c := must[TableColumn](t)(bt.Column(col))
			want := spanBases(t, sp, col, c.RowBytes, c.RowsPerBlock)
			if got := tableEntries(t, p.Backend(), bt, col); !equalPtrs(got, want) {
				t.Fatalf("%s: column %d: %d entries differ from the head's %d blocks", what, col, len(got), len(want))
			}
		}
	}
	at := must[TableColumn](t)(bt.Column(0)).Ptr
	if n := testing.AllocsPerRun(512, func() { check(t, h.Append(row)) }); n != 0 {
		t.Errorf("a one-row append with a live table: %v allocations, want 0", n)
	}
	entries("after 512 more rows")
	if got := must[TableColumn](t)(bt.Column(0)).Ptr; got != at {
		t.Error("the table moved on appends it had room for")
	}

	m := must[*Head](t)(p.NewHead(&Layout{Type: "M", Columns: l.Columns, Growth: Mutable, Bound: 1024}, "s"))
	defer m.Release()
	check(t, m.Write(0, zeroRows(l, 1024)))
	mt := must[*BlockTable](t)(m.BlockTable())
	defer mt.Release()
	s := must[*Snap](t)(m.Snapshot())
	defer s.Release()
	before := must[TableColumn](t)(mt.Column(0)).Ptr
	check(t, m.Write(700, row)) // replaces block 700, which s shares
	if must[TableColumn](t)(mt.Column(0)).Ptr == before {
		t.Error("a write that replaced a shared block left the table where kernels of the old version read it")
	}
	sp := must[[][]device.Span](t)(m.Spans(0, 1024))
	if got := tableEntries(t, p.Backend(), mt, 0); !equalPtrs(got, spanBases(t, sp, 0, 256, 1)) {
		t.Error("after a write in the middle: the table does not name the head's blocks")
	}

	w := kvCacheLayout(128)
	w.Growth, w.Window = Append, 100
	wh := must[*Head](t)(p.NewHead(w, "s"))
	defer wh.Release()
	wt := must[*BlockTable](t)(wh.BlockTable())
	defer wt.Release()
	window := func(what string) {
		t.Helper()
		sp := must[[][]device.Span](t)(wh.Spans(wh.Oldest(), wh.Len()))
		got := tableEntries(t, p.Backend(), wt, 0)
		if want := spanBases(t, sp, 0, 256, 1); len(got) < wh.Len() || !equalPtrs(got[wh.Oldest():], want) {
			t.Fatalf("%s, a window of %d rows at row %d: the table's live entries differ from the head's blocks", what, w.Window, wh.Len())
		}
	}
	var old *Snap
	for i := range 20000 {
		check(t, wh.Append(row))
		if i == 150 {
			old = must[*Snap](t)(wh.Snapshot())
		}
		if i%997 == 0 {
			window("sliding")
		}
	}
	// The table holds the window's blocks, not one entry per block ever:
	// the column of 256-byte rows has a block a row.
	c := must[TableColumn](t)(wt.Column(0))
	if c.First < wh.Len()-2*w.Window || c.Blocks != wh.Len() {
		t.Errorf("after 20000 rows of a window of %d: the table holds blocks [%d, %d)", w.Window, c.First, c.Blocks)
	}
	if cp := wt.cols[0].capacity; cp > 4*w.Window {
		t.Errorf("after 20000 rows of a window of %d: the table has room for %d entries", w.Window, cp)
	}
	// Back to a version whose window is 19849 rows behind: its blocks
	// come back into the table.
	check(t, wh.Rollback(old))
	window("rolled back")
	if c := must[TableColumn](t)(wt.Column(0)); c.First > wh.Oldest() {
		t.Errorf("rolled back to rows [%d, %d): the table starts at block %d", wh.Oldest(), wh.Len(), c.First)
	}
	check(t, old.Release())
	for range 300 {
		check(t, wh.Append(row))
	}
	window("after the rollback")
}

// TestTableMemoryKept: a speculative decode loop that snapshots, appends
// a draft, snapshots it, rolls it back and appends again every step moves
// the table of each column whose shared tail block it copies, every step
// (the rows after the rollback go where the rejected draft's went, which
// a snapshot took); the memory of the tables it moves from is
// kept for the next ones, so the loop makes no backend allocation or free
// of its own after the first steps, and every entry stays right. Close
// frees what was kept.
func TestTableMemoryKept(t *testing.T) {
	b := statetest.NewCounts(device.Host())
	p := must[*Pool](t)(NewPool(b, PoolOptions{}))
	l := kvCacheLayout(128)
	l.Growth = Append
	l.Descendants = Keep
	h := must[*Head](t)(p.NewHead(l, "s"))
	row := zeroRows(l, 1)
	check(t, h.Append(zeroRows(l, 2000)))
	bt := must[*BlockTable](t)(h.BlockTable())
	var prev *Snap
	step := func() {
		s := must[*Snap](t)(h.Snapshot())
		check(t, h.Append(row)) // in place, past the snapshot's rows
		// A snapshot of the draft, at once released: the version was
		// taken, and a rollback that keeps its descendants keeps their
		// rows, so the next append copies the tail block.
		check(t, must[*Snap](t)(h.Snapshot()).Release())
		check(t, h.Rollback(s)) // the draft rejected
		check(t, h.Append(row)) // a copy of the tail block
		if prev != nil {
			check(t, prev.Release())
		}
		prev = s
	}
	for range 8 {
		step()
	}
	moved := must[TableColumn](t)(bt.Column(2)).Ptr
	allocs, frees := b.Calls("Alloc"), b.Calls("Free")
	for range 40 { // fewer than a new block of the wide columns' slabs holds
		step()
	}
	allocs, frees = b.Calls("Alloc")-allocs, b.Calls("Free")-frees
	if allocs != 0 || frees != 0 {
		t.Errorf("40 steps: %d backend allocations and %d frees, want none", allocs, frees)
	}
	if must[TableColumn](t)(bt.Column(2)).Ptr == moved {
		t.Error("the narrow column's table did not move: the test moves nothing")
	}
	sp := must[[][]device.Span](t)(h.Spans(0, h.Len()))
	for col := range l.Columns {
		c := must[TableColumn](t)(bt.Column(col))
		if got, want := tableEntries(t, p.Backend(), bt, col), spanBases(t, sp, col, c.RowBytes, c.RowsPerBlock); !equalPtrs(got, want) {
			t.Fatalf("column %d: the table does not name the head's blocks", col)
		}
	}
	check(t, prev.Release())
	check(t, bt.Release())
	check(t, h.Release())
	check(t, p.Close())
	if live := b.Live(); len(live) != 0 {
		t.Fatalf("%d backend allocations left after Close", len(live))
	}
}

// TestCloseFreesLiveTables: the tables of heads and snapshots still live
// when the pool closes are backend allocations of their own, and Close
// gives them back with the slabs.
func TestCloseFreesLiveTables(t *testing.T) {
	b := statetest.NewCounts(device.Host())
	p, err := NewPool(b, PoolOptions{})
	check(t, err)
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "s"))
	check(t, h.Append(kvRows(40, 1)))
	must[*BlockTable](t)(h.BlockTable())
	s := must[*Snap](t)(h.Snapshot())
	must[*BlockTable](t)(s.BlockTable())
	if err := p.Close(); err == nil {
		t.Fatal("Close with live handles reported nothing")
	}
	if live := b.Live(); len(live) != 0 {
		t.Fatalf("%d backend allocations left after Close: %v", len(live), live)
	}
}

// TestTableAfterRollbackBelowItsFirst: a window's table moves past the
// blocks that expire, so that its first entry is a late block; a
// rollback to a version before it, here the empty one, must leave the
// table's range [First, Blocks) whole (it said First 96 and Blocks 0,
// a count below zero to a kernel that subtracts them), and the next
// appends must find their blocks in it.
func TestTableAfterRollbackBelowItsFirst(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(bwLayout(4, 1, Keep, Mandatory), "o"))
	defer h.Release()
	empty := must[*Snap](t)(h.Snapshot())
	defer empty.Release()
	bt := must[*BlockTable](t)(h.BlockTable())
	defer bt.Release()
	for i := 0; i < 100; i += 4 {
		check(t, h.Append(bwVals([]uint32{1, 2, 3, 4})))
	}
	if c := must[TableColumn](t)(bt.Column(0)); c.First == 0 {
		t.Fatalf("setup: the window's table did not move (First %d)", c.First)
	}
	check(t, h.Rollback(empty))
	if c := must[TableColumn](t)(bt.Column(0)); c.First > c.Blocks {
		t.Fatalf("the empty head's table: First %d, Blocks %d", c.First, c.Blocks)
	}
	check(t, h.Append(bwVals([]uint32{5, 6, 7})))
	c := must[TableColumn](t)(bt.Column(0))
	if c.First > 0 || c.Blocks != 3 {
		t.Fatalf("after three rows: First %d, Blocks %d, want 0 and 3", c.First, c.Blocks)
	}
	spans := must[[][]device.Span](t)(h.Spans(0, 3))
	if got, want := tableEntries(t, p.Backend(), bt, 0), spanBases(t, spans, 0, 4, 1); !equalPtrs(got, want) {
		t.Fatalf("the table's entries %v, the blocks' %v", got, want)
	}
	checkInv(t, p)
}
