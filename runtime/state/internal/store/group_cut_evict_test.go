package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// cutGroup returns an optional group of a KV state of 512 rows and a
// recurrent state, and a cut of it that alone holds its rows, with the
// rows it read.
func cutGroup(t *testing.T, p *Pool) (*Group, *GroupSnap, [][]byte, []byte) {
	t.Helper()
	kvL := kv(Mutable, 512, Invalidate)
	kvL.Retention = Optional
	recL := rec(Invalidate)
	recL.Retention = Optional
	g := must[*Group](t)(NewGroup(p, "a", kvL, recL))
	check(t, g.Head(0).Write(0, kvRows(512, 1)))
	check(t, g.Head(1).Write(0, recRow(3)))
	cut := new(GroupSnap)
	check(t, g.SnapshotInto(cut))
	// The heads go on, so that the cut alone holds its version's blocks.
	check(t, g.Head(0).Write(0, kvRows(512, 2)))
	check(t, g.Head(1).Write(0, recRow(4)))
	kvRowsWant := [][]byte{make([]byte, 512*16), make([]byte, 512*8)}
	check(t, cut.Snap(0).Read(0, 512, kvRowsWant))
	recWant := make([]byte, 32)
	check(t, cut.Snap(1).Read(0, 4, [][]byte{recWant}))
	return g, cut, kvRowsWant, recWant
}

// TestCutEvictedWhole: the Evictor sees a group's cut as one victim, of
// its members' bytes, and the pool evicts every member's snapshot or
// none. A cut with one member evicted could not be rolled back to, and
// the other would hold its blocks for nothing.
func TestCutEvictedWhole(t *testing.T) {
	rk := &recorder{}
	p := newPool(t, PoolOptions{MaxBytes: 96 << 10, Evictor: rk})
	g, cut, _, _ := cutGroup(t, p)
	defer g.Release()
	defer cut.Release()
	want := cut.Snap(0).physical(cut.Snap(0).r) + cut.Snap(1).physical(cut.Snap(1).r)
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 8}
	for i := 0; cut.Snap(0).evicted == cut.Snap(1).evicted && !cut.Snap(0).evicted; i++ {
		if i == 64 {
			t.Fatal("the pool never evicted the cut")
		}
		h, err := p.NewHead(big, "z")
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
	}
	if !cut.Snap(0).evicted || !cut.Snap(1).evicted {
		t.Fatalf("one member of the cut was evicted alone: KV %v, recurrent %v", cut.Snap(0).evicted, cut.Snap(1).evicted)
	}
	var seen []Victim
	for _, v := range rk.seen {
		if v.Snapshot {
			seen = append(seen, v)
		}
	}
	if len(seen) == 0 || seen[0].Bytes != want || seen[0].Owner != "a" {
		t.Fatalf("the Evictor saw the cut as %+v, want one victim of %d bytes of owner a", seen, want)
	}
	for i := range 2 {
		if err := cut.Snap(i).Read(0, 1, [][]byte{make([]byte, 16), make([]byte, 8)}[:2-i]); !errors.Is(err, ErrEvicted) {
			t.Fatalf("member %d of the evicted cut answered %v", i, err)
		}
	}
	if err := g.Rollback(cut); !errors.Is(err, ErrEvicted) {
		t.Fatalf("a rollback to the evicted cut answered %v", err)
	}
	checkInv(t, p)
}

// TestCutMovesToTheTierWhole: with a host tier the cut moves there whole,
// and a read of one member brings both back, with their rows; a cut whose
// member the caller released goes on as the other alone.
func TestCutMovesToTheTierWhole(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 96 << 10, HostTier: 1 << 20})
	g, cut, kvWant, recWant := cutGroup(t, p)
	defer g.Release()
	defer cut.Release()
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 8}
	var fills []*Head
	for i := 0; cut.Snap(0).tier == nil && cut.Snap(1).tier == nil; i++ {
		if i == 64 {
			t.Fatal("the pool never moved the cut")
		}
		fills = append(fills, must[*Head](t)(p.NewHead(big, "z")))
	}
	if cut.Snap(0).tier == nil || cut.Snap(1).tier == nil {
		t.Fatal("one member of the cut moved to the tier alone")
	}
	checkInv(t, p)
	for _, h := range fills {
		check(t, h.Release())
	}
	got := make([]byte, 32)
	check(t, cut.Snap(1).Read(0, 4, [][]byte{got}))
	if cut.Snap(0).tier != nil {
		t.Fatal("a read of one member left the other in the tier")
	}
	gotKV := [][]byte{make([]byte, 512*16), make([]byte, 512*8)}
	check(t, cut.Snap(0).Read(0, 512, gotKV))
	if !bytes.Equal(got, recWant) || !bytes.Equal(gotKV[0], kvWant[0]) || !bytes.Equal(gotKV[1], kvWant[1]) {
		t.Fatal("the cut's rows changed in the tier")
	}
	check(t, g.Rollback(cut))
	checkInv(t, p)
	check(t, g.Head(0).Write(0, kvRows(512, 3))) // the cut holds its blocks alone again
	check(t, g.Head(1).Write(0, recRow(5)))
	fills = fills[:0]

	// The KV member released alone: the recurrent one is the cut now.
	check(t, cut.Snap(0).Release())
	for i := 0; cut.Snap(1).tier == nil; i++ {
		if i == 64 {
			t.Fatal("the pool never moved the cut's member left")
		}
		fills = append(fills, must[*Head](t)(p.NewHead(big, "z")))
	}
	for _, h := range fills {
		h.Release()
	}
	check(t, cut.Snap(1).Read(0, 4, [][]byte{got}))
	if !bytes.Equal(got, recWant) {
		t.Fatal("the member left read other rows")
	}
	checkInv(t, p)
}

// TestCutMemberLeftInTheTier: a member that stays in the tier when
// another comes back (no room for it) leaves the cut partly in device
// memory; the pool still takes the cut as one victim, the member in
// device memory, rather than keep it there for good.
func TestCutMemberLeftInTheTier(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 96 << 10, HostTier: 1 << 20})
	g, cut, kvWant, recWant := cutGroup(t, p)
	defer g.Release()
	defer cut.Release()
	one := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 1}
	var fills []*Head
	defer func() {
		for _, h := range fills {
			h.Release()
		}
	}()
	for i := 0; cut.Snap(0).tier == nil; i++ {
		if i == 256 {
			t.Fatal("the pool never moved the cut")
		}
		fills = append(fills, must[*Head](t)(p.NewHead(one, "z")))
	}
	// Room for the recurrent member's one block alone: the pool full,
	// then one block given back.
	for {
		h, err := p.NewHead(one, "z")
		if err != nil {
			break
		}
		fills = append(fills, h)
	}
	check(t, fills[len(fills)-1].Release())
	fills = fills[:len(fills)-1]
	got := make([]byte, 32)
	check(t, cut.Snap(1).Read(0, 4, [][]byte{got}))
	if cut.Snap(0).tier == nil {
		t.Skip("the KV member came back too: the pool had room")
	}
	// Pressure again: the member in device memory goes back to the
	// tier, where the other is.
	for _, h := range fills {
		check(t, h.Release())
	}
	fills = fills[:0]
	for i := 0; cut.Snap(1).tier == nil; i++ {
		if i == 256 {
			t.Fatal("the member in device memory stayed there: the cut was no victim")
		}
		fills = append(fills, must[*Head](t)(p.NewHead(one, "z")))
	}
	for _, h := range fills {
		check(t, h.Release())
	}
	fills = fills[:0]
	gotKV := [][]byte{make([]byte, 512*16), make([]byte, 512*8)}
	check(t, cut.Snap(0).Read(0, 512, gotKV))
	check(t, cut.Snap(1).Read(0, 4, [][]byte{got}))
	if !bytes.Equal(got, recWant) || !bytes.Equal(gotKV[0], kvWant[0]) || !bytes.Equal(gotKV[1], kvWant[1]) {
		t.Fatal("the cut's rows changed")
	}
	checkInv(t, p)
}

// TestTabledSnapshotStays: a snapshot's block table never changes, and a
// kernel may read through it at any time, so the pool neither evicts nor
// moves a snapshot that has one, alone or in a cut: the blocks it lists
// never go to another owner while the table lives. (An evicted one kept a
// table that answered, listing blocks another owner's heads then took.)
func TestTabledSnapshotStays(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  bool
	}{{"alone", false}, {"cut", true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 32 * 256, HostTier: 1 << 20})
			kvL := kv(Mutable, 32, Invalidate)
			kvL.Retention = Optional
			recL := rec(Invalidate)
			recL.Retention = Optional
			var s *Snap
			var rec *Snap
			write := func() {}
			if tc.cut {
				g := must[*Group](t)(NewGroup(p, "a", kvL, recL))
				defer g.Release()
				check(t, g.Head(0).Write(0, kvRows(32, 1)))
				check(t, g.Head(1).Write(0, recRow(3)))
				cut := new(GroupSnap)
				check(t, g.SnapshotInto(cut))
				defer cut.Release()
				s, rec = cut.Snap(0), cut.Snap(1)
				write = func() {
					check(t, g.Head(0).Write(0, kvRows(32, 2)))
					check(t, g.Head(1).Write(0, recRow(4)))
				}
			} else {
				h := must[*Head](t)(p.NewHead(kvL, "a"))
				defer h.Release()
				check(t, h.Write(0, kvRows(32, 1)))
				s = must[*Snap](t)(h.Snapshot())
				defer s.Release()
				write = func() { check(t, h.Write(0, kvRows(32, 2))) }
			}
			tb := must[*BlockTable](t)(s.BlockTable())
			defer tb.Release()
			write() // the snapshots hold their blocks alone
			listed := map[uint64]bool{}
			for _, e := range tb.cols[0].dev[:tb.cols[0].n] {
				listed[e] = true
			}
			small := &Layout{Type: "Small", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}, Growth: Mutable, Bound: 1}
			var fills []*Head
			defer func() {
				for _, f := range fills {
					f.Release()
				}
			}()
			for {
				f, err := p.NewHead(small, "z")
				if err != nil {
					break
				}
				fills = append(fills, f)
				sp := must[[][]device.Span](t)(f.Spans(0, 1))
				if listed[uint64(sp[0][0].Ptr)] {
					t.Fatal("another owner's head took a block the snapshot's table lists")
				}
			}
			if s.evicted || (rec != nil && rec.evicted) {
				t.Fatalf("the pool took a snapshot with a table, or its cut: %v, %v", s.evicted, rec != nil && rec.evicted)
			}
			if _, err := tb.Column(0); err != nil {
				t.Fatalf("the table answers %v", err)
			}
			checkInv(t, p)
		})
	}
}

// TestCutWithAnEmptyMemberMoves: a member of no rows holds no block, and
// stays where it is while the rest of its cut moves to the tier, which
// has room: the cut is not dropped for it.
func TestCutWithAnEmptyMemberMoves(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 32 << 10, HostTier: 1 << 20})
	kvL := kv(Append, 512, Invalidate)
	kvL.Retention = Optional
	recL := rec(Invalidate)
	recL.Retention = Optional
	g := must[*Group](t)(NewGroup(p, "a", kvL, recL))
	defer g.Release()
	check(t, g.Head(1).Write(0, recRow(3)))
	cut := new(GroupSnap)
	check(t, g.SnapshotInto(cut))
	defer cut.Release()
	check(t, g.Head(1).Write(0, recRow(4)))  // the recurrent snapshot holds its block alone
	check(t, g.Head(0).Append(kvRows(8, 1))) // and the KV one, of no rows, its root
	small := &Layout{Type: "Small", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}, Growth: Mutable, Bound: 1}
	var fills []*Head
	for i := 0; cut.Snap(1).tier == nil; i++ {
		if i == 1024 {
			t.Fatalf("the cut never moved to the tier (recurrent member evicted %v)", cut.Snap(1).evicted)
		}
		fills = append(fills, must[*Head](t)(p.NewHead(small, "z")))
	}
	for _, h := range fills {
		check(t, h.Release())
	}
	got := [][]byte{make([]byte, 32)}
	check(t, cut.Snap(1).Read(0, 4, got))
	if !bytes.Equal(got[0], recRow(3)[0]) {
		t.Fatal("the recurrent member read other rows after the tier")
	}
	if n := cut.Snap(0).Len(); n != 0 {
		t.Fatalf("the empty member has %d rows", n)
	}
	check(t, g.Rollback(cut))
	checkInv(t, p)
}
