package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// kv is a two-column layout: keys of 4 int32 and values of one float64.
func kv(growth Growth, bound int, desc Descendants) *Layout {
	return &Layout{
		Type:        "KV",
		Columns:     []Column{{Name: "Keys", ElemSize: 4, Width: 4}, {Name: "Values", ElemSize: 8, Width: 1}},
		Growth:      growth,
		Bound:       bound,
		Descendants: desc,
	}
}

// kvRows returns n rows whose bytes derive from seed.
func kvRows(n int, seed byte) [][]byte {
	k := make([]byte, n*16)
	v := make([]byte, n*8)
	for i := range k {
		k[i] = seed + byte(i*7)
	}
	for i := range v {
		v[i] = seed ^ byte(i*13)
	}
	return [][]byte{k, v}
}

// layoutRows returns n rows of any layout l whose bytes derive from seed.
func layoutRows(l *Layout, n int, seed byte) [][]byte {
	out := make([][]byte, len(l.Columns))
	for c, col := range l.Columns {
		out[c] = make([]byte, n*col.ElemSize*col.Width)
		for i := range out[c] {
			out[c][i] = seed + byte(i*7+c)
		}
	}
	return out
}

// readLayoutRows reads every row of x, of any layout l.
func readLayoutRows(x reader, l *Layout) ([][]byte, error) {
	n := x.Len()
	dst := make([][]byte, len(l.Columns))
	for c, col := range l.Columns {
		dst[c] = make([]byte, n*col.ElemSize*col.Width)
	}
	return dst, x.Read(0, n, dst)
}

func newPool(t testing.TB, opt PoolOptions) *Pool {
	t.Helper()
	p, err := NewPool(device.Host(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p
}

// must and check fail t on an error. They mark themselves helpers only
// then: Helper walks the stack, which inside a benchmark's loop cost more
// than some of the calls it timed.
func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
		return v
	}
}

func check(t testing.TB, err error) {
	if err != nil {
		t.Helper()
		t.Fatal(err)
	}
}

type reader interface {
	Read(from, to int, dst [][]byte) error
	Len() int
}

// readAll returns every row of x.
func readAll(t testing.TB, x reader) [][]byte {
	t.Helper()
	n := x.Len()
	dst := [][]byte{make([]byte, n*16), make([]byte, n*8)}
	check(t, x.Read(0, n, dst))
	return dst
}

func concat(batches ...[][]byte) [][]byte {
	out := [][]byte{{}, {}}
	for _, b := range batches {
		out[0] = append(out[0], b[0]...)
		out[1] = append(out[1], b[1]...)
	}
	return out
}

func equalCols(a, b [][]byte) bool {
	return len(a) == len(b) && bytes.Equal(a[0], b[0]) && bytes.Equal(a[1], b[1])
}

func TestAppendSnapshotBranch(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(kv(Append, 1000, Invalidate), "s1"))
	defer h.Release()
	a, b := kvRows(20, 1), kvRows(30, 2)
	check(t, h.Append(a))
	if h.Version() != 1 || h.Len() != 20 {
		t.Fatalf("after one append: version %d, len %d", h.Version(), h.Len())
	}
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	check(t, h.Append(b))
	if !equalCols(readAll(t, s), a) {
		t.Fatal("snapshot changed after an append to its head")
	}
	if !equalCols(readAll(t, h), concat(a, b)) {
		t.Fatal("head does not hold both batches")
	}
	c := must[*Head](t)(h.Branch())
	defer c.Release()
	check(t, c.Append(kvRows(5, 3)))
	check(t, h.Append(kvRows(5, 4)))
	if equalCols(readAll(t, c), readAll(t, h)) {
		t.Fatal("branch and head see each other's writes")
	}
	if !equalCols(readAll(t, c), concat(a, b, kvRows(5, 3))) {
		t.Fatal("branch content")
	}
	if c.Version() == h.Version() || c.Version() <= 2 || h.Version() <= 2 {
		t.Fatalf("versions after diverging writes: head %d, branch %d", h.Version(), c.Version())
	}
	// Snapshots stay readable after their head is released.
	check(t, h.Release())
	check(t, h.Release())
	if !equalCols(readAll(t, s), a) {
		t.Fatal("snapshot changed after its head was released")
	}
	if err := h.Append(a); !errors.Is(err, ErrReleased) {
		t.Fatalf("append on released head: %v", err)
	}
}

func TestMutableZeroAndWrite(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	// Dirty blocks of another owner first: the new state must still read zeros.
	a := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "other"))
	check(t, a.Append(kvRows(100, 0xff)))
	check(t, a.Release())
	h := must[*Head](t)(p.NewHead(kv(Mutable, 64, Keep), "me"))
	defer h.Release()
	got := readAll(t, h)
	if !equalCols(got, [][]byte{make([]byte, 64*16), make([]byte, 64*8)}) {
		t.Fatal("a new mutable state does not read as zeros")
	}
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	w := kvRows(3, 9)
	check(t, h.Write(10, w))
	got = readAll(t, h)
	if !bytes.Equal(got[0][10*16:13*16], w[0]) || !bytes.Equal(got[1][10*8:13*8], w[1]) {
		t.Fatal("written rows")
	}
	if !equalCols(readAll(t, s), [][]byte{make([]byte, 64*16), make([]byte, 64*8)}) {
		t.Fatal("snapshot changed by a write")
	}
	if err := h.Write(62, kvRows(3, 1)); !errors.Is(err, ErrRange) {
		t.Fatalf("write past the bound: %v", err)
	}
	if err := h.Write(-1, kvRows(1, 1)); !errors.Is(err, ErrRange) {
		t.Fatalf("write at -1: %v", err)
	}
	if err := h.Append(kvRows(1, 1)); !errors.Is(err, ErrBound) {
		t.Fatalf("append to a mutable state: %v", err)
	}
}

func TestSnapshotIsConstant(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 1024})
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "s"))
	defer h.Release()
	check(t, h.Append(kvRows(10000, 1)))
	before := p.Stats()
	var snaps []*Snap
	for range 100 {
		snaps = append(snaps, must[*Snap](t)(h.Snapshot()))
	}
	after := p.Stats()
	if after.PhysicalBytes != before.PhysicalBytes {
		t.Fatalf("100 snapshots took %d physical bytes", after.PhysicalBytes-before.PhysicalBytes)
	}
	if want := before.LogicalBytes * 101; after.LogicalBytes != want {
		t.Fatalf("logical bytes %d, want %d", after.LogicalBytes, want)
	}
	for _, s := range snaps {
		check(t, s.Release())
	}
	if st := p.Stats(); st.LogicalBytes != before.LogicalBytes || st.PhysicalBytes != before.PhysicalBytes {
		t.Fatalf("after releasing the snapshots: %+v, before %+v", st, before)
	}
}

// A branch that diverges by one row holds one new block per column; of
// two append states that go on from one version, the first appends in
// place, past the rows they share, and the second copies.
func TestBranchSharesBlocks(t *testing.T) {
	for _, g := range []Growth{Append, Mutable} {
		t.Run(g.String(), func(t *testing.T) {
			p := newPool(t, PoolOptions{BlockBytes: 1024})
			h := must[*Head](t)(p.NewHead(kv(g, 5000, Keep), "s"))
			defer h.Release()
			if g == Append {
				check(t, h.Append(kvRows(5000-1, 1)))
			}
			before := p.Stats()
			c := must[*Head](t)(h.Branch())
			defer c.Release()
			if g == Append {
				check(t, c.Append(kvRows(1, 2)))
				if got := p.Stats().PhysicalBytes - before.PhysicalBytes; got != 0 {
					t.Fatalf("the first append past the rows a branch shares took %d physical bytes, want 0", got)
				}
				check(t, h.Append(kvRows(1, 3))) // the head diverges: a copy
			} else {
				check(t, c.Write(2500, kvRows(1, 2)))
			}
			after := p.Stats()
			if got, want := after.PhysicalBytes-before.PhysicalBytes, int64(2*p.BlockBytes()); got != want {
				t.Fatalf("a branch diverging by one row took %d physical bytes, want %d (one block per column)", got, want)
			}
			if hs, cs := h.Stats(), c.Stats(); cs.PhysicalBytes != hs.PhysicalBytes && g == Mutable {
				t.Fatalf("head references %d bytes, branch %d", hs.PhysicalBytes, cs.PhysicalBytes)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "s"))
	defer h.Release()
	check(t, h.Append(kvRows(10, 1)))
	c := must[*Head](t)(h.Branch())
	defer c.Release()
	check(t, c.Append(kvRows(10, 2)))
	check(t, h.Merge(c))
	if h.Version() != c.Version() || !equalCols(readAll(t, h), readAll(t, c)) {
		t.Fatal("merge did not fastforward the head to the child")
	}
	// The head changes, then a second child's merge is refused.
	d := must[*Head](t)(h.Branch())
	defer d.Release()
	check(t, d.Append(kvRows(1, 3)))
	check(t, h.Append(kvRows(1, 4)))
	v, rows := h.Version(), readAll(t, h)
	if err := h.Merge(d); !errors.Is(err, ErrDiverged) {
		t.Fatalf("merge after the parent changed: %v", err)
	}
	if h.Version() != v || !equalCols(readAll(t, h), rows) {
		t.Fatal("a refused merge changed the head")
	}
	other := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "s"))
	defer other.Release()
	if err := h.Merge(other); !errors.Is(err, ErrDiverged) {
		t.Fatalf("merge of another lineage: %v", err)
	}
	foreign := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "t"))
	defer foreign.Release()
	if err := h.Merge(foreign); !errors.Is(err, ErrOwner) {
		t.Fatalf("merge of another owner's head: %v", err)
	}
	if err := h.Merge(nil); !errors.Is(err, ErrDiverged) {
		t.Fatalf("merge of nil: %v", err)
	}
	check(t, h.Merge(h))
}

func TestRollbackPolicies(t *testing.T) {
	for _, desc := range []Descendants{Invalidate, Keep} {
		t.Run(desc.String(), func(t *testing.T) {
			p := newPool(t, PoolOptions{BlockBytes: 256})
			h := must[*Head](t)(p.NewHead(kv(Append, 0, desc), "s"))
			defer h.Release()
			check(t, h.Append(kvRows(10, 1)))
			target := must[*Snap](t)(h.Snapshot())
			defer target.Release()
			check(t, h.Append(kvRows(10, 2)))
			later := must[*Snap](t)(h.Snapshot())
			defer later.Release()
			branch := must[*Head](t)(h.Branch())
			defer branch.Release()
			early := must[*Head](t)(p.NewHead(kv(Append, 0, desc), "s"))
			defer early.Release()
			check(t, h.Rollback(target))
			if h.Version() != target.Version() || !equalCols(readAll(t, h), readAll(t, target)) {
				t.Fatal("rollback did not move the head to the target")
			}
			errSnap := later.Read(0, 1, [][]byte{make([]byte, 16), make([]byte, 8)})
			errBranch := branch.Append(kvRows(1, 1))
			if desc == Invalidate {
				if !errors.Is(errSnap, ErrInvalidated) || !errors.Is(errBranch, ErrInvalidated) {
					t.Fatalf("after rollback with invalidate: snapshot %v, branch %v", errSnap, errBranch)
				}
			} else if errSnap != nil || errBranch != nil {
				t.Fatalf("after rollback with keep: snapshot %v, branch %v", errSnap, errBranch)
			}
			// The target itself stays usable; writes continue past it.
			check(t, target.Read(0, 10, [][]byte{make([]byte, 160), make([]byte, 80)}))
			check(t, h.Append(kvRows(1, 5)))
			if h.Version() <= later.Version() {
				t.Fatalf("version after rollback and append %d, not above %d", h.Version(), later.Version())
			}
			// later is no ancestor of h any more.
			if err := h.Rollback(later); !errors.Is(err, ErrNotAncestor) && !errors.Is(err, ErrInvalidated) {
				t.Fatalf("rollback to an abandoned snapshot: %v", err)
			}
		})
	}
}

func TestRollbackBadTargets(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	q := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "s"))
	defer h.Release()
	check(t, h.Append(kvRows(3, 1)))
	other := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "s"))
	defer other.Release()
	mine := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "t"))
	defer mine.Release()
	far := must[*Head](t)(q.NewHead(kv(Append, 0, Keep), "s"))
	defer far.Release()
	for _, c := range []struct {
		name string
		snap func() *Snap
		want error
	}{
		{"nil", func() *Snap { return nil }, ErrNotAncestor},
		{"other lineage", func() *Snap { return must[*Snap](t)(other.Snapshot()) }, ErrNotAncestor},
		{"other owner", func() *Snap { return must[*Snap](t)(mine.Snapshot()) }, ErrOwner},
		{"other pool", func() *Snap { return must[*Snap](t)(far.Snapshot()) }, ErrNotAncestor},
		{"released", func() *Snap {
			s := must[*Snap](t)(h.Snapshot())
			s.Release()
			return s
		}, ErrReleased},
	} {
		s := c.snap()
		if err := h.Rollback(s); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if s != nil {
			s.Release()
		}
	}
	if h.Len() != 3 || h.Version() != 1 {
		t.Fatalf("failed rollbacks changed the head: len %d, version %d", h.Len(), h.Version())
	}
}

func TestBadInput(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(kv(Append, 10, Keep), "s"))
	defer h.Release()
	m := must[*Head](t)(p.NewHead(kv(Mutable, 10, Keep), "s"))
	defer m.Release()
	rows := kvRows(2, 1)
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"nil batch", h.Append(nil), ErrShape},
		{"one column", h.Append(rows[:1]), ErrShape},
		{"three columns", h.Append([][]byte{rows[0], rows[1], rows[1]}), ErrShape},
		{"uneven rows", h.Append([][]byte{rows[0], rows[1][:8]}), ErrShape},
		{"partial row", h.Append([][]byte{rows[0][:20], rows[1]}), ErrShape},
		{"nil column", h.Append([][]byte{nil, rows[1]}), ErrShape},
		{"past bound", h.Append(kvRows(11, 1)), ErrBound},
		{"negative device append", second(h.AppendDevice(-1)), ErrRange},
		{"device append past bound", second(h.AppendDevice(11)), ErrBound},
		{"write to append state", h.Write(0, rows), ErrRange},
		{"device write to append state", second(h.WriteDevice(0, 0)), ErrRange},
		{"write past bound", m.Write(9, rows), ErrRange},
		{"write negative", m.Write(-1, rows), ErrRange},
		{"device write reversed", second(m.WriteDevice(3, 2)), ErrRange},
		{"device write past bound", second(m.WriteDevice(0, 11)), ErrRange},
		{"read past end", h.Read(0, 1, [][]byte{make([]byte, 16), make([]byte, 8)}), ErrRange},
		{"read reversed", m.Read(2, 1, [][]byte{nil, nil}), ErrRange},
		{"read short destination", m.Read(0, 2, [][]byte{make([]byte, 16), make([]byte, 16)}), ErrShape},
		{"read missing destination", m.Read(0, 2, nil), ErrShape},
		{"spans past end", second(m.Spans(0, 11)), ErrRange},
		{"spans negative", second(h.Spans(-1, 0)), ErrRange},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if h.Len() != 0 || h.Version() != 0 {
		t.Fatalf("bad input changed the head: len %d, version %d", h.Len(), h.Version())
	}
	// Calls on released handles.
	s := must[*Snap](t)(m.Snapshot())
	check(t, s.Release())
	check(t, s.Release())
	if err := s.Read(0, 0, [][]byte{nil, nil}); !errors.Is(err, ErrReleased) {
		t.Errorf("read of a released snapshot: %v", err)
	}
	if _, err := s.Spans(0, 0); !errors.Is(err, ErrReleased) {
		t.Errorf("spans of a released snapshot: %v", err)
	}
	r := must[*Head](t)(m.Branch())
	check(t, r.Release())
	for name, err := range map[string]error{
		"append":        r.Append(rows),
		"write":         r.Write(0, rows),
		"read":          r.Read(0, 0, [][]byte{nil, nil}),
		"snapshot":      second(r.Snapshot()),
		"branch":        second(r.Branch()),
		"merge":         m.Merge(r),
		"merge into":    r.Merge(m),
		"rollback":      r.Rollback(nil),
		"spans":         second(r.Spans(0, 0)),
		"device write":  second(r.WriteDevice(0, 1)),
		"device append": second(r.AppendDevice(1)),
	} {
		if !errors.Is(err, ErrReleased) && !(name == "rollback" && errors.Is(err, ErrNotAncestor)) {
			t.Errorf("%s on a released head: %v", name, err)
		}
	}
	// Layouts.
	for name, l := range map[string]*Layout{
		"nil":              nil,
		"no columns":       {Type: "X"},
		"zero width":       {Type: "X", Columns: []Column{{Name: "A", ElemSize: 4}}},
		"negative size":    {Type: "X", Columns: []Column{{Name: "A", ElemSize: -4, Width: 1}}},
		"row over a block": {Type: "X", Columns: []Column{{Name: "A", ElemSize: 8, Width: 100}}},
		"mutable unbound":  {Type: "X", Columns: []Column{{Name: "A", ElemSize: 8, Width: 1}}, Growth: Mutable},
		"unknown growth":   {Type: "X", Columns: []Column{{Name: "A", ElemSize: 8, Width: 1}}, Growth: 7},
		"unknown policy":   {Type: "X", Columns: []Column{{Name: "A", ElemSize: 8, Width: 1}}, Descendants: 9},
		"bad checkpoint":   {Type: "X", Columns: []Column{{Name: "A", ElemSize: 8, Width: 1}}, Checkpoint: &CheckpointPolicy{}},
	} {
		if _, err := p.NewHead(l, "s"); !errors.Is(err, ErrShape) {
			t.Errorf("layout %s: %v", name, err)
		}
	}
	if _, err := NewPool(nil, PoolOptions{}); err == nil {
		t.Error("NewPool with a nil backend")
	}
	if _, err := NewPool(device.Host(), PoolOptions{BlockBytes: -1}); err == nil {
		t.Error("NewPool with negative block bytes")
	}
	if _, err := NewPool(device.Host(), PoolOptions{BlockBytes: 4096, MaxBytes: 100}); err == nil {
		t.Error("NewPool with max bytes below a block")
	}
}

func second[T any](_ T, err error) error { return err }

func TestPoolCloseNamesLiveHandles(t *testing.T) {
	p, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256})
	check(t, err)
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "session-7"))
	check(t, h.Append(kvRows(4, 1)))
	s := must[*Snap](t)(h.Snapshot())
	err = p.Close()
	if err == nil {
		t.Fatal("close with live handles reported nothing")
	}
	for _, want := range []string{"2 live handles", `KV head of owner "session-7"`, `KV snapshot of owner "session-7"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("close error %q does not mention %q", err, want)
		}
	}
	if err := h.Append(kvRows(1, 1)); !errors.Is(err, ErrReleased) {
		t.Errorf("append after the pool closed: %v", err)
	}
	if err := s.Read(0, 1, [][]byte{make([]byte, 16), make([]byte, 8)}); !errors.Is(err, ErrReleased) {
		t.Errorf("read after the pool closed: %v", err)
	}
	check(t, h.Release())
	check(t, s.Release())
	check(t, p.Close())
	if _, err := p.NewHead(kv(Append, 0, Keep), "s"); !errors.Is(err, ErrReleased) {
		t.Errorf("NewHead on a closed pool: %v", err)
	}
}

func TestPoolMaxBytesAndReuse(t *testing.T) {
	fb := statetest.NewFaults(device.Host())
	p, err := NewPool(fb, PoolOptions{BlockBytes: 256, MaxBytes: 256 * 20})
	check(t, err)
	defer p.Close()
	l := &Layout{Type: "Row", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}}
	h := must[*Head](t)(p.NewHead(l, "a"))
	check(t, h.Append([][]byte{make([]byte, 256*20)}))
	if err := h.Append([][]byte{make([]byte, 256)}); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("append past MaxBytes: %v", err)
	}
	if h.Len() != 20 {
		t.Fatalf("a failed append changed the rows: %d", h.Len())
	}
	st := p.Stats()
	if st.ReservedBytes != 256*20 || st.PhysicalBytes != 256*20 || st.Blocks != 20 || st.FreeBlocks != 0 {
		t.Fatalf("stats at the cap: %+v", st)
	}
	allocs := fb.Allocs()
	check(t, h.Release())
	// Reuse by another owner: no new backend allocation, and zeros.
	m := must[*Head](t)(p.NewHead(&Layout{Type: "M", Columns: l.Columns, Growth: Mutable, Bound: 20}, "b"))
	defer m.Release()
	if fb.Allocs() != allocs {
		t.Fatalf("reusing free blocks took %d backend allocations", fb.Allocs()-allocs)
	}
	dst := [][]byte{make([]byte, 256*20)}
	check(t, m.Read(0, 20, dst))
	if !bytes.Equal(dst[0], make([]byte, 256*20)) {
		t.Fatal("blocks another owner used were not zeroed")
	}
}

// Blocks the same owner freed come back without zeroing; another owner's
// are zeroed first.
func TestZeroingAcrossOwners(t *testing.T) {
	fb := statetest.NewFaults(device.Host())
	p, err := NewPool(fb, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	l := &Layout{Type: "Row", Columns: []Column{{Name: "A", ElemSize: 1, Width: 256}}}
	secret := bytes.Repeat([]byte{0xAB}, 256*4)
	a := must[*Head](t)(p.NewHead(l, "a"))
	check(t, a.Append([][]byte{secret}))
	spans := must[[][]device.Span](t)(a.Spans(0, 4))
	check(t, a.Release())
	b := must[*Head](t)(p.NewHead(l, "b"))
	defer b.Release()
	// b gets clean blocks first; exhaust them so a's come back.
	free := p.Stats().FreeBlocks
	got := must[[][]device.Span](t)(b.AppendDevice(int(free)))
	var seen int
	for _, s := range got[0] {
		for _, old := range spans[0] {
			if s.Ptr == old.Ptr {
				seen++
			}
		}
		buf := make([]byte, s.Rows*256)
		check(t, p.Backend().CopyDtoH(buf, s.Ptr))
		if bytes.Contains(buf, []byte{0xAB}) {
			t.Fatal("owner b can read owner a's rows")
		}
	}
	if seen != 4 {
		t.Fatalf("owner b got %d of owner a's 4 blocks back, want all 4 (zeroed)", seen)
	}
}

// Many goroutines read snapshots while the head is written and branched.
func TestConcurrentReadersAndWriter(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 512})
	h := must[*Head](t)(p.NewHead(kv(Mutable, 300, Invalidate), "s"))
	defer h.Release()
	check(t, h.Write(0, kvRows(300, 1)))
	s := must[*Snap](t)(h.Snapshot())
	want := readAll(t, s)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				got := [][]byte{make([]byte, 300*16), make([]byte, 300*8)}
				if err := s.Read(0, 300, got); err != nil {
					errs <- err
					return
				}
				if !equalCols(got, want) {
					errs <- fmt.Errorf("reader %d: snapshot content changed", g)
					return
				}
			}
		})
	}
	for i := range 300 {
		check(t, h.Write(i%290, kvRows(10, byte(i))))
		if i%7 == 0 {
			x := must[*Snap](t)(h.Snapshot())
			c := must[*Head](t)(h.Branch())
			check(t, c.Write(0, kvRows(1, 0)))
			check(t, c.Release())
			check(t, x.Release())
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	check(t, s.Release())
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}

// Concurrent writers on one head are serialized: every append lands whole,
// once, and every version is distinct.
func TestConcurrentWriters(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "s"))
	defer h.Release()
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				rows := kvRows(3, byte(g*each+i))
				if err := h.Append(rows); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					s, err := h.Snapshot()
					if err != nil {
						t.Error(err)
						return
					}
					s.Release()
				}
			}
		})
	}
	wg.Wait()
	if h.Len() != writers*each*3 || h.Version() != writers*each {
		t.Fatalf("len %d, version %d; want %d, %d", h.Len(), h.Version(), writers*each*3, writers*each)
	}
	// Every batch appears whole, in some order.
	got := readAll(t, h)
	seen := map[byte]bool{}
	for i := 0; i < h.Len(); i += 3 {
		seed := got[0][i*16]
		batch := kvRows(3, seed)
		if !bytes.Equal(got[0][i*16:(i+3)*16], batch[0]) || !bytes.Equal(got[1][i*8:(i+3)*8], batch[1]) {
			t.Fatalf("rows %d..%d are no whole batch", i, i+3)
		}
		seen[seed] = true
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}

func TestBytesRows(t *testing.T) {
	f := []float32{1, 2, 3}
	b := Bytes(f)
	if len(b) != 12 {
		t.Fatalf("Bytes of 3 float32: %d bytes", len(b))
	}
	back := Rows[float32](b)
	if len(back) != 3 || back[2] != 3 {
		t.Fatalf("Rows: %v", back)
	}
	back[0] = 9
	if f[0] != 9 {
		t.Fatal("Rows copied an aligned slice")
	}
	odd := make([]byte, 13)
	copy(odd[1:], b)
	mis := Rows[float32](odd[1:])
	if len(mis) != 3 || mis[1] != 2 {
		t.Fatalf("Rows of misaligned bytes: %v", mis)
	}
	if Rows[[4]int16](make([]byte, 7)) != nil || Bytes[int32](nil) != nil {
		t.Fatal("short or empty inputs")
	}
	type pair [2]uint16
	if got := Rows[pair](Bytes([]pair{{1, 2}, {3, 4}})); len(got) != 2 || got[1][0] != 3 {
		t.Fatalf("Rows of an array type: %v", got)
	}
}

// The pool's free lists grow with the owners that have free blocks, not
// with every owner ever seen.
func TestFreeListsForget(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 256 * 4})
	l := &Layout{Type: "Row", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}}
	for i := range 1000 {
		h := must[*Head](t)(p.NewHead(l, Owner(fmt.Sprint("session-", i))))
		check(t, h.Append([][]byte{make([]byte, 256*4)}))
		check(t, h.Release())
	}
	n := p.mem.DirtyLists(p.own)
	if n > 128 {
		t.Fatalf("%d free lists after 1000 owners came and went", n)
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}

func TestPoolStatsDevice(t *testing.T) {
	reading := DeviceMemory{Total: 100, Used: 40, Free: 60, Process: 7}
	p, err := NewPool(device.Host(), PoolOptions{Telemetry: func() (DeviceMemory, error) { return reading, nil }})
	check(t, err)
	defer p.Close()
	st := p.Stats()
	if st.Device == nil || st.Device.Backend != "host" || st.Device.Total == 0 {
		t.Fatalf("device stats %+v", st.Device)
	}
	if st.Device.Telemetry == nil || *st.Device.Telemetry != reading {
		t.Fatalf("telemetry %+v", st.Device.Telemetry)
	}
}

// Requests no device could hold fail with ErrNoMemory, before anything is
// taken, instead of crashing the process.
func TestHugeRequests(t *testing.T) {
	p := newPool(t, PoolOptions{})
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "s"))
	defer h.Release()
	for _, n := range []int{1 << 40, 1 << 50, maxInt / 4} {
		if _, err := h.AppendDevice(n); !errors.Is(err, ErrNoMemory) && !errors.Is(err, ErrBound) {
			t.Errorf("AppendDevice(%d): %v", n, err)
		}
	}
	if _, err := p.NewHead(kv(Mutable, 1<<45, Keep), "s"); !errors.Is(err, ErrNoMemory) {
		t.Errorf("a mutable state of 2^45 rows: %v", err)
	}
	if _, err := p.NewHead(kv(Mutable, maxInt, Keep), "s"); !errors.Is(err, ErrShape) {
		t.Errorf("a mutable state of MaxInt rows: %v", err)
	}
	q := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 1 << 20})
	m := must[*Head](t)(q.NewHead(kv(Append, 0, Keep), "s"))
	defer m.Release()
	if _, err := m.AppendDevice(1 << 30); !errors.Is(err, ErrNoMemory) {
		t.Errorf("AppendDevice past MaxBytes: %v", err)
	}
	if st := q.Stats(); st.ReservedBytes != 0 || m.Len() != 0 {
		t.Errorf("a refused request took memory or rows: %+v, len %d", st, m.Len())
	}
}

// Goroutines work on branches of one lineage at once: writes, snapshots,
// merges of each other's branches, rollbacks to shared snapshots (which
// invalidate other goroutines' handles), At. Nothing may deadlock, race
// or break the structure; every error is a sentinel.
func TestConcurrentLineage(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := kv(Mutable, 200, Invalidate)
	l.Checkpoint = &CheckpointPolicy{Every: 2, Keep: 3}
	root := must[*Head](t)(p.NewHead(l, "s"))
	var mu sync.Mutex
	var shared []*Snap
	heads := make([]*Head, 4)
	for i := range heads {
		heads[i] = must[*Head](t)(root.Branch())
	}
	check(t, root.Release())
	sentinel := func(err error) bool {
		for _, s := range []error{ErrReleased, ErrInvalidated, ErrNotAncestor, ErrDiverged, ErrNotRetained, ErrRange} {
			if errors.Is(err, s) {
				return true
			}
		}
		return err == nil
	}
	var wg sync.WaitGroup
	for g := range heads {
		wg.Go(func() {
			h := heads[g]
			for i := range 300 {
				var err error
				switch i % 7 {
				case 0, 1:
					err = h.Write((i*13+g)%190, kvRows(5, byte(i)))
				case 2:
					var s *Snap
					if s, err = h.Snapshot(); err == nil {
						mu.Lock()
						shared = append(shared, s)
						mu.Unlock()
					}
				case 3:
					mu.Lock()
					other := heads[(g+1)%len(heads)]
					mu.Unlock()
					err = h.Merge(other)
				case 4:
					mu.Lock()
					var s *Snap
					if len(shared) > 0 {
						s = shared[(i+g)%len(shared)]
					}
					mu.Unlock()
					if s != nil {
						err = h.Rollback(s)
					}
				case 5:
					var s *Snap
					if s, err = h.At(h.Version()); err == nil {
						err = s.Read(0, 200, [][]byte{make([]byte, 200*16), make([]byte, 200*8)})
						s.Release()
					}
				case 6:
					mu.Lock()
					if len(shared) > 8 {
						s := shared[0]
						shared = shared[1:]
						mu.Unlock()
						err = s.Release()
					} else {
						mu.Unlock()
					}
				}
				if !sentinel(err) {
					t.Errorf("goroutine %d step %d: %v", g, i, err)
					return
				}
				if errors.Is(err, ErrInvalidated) {
					// This head's line was abandoned: start again on a
					// branch of a live sibling, if any.
					mu.Lock()
					others := slices.Clone(heads)
					mu.Unlock()
					for _, o := range others {
						if c, err := o.Branch(); err == nil {
							h.Release()
							h = c
							mu.Lock()
							heads[g] = c
							mu.Unlock()
							break
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
	for _, h := range heads {
		h.Release()
	}
	for _, s := range shared {
		s.Release()
	}
	if st := p.Stats(); st.PhysicalBytes != 0 || st.Live != 0 {
		t.Fatalf("after releasing everything: %+v", st)
	}
}
