package store

import (
	"bytes"
	"fmt"
	"testing"
)

// TestGroupPartialTailOwners: a shared group whose second member
// has blocks of another row count than the keyed one, so that a
// registered state holds a partial block of it. The first owner goes on
// appending past it (in place: the cache shares the block), another owner
// and a second group of the first owner adopt it and append their own
// rows, and one appends by device without writing: each reads its own
// rows, never another owner's.
func TestGroupPartialTailOwners(t *testing.T) {
	p := newPool(t, PoolOptions{})
	second := &Layout{Type: "Side", Columns: tokLayout.Columns, Growth: Append, Bound: 1024, BlockRows: 24, Descendants: Keep}
	mk := func(owner Owner) *Group {
		return must[*Group](t)(NewSharedGroup(p, owner, "tenant", tokLayout, second))
	}
	prompt := make([]uint32, 40)
	for i := range prompt {
		prompt[i] = uint32(i*7 + 1)
	}
	type member struct {
		g    *Group
		name string
		side []uint32 // the second member's tokens
		kv   []uint32
	}
	feed := func(m *member, tok, side uint32) {
		t.Helper()
		check(t, m.g.Head(1).Append(tokRow(side)))
		check(t, m.g.Head(0).Append(tokRow(tok)))
		m.kv, m.side = append(m.kv, tok), append(m.side, side)
	}
	read := func(m *member) {
		t.Helper()
		for i, toks := range [][]uint32{m.kv, m.side} {
			o := &tailObj{h: m.g.Head(i), toks: toks, name: fmt.Sprintf("%s member %d", m.name, i)}
			tailCheck(t, 0, o)
		}
	}
	a := &member{g: mk("a"), name: "a"}
	defer a.g.Release()
	for i, tok := range prompt {
		feed(a, tok, 50000+uint32(i))
	}
	// a goes on past the registered state's partial block of the side
	// member: in place, since the cache shares it.
	for i := range 5 {
		check(t, a.g.Head(1).Append(tokRow(60000+uint32(i))))
		a.side = append(a.side, 60000+uint32(i))
	}
	read(a)
	for _, owner := range []Owner{"b", "a"} {
		m := &member{g: mk(owner), name: "adopter " + string(owner)}
		n := must[int](t)(m.g.AdoptPrefix(keysOf(prompt)))
		if n == 0 {
			t.Fatalf("%s adopted nothing", m.name)
		}
		m.kv = append(m.kv, prompt[:n]...)
		sideRows := m.g.Head(1).Len()
		t.Logf("%s adopted %d keyed rows and %d side rows", m.name, n, sideRows)
		m.side = append(m.side, a.side[:sideRows]...)
		read(m)
		defer m.g.Release()
		// Rows the adopter never wrote: zeros or its own, never a's.
		if _, err := m.g.Head(1).AppendDevice(3); err != nil {
			t.Fatal(err)
		}
		got := [][]byte{make([]byte, 3*4), make([]byte, 3*8)}
		check(t, m.g.Head(1).Read(sideRows, sideRows+3, got))
		if owner != "a" {
			for _, tok := range a.side {
				if bytes.Contains(got[0], tokRow(tok)[0]) {
					t.Fatalf("%s reads owner a's row %d in rows it appended by device without writing", m.name, tok)
				}
			}
		}
		// Its own rows after them, in the KV member and the side one.
		for i := range 30 {
			tok := uint32(70000 + 100*len(owner) + i)
			check(t, m.g.Head(1).Append(tokRow(tok)))
			check(t, m.g.Head(0).Append(tokRow(tok)))
			m.kv = append(m.kv, tok)
		}
		n1 := m.g.Head(1).Len()
		got = [][]byte{make([]byte, (n1-sideRows-3)*4), make([]byte, (n1-sideRows-3)*8)}
		check(t, m.g.Head(1).Read(sideRows+3, n1, got))
		w := tailWant(m.kv[len(m.kv)-30:])
		if !bytes.Equal(got[0], w[0]) || !bytes.Equal(got[1], w[1]) {
			t.Fatalf("%s reads other rows than its own past the device rows", m.name)
		}
		tailCheck(t, 0, &tailObj{h: m.g.Head(0), toks: m.kv, name: m.name + " kv"})
		got = [][]byte{make([]byte, sideRows*4), make([]byte, sideRows*8)}
		check(t, m.g.Head(1).Read(0, sideRows, got))
		w = tailWant(a.side[:sideRows])
		if !bytes.Equal(got[0], w[0]) || !bytes.Equal(got[1], w[1]) {
			t.Fatalf("%s: the adopted side rows changed", m.name)
		}
		read(a)
	}
	check(t, a.g.Release())
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}
