package store

import (
	"encoding/binary"
	"errors"
	"testing"
)

// ringLayout is a window of w rows of one uint32 column, rows rows to a
// block.
func ringLayout(w, rows int) *Layout {
	return &Layout{Type: "Ring", Columns: []Column{{Name: "X", ElemSize: 4, Width: 1}}, Growth: Append, Window: w, BlockRows: rows}
}

// seq returns rows [from, to) of the sequence whose row i is the value i.
func seq(from, to int) []byte {
	b := make([]byte, 4*(to-from))
	for i := from; i < to; i++ {
		binary.LittleEndian.PutUint32(b[4*(i-from):], uint32(i))
	}
	return b
}

func TestWindowExpiry(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(ringLayout(10, 4), "o"))
	defer h.Release()
	for i := 0; i < 100; i += 3 {
		if err := h.Append([][]byte{seq(i, i+3)}); err != nil {
			t.Fatal(err)
		}
		st := h.Stats()
		// At most the window's 10 rows (3 blocks of 4) plus one block.
		if st.PhysicalBytes > 4*256 {
			t.Fatalf("after %d rows the head holds %d bytes, more than 4 blocks", i+3, st.PhysicalBytes)
		}
		if want := int64(4 * min(i+3, 10)); st.LogicalBytes != want || st.Rows != i+3 {
			t.Fatalf("stats %+v, want %d rows and %d logical bytes", st, i+3, want)
		}
	}
	if h.Len() != 102 || h.Oldest() != 92 || h.Window() != 10 || h.Bound() != 0 {
		t.Fatalf("Len %d Oldest %d Window %d Bound %d, want 102 92 10 0", h.Len(), h.Oldest(), h.Window(), h.Bound())
	}
	dst := [][]byte{make([]byte, 40)}
	if err := h.Read(92, 102, dst); err != nil || string(dst[0]) != string(seq(92, 102)) {
		t.Fatalf("Read(92, 102): %v, %v", err, dst[0])
	}
	if err := h.Read(91, 101, dst); !errors.Is(err, ErrExpired) {
		t.Fatalf("Read(91, 101): %v, want ErrExpired", err)
	}
	if _, err := h.Spans(0, 1); !errors.Is(err, ErrExpired) {
		t.Fatalf("Spans(0, 1): %v, want ErrExpired", err)
	}
	if err := h.Read(0, 0, [][]byte{{}}); err != nil {
		t.Fatalf("an empty read below the window: %v", err)
	}
	if err := h.Append([][]byte{seq(0, 11)}); !errors.Is(err, ErrBound) || h.Len() != 102 {
		t.Fatalf("a batch larger than the window: %v (Len %d), want ErrBound and nothing appended", err, h.Len())
	}
	if ps := p.Stats(); ps.PhysicalBytes > 4*256 || ps.LogicalBytes != 40 {
		t.Fatalf("pool stats %+v: expired blocks were not given back", ps)
	}
}

// TestWindowExpiryDeepTree: a window that moves through a tree of three
// levels (a row a block, 40,000 rows), by appends of one to five rows,
// each dropping the blocks below its floor from the leaf and interior
// nodes on their path alone (dropRange), the emptied ones with them,
// under a snapshot now and then that shares the path. The head holds
// the window's blocks and reads its rows after every batch.
func TestWindowExpiryDeepTree(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(ringLayout(50, 1), "o"))
	defer h.Release()
	dst := [][]byte{make([]byte, 4*50)}
	var s *Snap
	for n, k := 0, 1; n < 40_000; n, k = n+k, k%5+1 {
		check(t, h.Append([][]byte{seq(n, n+k)}))
		if n%997 < 5 {
			if s != nil {
				check(t, s.Release())
			}
			s = must[*Snap](t)(h.Snapshot())
		}
		if st := h.Stats(); st.PhysicalBytes > 50*256 {
			t.Fatalf("after %d rows the head holds %d bytes, more than the window's 50 blocks", n+k, st.PhysicalBytes)
		}
		if err := h.Read(n+k-50, n+k, dst); n+k >= 50 && (err != nil || string(dst[0]) != string(seq(n+k-50, n+k))) {
			t.Fatalf("after %d rows, Read of the window: %v", n+k, err)
		}
	}
	check(t, s.Release())
	if ps := p.Stats(); ps.PhysicalBytes > 50*256 {
		t.Fatalf("pool stats %+v: expired blocks were not given back", ps)
	}
	checkInv(t, p)
}

// TestWindowSnapshotPins checks that a snapshot keeps its own readable
// range and the blocks under it, which go back to the pool at its release.
func TestWindowSnapshotPins(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(ringLayout(8, 4), "o"))
	defer h.Release()
	if err := h.Append([][]byte{seq(0, 8)}); err != nil {
		t.Fatal(err)
	}
	s := must[*Snap](t)(h.Snapshot())
	for i := 8; i < 40; i += 4 {
		if err := h.Append([][]byte{seq(i, i+4)}); err != nil {
			t.Fatal(err)
		}
	}
	dst := [][]byte{make([]byte, 32)}
	if err := s.Read(0, 8, dst); err != nil || string(dst[0]) != string(seq(0, 8)) {
		t.Fatalf("snapshot Read(0, 8): %v", err)
	}
	if s.Oldest() != 0 || h.Oldest() != 32 {
		t.Fatalf("Oldest: snapshot %d, head %d; want 0 and 32", s.Oldest(), h.Oldest())
	}
	pinned := p.Stats().PhysicalBytes
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if after := p.Stats().PhysicalBytes; after != pinned-2*256 {
		t.Fatalf("releasing the snapshot left %d physical bytes of %d; want its 2 expired blocks back", after, pinned)
	}
	if err := h.ReadRows([]int{39, 32, 33, 34, 39}, [][]byte{make([]byte, 20)}); err != nil {
		t.Fatal(err)
	}
	if err := h.ReadRows([]int{39, 31}, [][]byte{make([]byte, 8)}); !errors.Is(err, ErrExpired) {
		t.Fatalf("ReadRows of an expired row: %v, want ErrExpired", err)
	}
	if err := h.ReadRows([]int{40}, [][]byte{make([]byte, 4)}); !errors.Is(err, ErrRange) {
		t.Fatalf("ReadRows past Len: %v, want ErrRange", err)
	}
	if err := h.ReadRows([]int{39}, [][]byte{make([]byte, 8)}); !errors.Is(err, ErrShape) {
		t.Fatalf("ReadRows into a short batch: %v, want ErrShape", err)
	}
}

// TestWindowRollback checks that a rollback to a snapshot brings back its
// readable range, and that branches expire on their own.
func TestWindowRollback(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := ringLayout(6, 2)
	h := must[*Head](t)(p.NewHead(l, "o"))
	defer h.Release()
	if err := h.Append([][]byte{seq(0, 6)}); err != nil {
		t.Fatal(err)
	}
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	b := must[*Head](t)(h.Branch())
	defer b.Release()
	if err := h.Append([][]byte{seq(6, 12)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Append([][]byte{seq(6, 9)}); err != nil {
		t.Fatal(err)
	}
	if h.Oldest() != 6 || b.Oldest() != 3 {
		t.Fatalf("Oldest: head %d, branch %d; want 6 and 3", h.Oldest(), b.Oldest())
	}
	if err := h.Rollback(s); err != nil {
		t.Fatal(err)
	}
	dst := [][]byte{make([]byte, 24)}
	if err := h.Read(0, 6, dst); err != nil || string(dst[0]) != string(seq(0, 6)) || h.Oldest() != 0 {
		t.Fatalf("after the rollback: %v, Oldest %d", err, h.Oldest())
	}
}

func TestWindowLayoutChecks(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	bad := []func(l *Layout){
		func(l *Layout) { l.Window = -1 },
		func(l *Layout) { l.Bound = 8 },
		func(l *Layout) { l.Growth, l.Bound = Mutable, 8 },
		func(l *Layout) { l.Checkpoint = &CheckpointPolicy{Every: 1, Keep: 1} },
		func(l *Layout) { l.BlockRows = -2 },
	}
	for i, f := range bad {
		l := ringLayout(4, 0)
		f(l)
		if _, err := p.NewHead(l, "o"); !errors.Is(err, ErrShape) {
			t.Errorf("layout %d: %v, want ErrShape", i, err)
		}
	}
}

// TestReadAllocs checks that reads into a caller's batch allocate nothing.
func TestReadAllocs(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(ringLayout(64, 0), "o"))
	defer h.Release()
	if err := h.Append([][]byte{seq(0, 64)}); err != nil {
		t.Fatal(err)
	}
	dst := [][]byte{make([]byte, 32*4)}
	idx := []int{3, 9, 4, 63, 0, 1, 2, 40}
	gdst := [][]byte{make([]byte, len(idx)*4)}
	if n := testing.AllocsPerRun(100, func() { _ = h.Read(8, 40, dst) }); n != 0 {
		t.Errorf("Read allocates %v times per call", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = h.ReadRows(idx, gdst) }); n != 0 {
		t.Errorf("ReadRows allocates %v times per call", n)
	}
}
