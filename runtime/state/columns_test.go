package state

import (
	"bytes"
	"errors"
	"testing"
)

// TestReadColumns: ReadColumns copies the columns dst holds and leaves the
// nil ones unread, on heads and snapshots, and answers ErrShape, ErrRange
// and ErrReleased as Read does, writing nothing into dst when it fails.
func TestReadColumns(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 64})
	h := must[*Head](t)(p.NewHead(kv(Append, 64, Invalidate), "a"))
	rows := kvRows(20, 3)
	check(t, h.Append(rows))
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	check(t, h.Append(kvRows(4, 9))) // the snapshot keeps 20 rows

	for _, x := range []struct {
		name string
		read func(from, to int, dst [][]byte) error
	}{{"Head", h.ReadColumns}, {"Snap", s.ReadColumns}} {
		vals := make([]byte, 15*8)
		if err := x.read(5, 20, [][]byte{nil, vals}); err != nil {
			t.Fatalf("%s.ReadColumns of the values: %v", x.name, err)
		}
		if !bytes.Equal(vals, rows[1][5*8:20*8]) {
			t.Errorf("%s.ReadColumns read other values than appended", x.name)
		}
		keys := make([]byte, 15*16)
		check(t, x.read(5, 20, [][]byte{keys, nil}))
		if !bytes.Equal(keys, rows[0][5*16:20*16]) {
			t.Errorf("%s.ReadColumns read other keys than appended", x.name)
		}
		check(t, x.read(0, 20, [][]byte{nil, nil})) // nothing to read
		short := make([]byte, 8)
		for _, bad := range []struct {
			from, to int
			dst      [][]byte
			want     error
		}{
			{0, 2, [][]byte{nil, short}, ErrShape}, // one row's bytes for two
			{0, 1, [][]byte{short}, ErrShape},      // a column missing
			{0, 1, nil, ErrShape},                  // no columns
			{23, 25, [][]byte{nil, make([]byte, 16)}, ErrRange},
			{-1, 0, [][]byte{nil, nil}, ErrRange},
		} {
			if err := x.read(bad.from, bad.to, bad.dst); !errors.Is(err, bad.want) {
				t.Errorf("%s.ReadColumns(%d, %d) with %d columns: %v, want %v", x.name, bad.from, bad.to, len(bad.dst), err, bad.want)
			}
		}
		if !bytes.Equal(short, make([]byte, 8)) {
			t.Errorf("%s.ReadColumns wrote into dst and failed", x.name)
		}
	}
	check(t, h.Release())
	if err := h.ReadColumns(0, 1, [][]byte{nil, make([]byte, 8)}); !errors.Is(err, ErrReleased) {
		t.Errorf("ReadColumns on a released head: %v, want ErrReleased", err)
	}
	var nilHead *Head
	if err := nilHead.ReadColumns(0, 0, nil); !errors.Is(err, ErrReleased) {
		t.Errorf("ReadColumns on a nil head: %v, want ErrReleased", err)
	}
	var nilSnap *Snap
	if err := nilSnap.ReadColumns(0, 0, nil); !errors.Is(err, ErrReleased) {
		t.Errorf("ReadColumns on a nil snapshot: %v, want ErrReleased", err)
	}
}

// TestVersionAt: VersionAt finds the version of the head's own line that
// held n rows, which At rebuilds and Rollback takes; it follows the line
// through a rollback, and answers ErrRange and ErrNotRetained otherwise.
func TestVersionAt(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 64})
	l := kv(Append, 256, Invalidate)
	l.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 8}
	h := must[*Head](t)(p.NewHead(l, "a"))
	defer h.Release()
	if v, err := h.VersionAt(0); err != nil || v != h.Version() {
		t.Fatalf("VersionAt(0) of an empty head: %d, %v; want its version %d", v, err, h.Version())
	}
	at := map[int]Version{0: h.Version()}
	n := 0
	for i, k := range []int{1, 3, 2, 5, 1, 4} {
		check(t, h.Append(kvRows(k, byte(i))))
		n += k
		at[n] = h.Version()
	}
	for rows, want := range at {
		v, err := h.VersionAt(rows)
		if err != nil || v != want {
			t.Errorf("VersionAt(%d) = %d, %v; want %d", rows, v, err, want)
			continue
		}
		s := must[*Snap](t)(h.At(v))
		if s.Len() != rows {
			t.Errorf("At(VersionAt(%d)) holds %d rows", rows, s.Len())
		}
		check(t, s.Release())
	}
	for _, bad := range []struct {
		n    int
		want error
	}{{-1, ErrRange}, {n + 1, ErrRange}, {2, ErrNotRetained}, {8, ErrNotRetained}} {
		if _, err := h.VersionAt(bad.n); !errors.Is(err, bad.want) {
			t.Errorf("VersionAt(%d): %v, want %v", bad.n, err, bad.want)
		}
	}
	// Back to 4 rows, then on: the line no longer holds the versions of 9
	// rows and more, and VersionAt answers from the new line.
	s := must[*Snap](t)(h.At(must[Version](t)(h.VersionAt(4))))
	check(t, h.Rollback(s))
	check(t, s.Release())
	check(t, h.Append(kvRows(5, 40)))
	if v, err := h.VersionAt(9); err != nil || v != h.Version() {
		t.Errorf("VersionAt(9) after the rollback: %d, %v; want the new line's %d", v, err, h.Version())
	}
	if v, err := h.VersionAt(4); err != nil || v != at[4] {
		t.Errorf("VersionAt(4) after the rollback: %d, %v; want %d", v, err, at[4])
	}
	if _, err := h.VersionAt(16); !errors.Is(err, ErrRange) {
		t.Errorf("VersionAt(16) after the rollback to 4 rows and 5 more: %v, want ErrRange", err)
	}

	plain := must[*Head](t)(p.NewHead(kv(Append, 16, Invalidate), "a"))
	defer plain.Release()
	if _, err := plain.VersionAt(0); !errors.Is(err, ErrNotRetained) {
		t.Errorf("VersionAt without checkpoints: %v, want ErrNotRetained", err)
	}
	var none *Head
	if _, err := none.VersionAt(0); !errors.Is(err, ErrReleased) {
		t.Errorf("VersionAt on a nil head: %v, want ErrReleased", err)
	}
}
