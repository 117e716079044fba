package store

import (
	"testing"
)

// TestWriteDeltaSharesWholeBlocks: the delta of a Write that covers whole
// blocks of every column (to the state's end, where its last block is
// part full) holds the version's blocks rather than copies: the write
// costs no block besides the version's, the next write over them takes
// new blocks and leaves the old to the delta, At reads every retained
// version as it was, a branch's history shares the delta, and the
// history's bytes leave the pool's count with the delta's last holder.
// A write over part of a block keeps a copy, as before.
func TestWriteDeltaSharesWholeBlocks(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := kv(Mutable, 40, Keep) // keys: 16 rows a block (16, 16, 8); values: 32 (32, 8)
	l.Checkpoint = &CheckpointPolicy{Every: 8, Keep: 2}
	h := must[*Head](t)(p.NewHead(l, "a"))
	const version = 5 * 256         // the version's blocks: three of keys, two of values
	base := p.Stats().PhysicalBytes // version 0's blocks, which its checkpoint keeps
	check(t, h.Write(0, kvRows(40, 1)))
	v1, want1 := h.Version(), readAll(t, h)
	if st := p.Stats(); st.PhysicalBytes-base != version || st.HistoryBytes != version {
		t.Fatalf("a write of every block: %d new bytes, %d history bytes; want %d of each (the version's, shared)",
			st.PhysicalBytes-base, st.HistoryBytes, version)
	}
	check(t, h.Write(0, kvRows(40, 2)))
	v2, want2 := h.Version(), readAll(t, h)
	if st := p.Stats(); st.PhysicalBytes-base != 2*version || st.HistoryBytes != 2*version {
		t.Fatalf("a second write of every block: %d new bytes, %d history bytes; want %d of each",
			st.PhysicalBytes-base, st.HistoryBytes, 2*version)
	}
	// Rows [32, 40): the last value block whole (the state's end), but
	// half a key block: a copy of 8 rows a column.
	check(t, h.Write(32, kvRows(8, 3)))
	v3, want3 := h.Version(), readAll(t, h)
	if st := p.Stats(); st.HistoryBytes != 2*version+2*256 {
		t.Fatalf("a write of part of a block: %d history bytes, want %d (a copy of a block a column)", st.HistoryBytes, 2*version+2*256)
	}
	b := must[*Head](t)(h.Branch())
	for _, c := range []struct {
		v    Version
		want [][]byte
	}{{v1, want1}, {v2, want2}, {v3, want3}} {
		for _, x := range []*Head{h, b} {
			s := must[*Snap](t)(x.At(c.v))
			if !sameRows(readAll(t, s), c.want) {
				t.Fatalf("At(%d) reads other rows than the version had", c.v)
			}
			check(t, s.Release())
		}
	}
	check(t, h.Write(0, kvRows(16, 4))) // the head's history only
	checkInv(t, p)
	check(t, h.Release())
	if st := p.Stats(); st.HistoryBytes != 2*version+2*256 {
		t.Fatalf("the branch holds the deltas: %d history bytes, want %d", st.HistoryBytes, 2*version+2*256)
	}
	s := must[*Snap](t)(b.At(v1))
	if !sameRows(readAll(t, s), want1) {
		t.Fatal("the branch's At reads other rows once the head is gone")
	}
	check(t, s.Release())
	checkInv(t, p)
	check(t, b.Release())
	if st := p.Stats(); st.HistoryBytes != 0 || st.PhysicalBytes != 0 {
		t.Fatalf("all released: %d history bytes, %d physical", st.HistoryBytes, st.PhysicalBytes)
	}
}
