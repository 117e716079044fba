package state

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// Where streams, block tables, windows and prefix sharing meet (issue 21):
// each test reproduces one defect through the public API.

// TestMeetNilReceivers: every exported method on a nil head, snapshot,
// pool or block table answers (ErrReleased where it returns an error)
// instead of panicking.
func TestMeetNilReceivers(t *testing.T) {
	var h *Head
	var s *Snap
	var p *Pool
	var bt *BlockTable
	st, _ := device.Host().(device.Streams).NewStream()
	defer st.Close()
	dst := [][]byte{nil, nil}
	errs := map[string]error{
		"Head.Append":        h.Append(kvRows(1, 1)),
		"Head.Write":         h.Write(0, kvRows(1, 1)),
		"Head.Read":          h.Read(0, 0, dst),
		"Head.ReadRows":      h.ReadRows(nil, dst),
		"Head.Merge":         h.Merge(nil),
		"Head.Rollback":      h.Rollback(nil),
		"Head.RecordStream":  h.RecordStream(st),
		"Head.AppendAsync":   h.AppendAsync(st, kvRows(1, 1)),
		"Head.ReadAsync":     h.ReadAsync(st, 0, 0, dst),
		"Head.Release":       h.Release(),
		"Snap.Read":          s.Read(0, 0, dst),
		"Snap.ReadRows":      s.ReadRows(nil, dst),
		"Snap.RecordStream":  s.RecordStream(st),
		"Snap.ReadAsync":     s.ReadAsync(st, 0, 0, dst),
		"Snap.Release":       s.Release(),
		"Pool.Close":         p.Close(),
		"BlockTable.Release": bt.Release(),
	}
	_, errs["Head.AppendDevice"] = h.AppendDevice(1)
	_, errs["Head.WriteDevice"] = h.WriteDevice(0, 1)
	_, errs["Head.Spans"] = h.Spans(0, 0)
	_, errs["Head.Snapshot"] = h.Snapshot()
	_, errs["Head.Branch"] = h.Branch()
	_, errs["Head.At"] = h.At(1)
	_, errs["Head.Plan"] = h.Plan(1)
	_, errs["Head.BlockTable"] = h.BlockTable()
	_, errs["Head.AdoptPrefix"] = h.AdoptPrefix(nil)
	_, errs["Snap.Spans"] = s.Spans(0, 0)
	_, errs["Snap.BlockTable"] = s.BlockTable()
	_, errs["Pool.NewHead"] = p.NewHead(kv(Append, 0, Keep), "a")
	_, errs["Pool.NewSharedHead"] = p.NewSharedHead(prompt(16, 0), "a", "d")
	_, errs["Pool.Trim"] = p.Trim()
	_, errs["Pool.CostModel"] = p.CostModel()
	_, errs["BlockTable.Column"] = bt.Column(0)
	for name, err := range errs {
		if !errors.Is(err, ErrReleased) {
			t.Errorf("%s on nil: %v; want ErrReleased", name, err)
		}
	}
	if h.Len() != 0 || h.Bound() != 0 || h.Version() != 0 || h.Owner() != "" || h.Layout() != nil ||
		h.Stats() != (Stats{}) || h.Oldest() != 0 || h.Window() != 0 {
		t.Error("a nil head reports rows, a version, an owner or a layout")
	}
	if _, ok := h.LastReconstruction(); ok {
		t.Error("a nil head reports a reconstruction")
	}
	if s.Len() != 0 || s.Version() != 0 || s.Owner() != "" || s.Stats() != (Stats{}) || s.Oldest() != 0 {
		t.Error("a nil snapshot reports rows, a version or an owner")
	}
	if p.Stats() != (PoolStats{}) || p.Backend() != nil || p.BlockBytes() != 0 || p.WaitPending() != 0 || p.ForgetPrefixes("d") != 0 {
		t.Error("a nil pool reports figures")
	}
}

// TestMeetClosedPoolReportsNothing: a head and a snapshot of a closed pool
// report no rows and no bytes, as released handles do.
func TestMeetClosedPoolReportsNothing(t *testing.T) {
	p, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256})
	check(t, err)
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	check(t, h.Append(kvRows(20, 1)))
	s := must[*Snap](t)(h.Snapshot())
	if err := p.Close(); err == nil {
		t.Fatal("Close with live handles reported nothing")
	}
	if n, st := h.Len(), h.Stats(); n != 0 || st.Rows != 0 || st.LogicalBytes != 0 || st.PhysicalBytes != 0 {
		t.Errorf("head of a closed pool: Len %d, Stats %+v; want no rows, no bytes", n, st)
	}
	if n, st := s.Len(), s.Stats(); n != 0 || st.Rows != 0 || st.LogicalBytes != 0 || st.PhysicalBytes != 0 {
		t.Errorf("snapshot of a closed pool: Len %d, Stats %+v; want no rows, no bytes", n, st)
	}
	if err := h.Read(0, 1, [][]byte{make([]byte, 16), make([]byte, 8)}); !errors.Is(err, ErrReleased) {
		t.Errorf("Read on a head of a closed pool: %v; want ErrReleased", err)
	}
	check(t, h.Release())
	check(t, s.Release())
}

// TestMeetRecordStreamForeign: a stream of another backend is an error
// for RecordStream, on heads and snapshots, and records nothing.
func TestMeetRecordStreamForeign(t *testing.T) {
	r := hostStreamRig(t)
	p, err := NewPool(r.b, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	defer h.Release()
	check(t, h.Append(kvRows(20, 1)))
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	other := device.Host()
	defer other.Close()
	ost, err := other.(device.Streams).NewStream()
	check(t, err)
	defer ost.Close()
	if err := h.RecordStream(ost); !errors.Is(err, device.ErrStreamClosed) {
		t.Errorf("head RecordStream of another backend's stream: %v; want ErrStreamClosed", err)
	}
	if err := s.RecordStream(ost); !errors.Is(err, device.ErrStreamClosed) {
		t.Errorf("snapshot RecordStream of another backend's stream: %v; want ErrStreamClosed", err)
	}
	check(t, s.Release())
	check(t, h.Release())
	if pend := p.Stats().PendingBytes; pend != 0 {
		t.Errorf("%d bytes pending behind a foreign stream", pend)
	}
}

// windowKV is kv with a window of w rows: with 256-byte blocks, 16 rows
// per key block and 32 per value block.
func windowKV(w int) *Layout {
	l := kv(Append, 0, Keep)
	l.Window = w
	return l
}

// checkTable checks that column c's table names the blocks of rows
// [from, to) of x where x's spans place them.
func checkTable(t *testing.T, what string, b device.Backend, bt *BlockTable, spans func(int, int) ([][]device.Span, error), from, to int) {
	t.Helper()
	sp, err := spans(from, to)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for c, rb := range []int{16, 8} {
		col, err := bt.Column(c)
		if err != nil {
			t.Fatalf("%s: column %d: %v", what, c, err)
		}
		got := tableEntries(t, b, bt, c)
		row := from
		for _, s := range sp[c] {
			bi := row / col.RowsPerBlock
			base := s.Ptr - device.Ptr(rb*(row%col.RowsPerBlock))
			if bi >= len(got) || got[bi] != base {
				t.Fatalf("%s: column %d, block %d: table has %v, the rows lie at %x", what, c, bi, got, base)
			}
			row += s.Rows
		}
	}
}

// TestMeetWindowTablesAndStreams: block tables and RecordStream on window
// states whose early blocks (whole subtrees of them) expired.
func TestMeetWindowTablesAndStreams(t *testing.T) {
	r := hostStreamRig(t)
	p, err := NewPool(r.b, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	st, err := r.streams().NewStream()
	check(t, err)
	defer st.Close()
	h := must[*Head](t)(p.NewHead(windowKV(40), "a"))
	defer h.Release()
	live := must[*BlockTable](t)(h.BlockTable()) // kept current while blocks expire
	defer live.Release()
	for i := range 60 { // 1200 rows: 75 key blocks, more than two subtrees of 32
		check(t, h.Append(kvRows(20, byte(i))))
	}
	if h.Oldest() != 1160 {
		t.Fatalf("Oldest %d, want 1160", h.Oldest())
	}
	checkTable(t, "the live table after expiry", p.Backend(), live, h.Spans, h.Oldest(), h.Len())
	bt, err := h.BlockTable()
	if err != nil {
		t.Fatalf("BlockTable of a window head past expiry: %v", err)
	}
	defer bt.Release()
	checkTable(t, "a new head table", p.Backend(), bt, h.Spans, h.Oldest(), h.Len())
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	sbt, err := s.BlockTable()
	if err != nil {
		t.Fatalf("BlockTable of a window snapshot past expiry: %v", err)
	}
	defer sbt.Release()
	checkTable(t, "a snapshot table", p.Backend(), sbt, s.Spans, s.Oldest(), s.Len())
	if err := h.RecordStream(st); err != nil {
		t.Fatalf("RecordStream on a window head past expiry: %v", err)
	}
	if err := s.RecordStream(st); err != nil {
		t.Fatalf("RecordStream on a window snapshot past expiry: %v", err)
	}
	check(t, h.Append(kvRows(20, 99)))
	checkTable(t, "the live table after a recorded append", p.Backend(), live, h.Spans, h.Oldest(), h.Len())
}

// TestMeetShareReusedLayout: a Layout value reused after a column was
// widened opens a prefix table of its own: a shared head of the wider
// layout adopts none of the narrower blocks (whose rows it would read
// past, into another owner's), and reads its own rows.
func TestMeetShareReusedLayout(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := prompt(16, 0)
	toks := tokens(3, 40)
	a, _ := session(t, p, l, "alice", "d", toks)
	defer a.Release()
	// Another owner's rows, in no domain, next to alice's blocks.
	c := must[*Head](t)(p.NewHead(l, "carol"))
	defer c.Release()
	check(t, c.Append(promptRows(tokens(9, 40), 0, 40)))

	l.Columns[0].Width = 16 // the same Layout value, a wider KV column
	b := must[*Head](t)(p.NewSharedHead(l, "bob", "d"))
	defer b.Release()
	n, err := b.AdoptPrefix(keyBytes(toks))
	check(t, err)
	if n != 0 {
		t.Errorf("a head of the widened layout adopted %d rows of the narrower layout's blocks", n)
	}
	want := derivedRows(toks, n, len(toks), 16)
	check(t, b.Append(want))
	got := [][]byte{make([]byte, (len(toks)-n)*64), make([]byte, (len(toks)-n)*4)}
	check(t, b.Read(n, len(toks), got))
	samePrompt(t, "the widened head's rows", got, want)
	// A second head of the widened layout does share with the first.
	d := must[*Head](t)(p.NewSharedHead(l, "dave", "d"))
	defer d.Release()
	if n := must[int](t)(d.AdoptPrefix(keyBytes(toks))); n != 32 {
		t.Errorf("a second head of the widened layout adopted %d rows, want 32", n)
	}
}
