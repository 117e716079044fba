package store

import (
	"bytes"
	"errors"
	"testing"
)

// TestEvictHeadThenItsSnapshot: an optional head that appended past its
// snapshot holds its new block alone and shares the rest with the
// snapshot, which so frees nothing alone, and the two are no joint set
// (the head holds a block alone). A call that needs more than the head's
// own block is made room for all the same: evicting the head leaves the
// snapshot holding the rest alone, and it goes next. The pool's count of
// what eviction could free counts the blocks they hold together.
func TestEvictHeadThenItsSnapshot(t *testing.T) {
	p := smallPool(t, 8, nil)
	h := must[*Head](t)(p.NewHead(wide("Cache", Optional), "a"))
	fill(t, h, 4, 1)
	s := must[*Snap](t)(h.Snapshot())
	fill(t, h, 1, 5)
	m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), "m"))
	fill(t, m, 3, 50)
	// Two blocks: the head's own one would leave the call short.
	check(t, m.Append([][]byte{catWide(wideRow(9), wideRow(10))}))
	for name, x := range map[string]reader{"head": h, "snapshot": s} {
		if err := x.Read(0, 1, [][]byte{make([]byte, 256)}); !errors.Is(err, ErrEvicted) {
			t.Fatalf("%s: %v, want ErrEvicted", name, err)
		}
	}
	want := catWide(wideRow(50), wideRow(51), wideRow(52), wideRow(9), wideRow(10))
	if got := readWide(t, m); !bytes.Equal(got, want) {
		t.Fatal("mandatory head's rows changed")
	}
	checkInv(t, p)
	check(t, s.Release())
	check(t, h.Release())
	check(t, m.Release())
}
