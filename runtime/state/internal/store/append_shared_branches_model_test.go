package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestConcurrentBranchModels: branches of one version, each on a
// goroutine of its own, append past the tail they share, snapshot, roll
// back to their own snapshots (rows after a rollback go where the rolled
// back rows went, which Keep snapshots still hold) and branch again,
// checking after every step that they and their snapshots read their own
// rows. Run it with -race.
func TestConcurrentBranchModels(t *testing.T) {
	for _, d := range []Descendants{Keep, Invalidate} {
		t.Run(fmt.Sprint(d), func(t *testing.T) {
			l := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 4096, BlockRows: 4, Descendants: d}
			p := newPool(t, PoolOptions{})
			root := must[*Head](t)(p.NewHead(l, "me"))
			base := []uint32{1, 2, 3, 4, 5, 6}
			for _, x := range base {
				check(t, root.Append(tokRow(x)))
			}
			const n = 5
			var logMu sync.Mutex
			var log []string
			logf := func(f string, a ...any) {
				logMu.Lock()
				log = append(log, fmt.Sprintf(f, a...))
				logMu.Unlock()
			}
			var wg sync.WaitGroup
			errc := make(chan string, n)
			for g := range n {
				b := must[*Head](t)(root.Branch())
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 3))
					heads := []*tailObj{{h: b, toks: append([]uint32(nil), base...)}}
					var snaps []*tailObj
					defer func() {
						for _, o := range heads {
							o.h.Release()
						}
						for _, o := range snaps {
							o.s.Release()
						}
					}()
					next := uint32(10000 * (g + 1))
					for step := range 200 {
						h := heads[rng.IntN(len(heads))]
						switch k := rng.IntN(10); {
						case k < 5:
							next++
							if err := h.h.Append(tokRow(next)); errors.Is(err, ErrInvalidated) {
								continue
							} else if err != nil {
								errc <- err.Error()
								return
							}
							h.toks = append(h.toks, next)
						case k < 7:
							s, err := h.h.Snapshot()
							if errors.Is(err, ErrInvalidated) {
								continue
							}
							if err != nil {
								errc <- err.Error()
								return
							}
							snaps = append(snaps, &tailObj{s: s, toks: append([]uint32(nil), h.toks...)})
							logf("g%d: snapshot %d of head %p (v%d) = %p", g, len(snaps)-1, h.h, h.h.Version(), s)
						case k < 8 && len(heads) < 4:
							c, err := h.h.Branch()
							if errors.Is(err, ErrInvalidated) {
								continue
							}
							if err != nil {
								errc <- err.Error()
								return
							}
							heads = append(heads, &tailObj{h: c, toks: append([]uint32(nil), h.toks...)})
							logf("g%d: branch %p of head %p (v%d)", g, c, h.h, h.h.Version())
						case k < 10 && len(snaps) > 0:
							s := snaps[rng.IntN(len(snaps))]
							if err := h.h.Rollback(s.s); err == nil {
								h.toks = append([]uint32(nil), s.toks...)
								logf("g%d: head %p rolled back to %p (v%d)", g, h.h, s.s, s.s.Version())
							}
						}
						for _, o := range append(append([]*tailObj(nil), heads...), snaps...) {
							got := [][]byte{make([]byte, 4*len(o.toks)), make([]byte, 8*len(o.toks))}
							err := o.read(0, len(o.toks), got)
							if errors.Is(err, ErrInvalidated) {
								continue
							}
							if errors.Is(err, ErrInvalidated) {
								continue
							}
							if err != nil {
								errc <- err.Error()
								return
							}
							w := tailWant(o.toks)
							if string(got[0]) != string(w[0]) || string(got[1]) != string(w[1]) {
								errc <- fmt.Sprintf("goroutine %d step %d: a head or snapshot reads other rows than its own", g, step)
								return
							}
						}
					}
				}()
			}
			// The root reads its rows meanwhile, and appends its own.
			toks := append([]uint32(nil), base...)
			for i := range 100 {
				if err := root.Append(tokRow(uint32(900000 + i))); err != nil {
					wg.Wait()
					logMu.Lock()
					for _, x := range log {
						t.Log(x)
					}
					logMu.Unlock()
					t.Fatalf("root %p, append %d: %v", root, i, err)
				}
				toks = append(toks, uint32(900000+i))
				tailCheck(t, i, &tailObj{h: root, toks: toks, name: "root"})
			}
			wg.Wait()
			close(errc)
			for e := range errc {
				t.Fatal(e)
			}
			check(t, root.Release())
			if err := checkInvariants(p); err != nil {
				t.Fatal(err)
			}
			if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
				t.Fatalf("after releasing everything: %d live, %d physical bytes", st.Live, st.PhysicalBytes)
			}
		})
	}
}
