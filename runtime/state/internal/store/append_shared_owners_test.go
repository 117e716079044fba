package store

import (
	"bytes"
	"fmt"
	"testing"
)

// TestSharedHeadOwners: heads of two owners in one sharing domain.
// Alice's head publishes full blocks and goes on past them; bob and a
// second head of alice's adopt the prefix and append (host and by device
// without writing); alice's own branch appends past her shared tail.
// Nobody reads another's rows, bob never reads alice's in rows he did not
// write, and releasing everything gives every block back.
func TestSharedHeadOwners(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 1024, BlockRows: 4, ShareKey: "Tok", Descendants: Keep}
	var prompt []uint32
	for i := range 10 {
		prompt = append(prompt, uint32(7*i+3))
	}
	alice := must[*Head](t)(p.NewSharedHead(l, "alice", "d"))
	w := tailWant(prompt)
	check(t, alice.Append([][]byte{w[0], w[1]}))
	ab := must[*Head](t)(alice.Branch())
	objs := []*tailObj{{h: alice, toks: append([]uint32(nil), prompt...), name: "alice"}, {h: ab, toks: append([]uint32(nil), prompt...), name: "alice's branch"}}
	for i := range 3 { // in place past the tail alice shares with her branch
		check(t, alice.Append(tokRow(uint32(900+i))))
		objs[0].toks = append(objs[0].toks, uint32(900+i))
	}
	check(t, ab.Append(tokRow(800)))
	objs[1].toks = append(objs[1].toks, 800)
	for _, owner := range []Owner{"bob", "alice", "bob"} {
		x := must[*Head](t)(p.NewSharedHead(l, owner, "d"))
		n := must[int](t)(x.AdoptPrefix(keysOf(prompt)))
		if n != 8 {
			t.Fatalf("%s adopted %d rows, want 8", owner, n)
		}
		o := &tailObj{h: x, toks: append([]uint32(nil), prompt[:n]...), name: fmt.Sprint("adopter ", owner, len(objs))}
		objs = append(objs, o)
		// Rows it never wrote: zeros or its own words.
		if _, err := x.AppendDevice(3); err != nil {
			t.Fatal(err)
		}
		got := [][]byte{make([]byte, 12), make([]byte, 24)}
		check(t, x.Read(n, n+3, got))
		if owner != "alice" {
			for _, tok := range objs[0].toks {
				if bytes.Contains(got[1], tokRow(tok)[1]) {
					t.Fatalf("%s reads alice's row of token %d in rows it appended by device without writing", owner, tok)
				}
			}
		}
		// Its own rows past them: checked apart from the unwritten ones.
		var mine []uint32
		for i := range 6 {
			mine = append(mine, uint32(5000+100*len(objs)+i))
			check(t, x.Append(tokRow(mine[i])))
		}
		got = [][]byte{make([]byte, 24), make([]byte, 48)}
		check(t, x.Read(n+3, n+9, got))
		if w := tailWant(mine); !bytes.Equal(got[0], w[0]) || !bytes.Equal(got[1], w[1]) {
			t.Fatalf("%s reads other rows than its own", o.name)
		}
		got = [][]byte{make([]byte, 4*n), make([]byte, 8*n)}
		check(t, x.Read(0, n, got))
		if w := tailWant(prompt[:n]); !bytes.Equal(got[0], w[0]) || !bytes.Equal(got[1], w[1]) {
			t.Fatalf("%s: its adopted rows changed", o.name)
		}
		for _, o := range objs[:2] {
			tailCheck(t, 0, o)
		}
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		check(t, o.h.Release())
	}
	p.ForgetPrefixes("d")
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
		t.Fatalf("after releasing everything and forgetting the prefixes: %d live, %d physical bytes", st.Live, st.PhysicalBytes)
	}
}
