package peerbench

import "testing"

// TestSteadyStateAllocs: the one-row calls of a decode loop, through the
// generated handles, allocate nothing once the state has its blocks: an
// Append (its slice of columns stays on the caller's stack) and a
// ReadInto of rows the caller's buffer holds.
func TestSteadyStateAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	p := newPool(t)
	s, err := NewCtxState(p, "me")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	row, dst := newRow(), *newRow()
	tok := int32(0)
	appendRow := func() {
		tok++
		if s.Len() == s.Bound() {
			t.Fatal("the state is full")
		}
		must(s.Append(rowOf(row, tok)))
	}
	for range 64 {
		appendRow() // the first blocks, and the tree's first nodes
	}
	for name, f := range map[string]func(){
		"Append":   appendRow,
		"ReadInto": func() { must(s.ReadInto(&dst, int(tok)-1, int(tok))) },
	} {
		if n := testing.AllocsPerRun(200, f); n > 0 {
			t.Errorf("%s: %.2f allocations a call; want none", name, n)
		}
	}
}

// TestCutIsOneAllocation: a group's cut, taken and released, is one
// allocation: the generated handle holds the store's cut, which holds
// the members' snapshots.
func TestCutIsOneAllocation(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	p := newPool(t)
	g, err := NewHybridState(p, "me")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	row := newRow()
	for tok := range int32(64) {
		must(g.KV().Append(rowOf(row, tok)))
	}
	var err2 error
	if n := testing.AllocsPerRun(200, func() {
		v, err := g.Snapshot()
		if err != nil {
			err2 = err
			return
		}
		err2 = v.Release()
	}); n != 1 {
		t.Errorf("a cut taken and released: %.2f allocations; want 1", n)
	}
	if err2 != nil {
		t.Fatal(err2)
	}
}
