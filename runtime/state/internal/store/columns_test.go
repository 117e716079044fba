package store

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
