package store

import (
	"bytes"
	"testing"
)

// TestGroupAtTheAdoptedCut: an adoption moves every member of a group at
// once, so At of the version it made returns every member as the
// adoption left it, and a rollback to that cut restores all of them,
// whichever member shares the prefix. The members used to commit one
// after another, each entry numbered in turn, and At took the entry a
// later member had before the adoption.
func TestGroupAtTheAdoptedCut(t *testing.T) {
	tok := *tokLayout
	tok.Checkpoint = &CheckpointPolicy{Every: 8, Keep: 4}
	tok.Descendants = Invalidate
	recL := rec(Invalidate)
	recL.Checkpoint = &CheckpointPolicy{Every: 8, Keep: 4}
	prompt := make([]uint32, 16) // one block of the shared member
	for i := range prompt {
		prompt[i] = uint32(i*5 + 2)
	}
	for _, first := range []bool{true, false} { // the shared member first, or second
		t.Run(map[bool]string{true: "shared first", false: "shared second"}[first], func(t *testing.T) {
			p := newPool(t, PoolOptions{})
			layouts, kv, rc := []*Layout{&tok, recL}, 0, 1
			if !first {
				layouts, kv, rc = []*Layout{recL, &tok}, 1, 0
			}
			feed := func(g *Group, k uint32) {
				h := readRec(t, g.Head(rc))
				for i := range h {
					h[i] = h[i]*31 + byte(k) + byte(i)
				}
				check(t, g.Head(rc).Write(0, [][]byte{h}))
				check(t, g.Head(kv).Append(tokRow(k)))
			}
			a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", layouts...))
			defer a.Release()
			for _, k := range prompt {
				feed(a, k)
			}
			b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", layouts...))
			defer b.Release()
			if n := must[int](t)(b.AdoptPrefix(keysOf(prompt))); n != len(prompt) {
				t.Fatalf("adopted %d rows, want %d", n, len(prompt))
			}
			want := recAfter(prompt)
			v := b.Head(0).Version()
			feed(b, 99) // a token past the cut
			cut := must[*GroupSnap](t)(b.At(v))
			defer cut.Release()
			if got := readRec(t, cut.Snap(rc)); !bytes.Equal(got, want) {
				t.Errorf("At(%d), the adoption's version: the recurrent member reads %v, want the adopted state %v", v, got, want)
			}
			if got := cut.Snap(kv).Len(); got != len(prompt) {
				t.Errorf("At(%d): the shared member holds %d rows, want %d", v, got, len(prompt))
			}
			check(t, b.Rollback(cut))
			if got := readRec(t, b.Head(rc)); !bytes.Equal(got, want) || b.Head(kv).Len() != len(prompt) {
				t.Errorf("after Rollback to that cut: %d shared rows, the recurrent member reads %v; want %d rows and %v",
					b.Head(kv).Len(), got, len(prompt), want)
			}
		})
	}
}
