package store

import (
	"bytes"
	"errors"
	"testing"
)

// TestGroupMemberLeftInTheTier: a group whose one member came back from
// the host tier while the other stayed there, for want of room, is still
// one victim: under pressure again the member in device memory goes back
// to the tier, where its partner is, rather than hold its blocks until
// its partner's own call brings it back; and the group's rows come back
// whole.
// splitGroup returns, on p, an optional group of a KV state of 512 rows
// and a recurrent state whose KV member is in the host tier and whose
// recurrent member came back from it, alone, for want of room; with the
// rows each read, and the heads that fill the pool, which the caller
// releases.
func splitGroup(t *testing.T, p *Pool) (g *Group, kvWant [][]byte, recWant []byte, fills []*Head) {
	t.Helper()
	kvL := kv(Mutable, 512, Invalidate)
	kvL.Retention = Optional
	recL := rec(Invalidate)
	recL.Retention = Optional
	g = must[*Group](t)(NewGroup(p, "a", kvL, recL))
	t.Cleanup(func() { // after a failure too: a second release does nothing
		for _, h := range fills {
			h.Release()
		}
	})
	check(t, g.Head(0).Write(0, kvRows(512, 1)))
	check(t, g.Head(1).Write(0, recRow(3)))
	kvWant = [][]byte{make([]byte, 512*16), make([]byte, 512*8)}
	check(t, g.Head(0).Read(0, 512, kvWant))
	recWant = make([]byte, 32)
	check(t, g.Head(1).Read(0, 4, [][]byte{recWant}))
	for i := 0; g.Head(0).tier == nil; i++ {
		if i == 256 {
			t.Fatal("the pool never moved the group")
		}
		fills = append(fills, must[*Head](t)(p.NewHead(oneBlock, "z")))
	}
	// Room for the recurrent member's one block alone: the pool full,
	// then one block given back.
	for {
		h, err := p.NewHead(oneBlock, "z")
		if err != nil {
			break
		}
		fills = append(fills, h)
	}
	check(t, fills[len(fills)-1].Release())
	fills = fills[:len(fills)-1]
	check(t, g.Head(1).Read(0, 4, [][]byte{make([]byte, 32)}))
	if g.Head(0).tier == nil || g.Head(1).tier != nil {
		t.Fatalf("group not split: KV in the tier %v, recurrent %v", g.Head(0).tier != nil, g.Head(1).tier != nil)
	}
	return g, kvWant, recWant, fills
}

// oneBlock is a mandatory state of one 1 KiB block, to fill a pool.
var oneBlock = &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 1}

// TestGroupMemberLeftInTheTier: a group whose one member came back from
// the host tier while the other stayed there, for want of room, is still
// one victim: under pressure again the member in device memory goes back
// to the tier, where its partner is, rather than hold its blocks until
// its partner's own call brings it back; and the group's rows come back
// whole.
func TestGroupMemberLeftInTheTier(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 96 << 10, HostTier: 1 << 20})
	g, kvWant, recWant, fills := splitGroup(t, p)
	defer g.Release()
	releaseAll(t, fills)
	fills = nil
	t.Cleanup(func() { releaseAll(t, fills) })
	for i := 0; g.Head(1).tier == nil; i++ {
		if i == 256 {
			t.Fatal("the member in device memory stayed there: the group was no victim")
		}
		fills = append(fills, must[*Head](t)(p.NewHead(oneBlock, "z")))
	}
	releaseAll(t, fills)
	fills = nil
	got := make([]byte, 32)
	gotKV := [][]byte{make([]byte, 512*16), make([]byte, 512*8)}
	check(t, g.Head(0).Read(0, 512, gotKV))
	check(t, g.Head(1).Read(0, 4, [][]byte{got}))
	if !bytes.Equal(got, recWant) || !bytes.Equal(gotKV[0], kvWant[0]) || !bytes.Equal(gotKV[1], kvWant[1]) {
		t.Fatal("the group's rows changed")
	}
	checkInv(t, p)
}

// TestGroupSplitDroppedWhole: the tier, short of room for another state,
// drops a group split between it and device memory whole: its member's
// image there and its member in device memory, so that both answer
// ErrEvicted; the other state moves in.
func TestGroupSplitDroppedWhole(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 96 << 10, HostTier: 48 << 10})
	g, _, _, fills := splitGroup(t, p)
	defer g.Release()
	releaseAll(t, fills)
	fills = nil
	t.Cleanup(func() { releaseAll(t, fills) })
	optL := &Layout{Type: "Opt", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 40, Retention: Optional}
	o := must[*Head](t)(p.NewHead(optL, "o"))
	defer o.Release()
	rows := make([]byte, 40*1024)
	for i := range rows {
		rows[i] = byte(i * 7)
	}
	check(t, o.Write(0, [][]byte{rows}))
	check(t, g.Head(1).Read(0, 4, [][]byte{make([]byte, 32)})) // the group used last
	for i := 0; o.tier == nil; i++ {
		if i == 256 || (o.evicted && o.tier == nil) {
			t.Fatalf("the other state was not moved to the tier (evicted %v)", o.evicted)
		}
		fills = append(fills, must[*Head](t)(p.NewHead(oneBlock, "z")))
	}
	for i, h := range []*Head{g.Head(0), g.Head(1)} {
		if err := h.Read(0, 1, nil); !errors.Is(err, ErrEvicted) {
			t.Fatalf("member %d: %v, want ErrEvicted", i, err)
		}
	}
	got := [][]byte{make([]byte, 40*1024)}
	check(t, o.Read(0, 40, got))
	if !bytes.Equal(got[0], rows) {
		t.Fatal("the moved state's rows changed")
	}
	checkInv(t, p)
}
