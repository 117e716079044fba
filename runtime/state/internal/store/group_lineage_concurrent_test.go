package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestGroupLineageConcurrent: groups of one lineage (a group and
// its branches) append past their shared tails, snapshot, roll back and
// merge one another from goroutines of their own, crossing in both
// directions (a.Merge(b) while b.Merge(a)). Nothing deadlocks, races or
// panics; each group's token member reads the tokens its model says;
// releasing everything gives every block back. Run it with -race.
func TestGroupLineageConcurrent(t *testing.T) {
	p := newPool(t, PoolOptions{})
	kvl := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 4096, BlockRows: 4, Descendants: Keep}
	side := &Layout{Type: "Side", Columns: tokLayout.Columns, Growth: Append, Bound: 4096, BlockRows: 6, Descendants: Keep}
	root := must[*Group](t)(NewGroup(p, "me", kvl, side))
	for i := range 5 {
		check(t, root.Head(0).Append(tokRow(uint32(i))))
		check(t, root.Head(1).Append(tokRow(uint32(i))))
	}
	const n = 4
	type gm struct {
		mu   sync.Mutex // the model's, not the store's
		g    *Group
		toks []uint32
	}
	gs := []*gm{{g: root, toks: []uint32{0, 1, 2, 3, 4}}}
	for range n - 1 {
		gs = append(gs, &gm{g: must[*Group](t)(root.Branch()), toks: []uint32{0, 1, 2, 3, 4}})
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 100)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := gs[i]
			for k := range 60 {
				switch k % 5 {
				case 0, 1, 2:
					tok := uint32(1000*(i+1) + k)
					me.mu.Lock()
					err := me.g.Head(0).Append(tokRow(tok))
					if err == nil {
						err = me.g.Head(1).Append(tokRow(tok))
					}
					if err != nil {
						me.mu.Unlock()
						errc <- err
						return
					}
					me.toks = append(me.toks, tok)
					me.mu.Unlock()
				case 3:
					me.mu.Lock()
					s, err := me.g.Snapshot()
					if err != nil {
						me.mu.Unlock()
						errc <- err
						return
					}
					keep := append([]uint32(nil), me.toks...)
					tok := uint32(5000*(i+1) + k)
					me.g.Head(0).Append(tokRow(tok))
					me.g.Head(1).Append(tokRow(tok))
					if err := me.g.Rollback(s); err != nil {
						me.mu.Unlock()
						errc <- fmt.Errorf("rollback: %w", err)
						return
					}
					me.toks = keep
					me.mu.Unlock()
					s.Release()
				case 4:
					other := gs[(i+1+k)%n]
					if other == me {
						continue
					}
					// Both locks of the model, in index order.
					a, b := me, other
					if fmt.Sprintf("%p", a) > fmt.Sprintf("%p", b) {
						a, b = b, a
					}
					a.mu.Lock()
					b.mu.Lock()
					err := me.g.Merge(other.g)
					if err == nil {
						me.toks = append([]uint32(nil), other.toks...)
					} else if !errors.Is(err, ErrDiverged) && !errors.Is(err, ErrNotAncestor) {
						b.mu.Unlock()
						a.mu.Unlock()
						errc <- fmt.Errorf("merge: %w", err)
						return
					}
					b.mu.Unlock()
					a.mu.Unlock()
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the groups' calls did not finish in 60s: a deadlock")
	}
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for i, m := range gs {
		for c := range 2 {
			tailCheck(t, 0, &tailObj{h: m.g.Head(c), toks: m.toks, name: fmt.Sprintf("group %d member %d", i, c)})
		}
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
	for _, m := range gs {
		check(t, m.g.Release())
	}
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
		t.Fatalf("after releasing everything: %d live, %d physical bytes", st.Live, st.PhysicalBytes)
	}
}
