package store

import (
	"errors"
	"testing"
)

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
