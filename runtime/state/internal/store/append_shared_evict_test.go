package store

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestEvictConcurrentSharedTails: optional heads and snapshots in a
// pool too small for them, on goroutines of their own, branch and append
// past the tails they share while the pool evicts others' states to make
// room. A state answers its rows or ErrEvicted, never another's rows; an
// append answers ErrNoMemory or ErrEvicted, or appends. Run it with
// -race.
func TestEvictConcurrentSharedTails(t *testing.T) {
	l := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 4096, BlockRows: 4, Descendants: Keep, Retention: Optional}
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 14 * 256})
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	soft := func(err error) bool { return errors.Is(err, ErrEvicted) || errors.Is(err, ErrNoMemory) }
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 30 {
				h, err := p.NewHead(l, "me")
				if err != nil {
					errc <- err
					return
				}
				objs := []*tailObj{{h: h}}
				func() {
					defer func() {
						for _, o := range objs {
							if o.h != nil {
								o.h.Release()
							} else {
								o.s.Release()
							}
						}
					}()
					for k := range 80 {
						o := objs[k%len(objs)]
						if o.h == nil {
							continue
						}
						switch k % 7 {
						case 3:
							if s, err := o.h.Snapshot(); err == nil {
								objs = append(objs, &tailObj{s: s, toks: append([]uint32(nil), o.toks...)})
							}
						case 5:
							if b, err := o.h.Branch(); err == nil {
								objs = append(objs, &tailObj{h: b, toks: append([]uint32(nil), o.toks...)})
							}
						default:
							x := uint32(1e6*g + 1000*round + k)
							if err := o.h.Append(tokRow(x)); err == nil {
								o.toks = append(o.toks, x)
							} else if !soft(err) {
								errc <- err
								return
							}
						}
						for _, o := range objs {
							got := [][]byte{make([]byte, 4*len(o.toks)), make([]byte, 8*len(o.toks))}
							err := o.read(0, len(o.toks), got)
							if soft(err) {
								continue
							}
							if err != nil {
								errc <- err
								return
							}
							w := tailWant(o.toks)
							if !bytes.Equal(got[0], w[0]) || !bytes.Equal(got[1], w[1]) {
								errc <- fmt.Errorf("goroutine %d round %d: a state reads other rows than its own", g, round)
								return
							}
						}
					}
				}()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	t.Logf("evictions: %d", st.Evictions)
	if st.Live != 0 || st.PhysicalBytes != 0 {
		t.Fatalf("after releasing everything: %d live, %d physical bytes", st.Live, st.PhysicalBytes)
	}
}
