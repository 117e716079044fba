package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Where streams, block tables, windows and prefix sharing meet (issue 21):
// each test reproduces one defect through the public API.

// TestNilReceivers: every exported method on a nil head, snapshot,
// pool or block table answers (ErrReleased where it returns an error)
// instead of panicking.
func TestNilReceivers(t *testing.T) {
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

// TestClosedPoolReportsNothing: a head and a snapshot of a closed pool
// report no rows and no bytes, as released handles do.
func TestClosedPoolReportsNothing(t *testing.T) {
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

// TestRecordStreamForeign: a stream of another backend is an error
// for RecordStream, on heads and snapshots, and records nothing.
func TestRecordStreamForeign(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256})
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

// TestWindowTablesAndStreams: block tables and RecordStream on window
// states whose early blocks (whole subtrees of them) expired.
func TestWindowTablesAndStreams(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	st, err := r.Streams().NewStream()
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

// TestShareReusedLayout: a Layout value reused after a column was
// widened opens a prefix table of its own: a shared head of the wider
// layout adopts none of the narrower blocks (whose rows it would read
// past, into another owner's), and reads its own rows.
func TestShareReusedLayout(t *testing.T) {
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

// TestTableStreamOrder: a kernel queued with a head's table at one
// version reads that version's blocks, though a later copy-on-write write
// replaces one of them before the kernel runs.
func TestTableStreamOrder(t *testing.T) {
	statetest.EachStreamRig(t, testTableStreamOrder)
}

func testTableStreamOrder(t *testing.T, r *statetest.StreamRig) {
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	defer h.Release()
	check(t, h.Append(kvRows(40, 1))) // 3 key blocks, the last partly full
	bt := must[*BlockTable](t)(h.BlockTable())
	defer bt.Release()
	v1 := tableEntries(t, p.Backend(), bt, 0)
	c1 := must[TableColumn](t)(bt.Column(0))
	st := must[device.Stream](t)(r.Streams().NewStream())
	defer st.Close()
	check(t, h.RecordStream(st))
	out := must[[]byte](t)(r.Streams().HostAlloc(8 * c1.Blocks))
	defer r.Streams().HostFree(out)
	// Queued, held back: a kernel's read of the table of version 1.
	r.Hold(t, st)
	var once sync.Once
	let := func() { once.Do(r.Release) }
	defer let() // a failure before the release must not leave Close waiting
	check(t, r.Streams().CopyDtoHAsync(st, out, c1.Ptr))
	ev := must[device.Event](t)(r.Streams().Record(st))
	defer ev.Close()
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	check(t, h.Append(kvRows(1, 9)))  // a draft past the snapshot's rows, in place
	check(t, h.Rollback(s))           // rolled back: its rows stay in the shared block
	check(t, h.Append(kvRows(10, 2))) // copy-on-write of the shared last block
	v2 := tableEntries(t, p.Backend(), bt, 0)
	if v2[2] == v1[2] {
		t.Fatal("the copy-on-write append left the head's table naming the snapshot's block")
	}
	if done, _ := ev.Done(); done {
		t.Fatal("the held read completed before the stream was let go")
	}
	let()
	check(t, ev.Wait())
	for i := range v1 {
		if got := device.Ptr(binary.LittleEndian.Uint64(out[8*i:])); got != v1[i] {
			t.Errorf("entry %d: the kernel queued at version 1 read %x, version 1 has %x (version 2: %x)", i, got, v1[i], v2[i])
		}
	}
	checkTable(t, "the table of version 2", p.Backend(), bt, h.Spans, 0, h.Len())
}

// tableFaults fails the allocations of block tables (small ones) and the
// copies into them while armed. It is TestTableFailureRecovers's own
// device, so it stays here; and not statetest.Faults: it picks its calls
// by size and by destination address, which a Faults predicate does not
// see.
type tableFaults struct {
	device.Backend
	mu     sync.Mutex
	armed  bool
	tables map[device.Ptr]int
}

func (f *tableFaults) Alloc(n int) (device.Ptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 4096 && f.armed {
		return 0, errors.New("injected table allocation failure")
	}
	p, err := f.Backend.Alloc(n)
	if err == nil && n < 4096 {
		f.tables[p] = n
	}
	return p, err
}

func (f *tableFaults) CopyHtoD(dst device.Ptr, src []byte) error {
	f.mu.Lock()
	fail := false
	for p, n := range f.tables {
		fail = fail || f.armed && dst >= p && dst < p+device.Ptr(n)
	}
	f.mu.Unlock()
	if fail {
		return errors.New("injected table copy failure")
	}
	return f.Backend.CopyHtoD(dst, src)
}

func (f *tableFaults) arm(on bool) {
	f.mu.Lock()
	f.armed = on
	f.mu.Unlock()
}

// TestTableFailureRecovers: a failed block-table update shows in
// Column (the write's rows are committed, so the write succeeds) and the
// table is rebuilt by the next call once the device works again.
func TestTableFailureRecovers(t *testing.T) {
	f := &tableFaults{Backend: device.Host(), tables: map[device.Ptr]int{}}
	p, err := NewPool(f, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
	defer h.Release()
	check(t, h.Append(kvRows(20, 1)))
	bt := must[*BlockTable](t)(h.BlockTable())
	defer bt.Release()
	for _, step := range []struct {
		what string
		rows int
	}{{"in place", 20}, {"growth", 200}} {
		f.arm(true)
		if err := h.Append(kvRows(step.rows, 2)); err != nil {
			t.Fatalf("%s: the append whose table update failed: %v", step.what, err)
		}
		if _, err := bt.Column(0); err == nil {
			t.Errorf("%s: Column hides the failed update", step.what)
		}
		f.arm(false)
		checkTable(t, step.what+": the table after the device recovered", p.Backend(), bt, h.Spans, 0, h.Len())
	}
	f.arm(true)
	check(t, h.Append(kvRows(300, 3)))
	f.arm(false)
	check(t, h.Append(kvRows(1, 4))) // the next write rebuilds it too
	checkTable(t, "after the next write", p.Backend(), bt, h.Spans, 0, h.Len())
}

// TestAppendAsyncFailureChangesNothing: an AppendAsync whose copy or
// event fails answers an error and changes nothing (rows, version, stats),
// so a retry stores the rows once.
func TestAppendAsyncFailureChangesNothing(t *testing.T) {
	for _, c := range []struct {
		name   string
		inject func(f *statetest.StreamFaults)
	}{
		{"copy", func(f *statetest.StreamFaults) {
			f.FailWhen(func(_ statetest.Op, method string) bool { return method == "CopyHtoDAsync" })
		}},
		// One event follows the copies: the rows landed, the staging
		// buffer is free again.
		{"event", func(f *statetest.StreamFaults) { f.Arm(statetest.OpRecord, 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := device.Host()
			t.Cleanup(func() { b.Close() })
			f := statetest.NewStreamFaults(b)
			p, err := NewPool(f, PoolOptions{BlockBytes: 256})
			check(t, err)
			defer p.Close()
			h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
			defer h.Release()
			st := must[device.Stream](t)(f.NewStream())
			defer st.Close()
			check(t, h.AppendAsync(st, kvRows(20, 1)))
			s := must[*Snap](t)(h.Snapshot()) // the next append copies the shared block
			defer s.Release()
			v, hs, ps := h.Version(), h.Stats(), p.Stats()
			c.inject(f)
			if err := h.AppendAsync(st, kvRows(30, 2)); err == nil {
				t.Fatal("AppendAsync with a failing stream answered nil")
			}
			f.Disarm()
			p.WaitPending()
			if h.Len() != 20 || h.Version() != v || h.Stats() != hs {
				t.Errorf("the failed call changed the head: %d rows at version %d (%+v); was 20 at %d (%+v)", h.Len(), h.Version(), h.Stats(), v, hs)
			}
			if got := p.Stats(); got.PhysicalBytes != ps.PhysicalBytes || got.LogicalBytes != ps.LogicalBytes {
				t.Errorf("the failed call changed the pool: physical %d, logical %d; was %d, %d", got.PhysicalBytes, got.LogicalBytes, ps.PhysicalBytes, ps.LogicalBytes)
			}
			check(t, h.AppendAsync(st, kvRows(30, 2))) // the retry
			want := [][]byte{append(kvRows(20, 1)[0], kvRows(30, 2)[0]...), append(kvRows(20, 1)[1], kvRows(30, 2)[1]...)}
			if h.Len() != 50 {
				t.Fatalf("after the retry: %d rows, want 50", h.Len())
			}
			got := readAll(t, h)
			if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
				t.Error("after the retry the head holds other rows than the two batches")
			}
		})
	}
}

// TestSharePrefixAfterKernel: blocks a kernel fills join the prefix
// cache only once the streams recorded on the head are past the kernel:
// while it is held back, a prompt of what the blocks held before adopts
// nothing; once it ran, the real prompt adopts them, with the kernel's rows.
func TestSharePrefixAfterKernel(t *testing.T) {
	for _, c := range []struct {
		name string
		rig  func(*testing.T) *statetest.StreamRig
	}{{"host", statetest.HostStreamRig}, {"fakecuda", statetest.FakeStreamRig}} {
		for _, m := range []struct {
			recordFirst, callsWhileHeld bool
		}{{false, true}, {true, true}, {false, false}} {
			t.Run(fmt.Sprintf("%s/%+v", c.name, m), func(t *testing.T) {
				testSharePrefixAfterKernel(t, c.rig(t), m.recordFirst, m.callsWhileHeld)
			})
		}
	}
}

func testSharePrefixAfterKernel(t *testing.T, r *statetest.StreamRig, recordFirst, callsWhileHeld bool) {
	p, err := NewPool(r.Backend, PoolOptions{})
	check(t, err)
	defer p.Close()
	l := prompt(16, 0)
	h := must[*Head](t)(p.NewSharedHead(l, "alice", "d"))
	defer h.Release()
	st := must[device.Stream](t)(r.Streams().NewStream())
	defer st.Close()
	if recordFirst { // the stream is the head's before the rows are reserved
		check(t, h.RecordStream(st))
	}
	r.Hold(t, st)
	var once sync.Once
	let := func() { once.Do(r.Release) }
	defer let()
	spans := must[[][]device.Span](t)(h.AppendDevice(32)) // two full blocks
	for c, val := range []uint32{0x02, 0x01} {            // KV rows, then the Token keys
		rb := []int{32, 4}[c]
		for _, sp := range spans[c] {
			check(t, r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, sp.Ptr, val, uint64(sp.Rows*rb)))
		}
	}
	if !recordFirst {
		check(t, h.RecordStream(st))
	}
	ev := must[device.Event](t)(r.Streams().Record(st))
	defer ev.Close()
	if callsWhileHeld {
		must[[][]device.Span](t)(h.Spans(0, 32)) // the next call on the head
		br := must[*Head](t)(h.Branch())         // a branch holds the same blocks
		defer br.Release()
		must[[][]device.Span](t)(br.Spans(0, 32))
	}
	stale := make([]byte, 32*4) // the keys before the kernel ran
	b := must[*Head](t)(p.NewSharedHead(l, "bob", "d"))
	defer b.Release()
	if n := must[int](t)(b.AdoptPrefix(stale)); n != 0 {
		t.Errorf("a prompt of the unwritten keys adopted %d rows while the kernel was held", n)
	}
	if done, _ := ev.Done(); done {
		t.Fatal("the held kernel completed before the stream was let go")
	}
	let()
	check(t, ev.Wait())
	// The calls made while the kernel was held recorded events of their
	// own on st, after ev: the stream is past them once it drains.
	check(t, st.Sync())
	must[[][]device.Span](t)(h.Spans(0, 32)) // registers now
	keys := bytes.Repeat([]byte{0x01}, 32*4)
	c := must[*Head](t)(p.NewSharedHead(l, "carol", "d"))
	defer c.Release()
	if n := must[int](t)(c.AdoptPrefix(keys)); n != 32 {
		t.Fatalf("the real prompt adopted %d rows once the kernel ran, want 32", n)
	}
	got := readPrompt(t, c)
	if !bytes.Equal(got[0], bytes.Repeat([]byte{0x02}, 32*32)) || !bytes.Equal(got[1], keys) {
		t.Error("the adopted rows are not the kernel's")
	}
}
