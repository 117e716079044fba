package peerbench

import (
	"runtime"
	"testing"
)

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

// allocsPer returns the allocations of one call of f, averaged over n
// calls: unlike testing.AllocsPerRun, it keeps the fraction, for calls
// whose handles come many to an allocation.
func allocsPer(n int, f func()) float64 {
	f() // warm
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}

// TestHandleAllocs: the handles a serving loop makes at every step (a
// snapshot, a group's cut, a branch and its first write) come many to an
// allocation, so that each costs a small fraction of one once the pool
// has the blocks; a new session costs about one.
func TestHandleAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	if raceDetector {
		t.Skip("the race detector allocates, and its sync.Pool drops what the store keeps")
	}
	p := newPool(t)
	s, err := NewCtxState(p, "me")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	g, err := NewHybridState(p, "me")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	row := newRow()
	for tok := range int32(64) {
		must(s.Append(rowOf(row, tok)))
		must(g.KV().Append(rowOf(row, tok)))
	}
	prompt := &Ctx{}
	for tok := range int32(32) {
		r := rowOf(row, tok)
		prompt.Keys, prompt.Values, prompt.Token = append(prompt.Keys, r.Keys...), append(prompt.Values, r.Values...), append(prompt.Token, r.Token...)
	}
	for _, tt := range []struct {
		name string
		most float64 // allocations a call
		f    func()
	}{
		{"Snapshot and Release", 0.1, func() {
			v, err := s.Snapshot()
			must(err)
			must(v.Release())
		}},
		{"a draft: Snapshot, Append, Rollback, Release", 0.1, func() {
			v, err := s.Snapshot()
			must(err)
			must(s.Append(rowOf(row, 7)))
			must(s.Rollback(v))
			must(v.Release())
		}},
		{"a group's cut and its Release", 0.2, func() {
			v, err := g.Snapshot()
			must(err)
			must(v.Release())
		}},
		{"Branch, its first Append, Release", 0.3, func() {
			c, err := s.Branch()
			must(err)
			must(c.Append(rowOf(row, 9)))
			must(c.Release())
		}},
		// A session's line is one allocation of its own: a lineage
		// outlives the head that made it, so it shares no chunk.
		{"a new session of 32 rows, released", 1.2, func() {
			c, err := NewCtxState(p, "you")
			must(err)
			must(c.Append(*prompt))
			must(c.Release())
		}},
	} {
		if n := allocsPer(2000, tt.f); n > tt.most {
			t.Errorf("%s: %.3f allocations a call; want at most %.2f", tt.name, n, tt.most)
		}
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
