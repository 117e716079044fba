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

// TestWindowedTokenAllocs: a token of (e) and of (er) once the window is
// full and the history trims as it goes (the recurrent step, the KV row
// appended past the window, whose oldest row expires, and the two row
// reads) allocates nothing: the recurrent state's deltas and step records
// are the ones its history dropped past Keep, and the window's expired
// blocks and tree nodes are the next rows'.
func TestWindowedTokenAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	if raceDetector {
		t.Skip("under the race detector, sync.Pool drops what the store keeps for reuse at random")
	}
	for _, replay := range []bool{false, true} {
		p := newPool(t)
		s := newStoreE(p, sizes{sessions: 1}, replay).(*storeE)
		if replay {
			g, err := NewWindowedRState(p, "me")
			must(err)
			s.gr = append(s.gr, g)
		} else {
			g, err := NewWindowedState(p, "me")
			must(err)
			s.gs = append(s.gs, g)
		}
		n := 0
		token := func() {
			n++
			s.token(0, n, int32(n%1000))
			c := s.kv(0)
			for _, r := range [2]int{c.Oldest() + n%(c.Len()-c.Oldest()), c.Len() - 1} {
				must(c.ReadInto(&s.dst, r, r+1))
			}
		}
		for range 2 * Window { // past the window and past Keep
			token()
		}
		// Counted over 64 tokens: AllocsPerRun rounds down.
		if a := testing.AllocsPerRun(8, func() {
			for range 64 {
				token()
			}
		}); a != 0 {
			t.Errorf("replay %v: %v allocations per 64 tokens; want none", replay, a)
		}
		for _, g := range s.gs {
			must(g.Release())
		}
		for _, g := range s.gr {
			must(g.Release())
		}
	}
}
