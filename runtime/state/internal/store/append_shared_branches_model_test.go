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
// rows. Run it with -race. Each goroutine keeps a reference lineage of its
// own (ref_model_test.go), rooted at the version its branch was made at:
// its versions are the reference's own, never compared with the store's,
// as the goroutines' writes interleave in the lineage the store keeps.
func TestConcurrentBranchModels(t *testing.T) {
	for _, d := range []Descendants{Keep, Invalidate} {
		t.Run(fmt.Sprint(d), func(t *testing.T) {
			l := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 4096, BlockRows: 4, Descendants: d}
			p := newPool(t, PoolOptions{})
			root := must[*Head](t)(p.NewHead(l, "me"))
			rootRef := NewRefLineage("me", l).NewHead(root)
			base := []uint32{1, 2, 3, 4, 5, 6}
			for _, x := range base {
				check(t, root.Append(tokRow(x)))
				rootRef.Append(tokRow(x))
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
					ref := NewRefLineage("me", l).NewHead(b)
					ref.Cols = tailWant(base)
					heads := []*tailRef{{RefHandle: ref}}
					var snaps []*tailRef
					defer func() {
						for _, o := range heads {
							o.Head.Release()
						}
						for _, o := range snaps {
							o.Snap.Release()
						}
					}()
					next := uint32(10000 * (g + 1))
					for step := range 200 {
						h := heads[rng.IntN(len(heads))]
						switch k := rng.IntN(10); {
						case k < 5:
							next++
							if err := h.Head.Append(tokRow(next)); errors.Is(err, ErrInvalidated) {
								continue
							} else if err != nil {
								errc <- err.Error()
								return
							}
							h.Append(tokRow(next))
						case k < 7:
							s, err := h.Head.Snapshot()
							if errors.Is(err, ErrInvalidated) {
								continue
							}
							if err != nil {
								errc <- err.Error()
								return
							}
							snaps = append(snaps, &tailRef{RefHandle: h.Snapshot(s)})
							logf("g%d: snapshot %d of head %p (v%d) = %p", g, len(snaps)-1, h.Head, h.Head.Version(), s)
						case k < 8 && len(heads) < 4:
							c, err := h.Head.Branch()
							if errors.Is(err, ErrInvalidated) {
								continue
							}
							if err != nil {
								errc <- err.Error()
								return
							}
							heads = append(heads, &tailRef{RefHandle: h.Branch(c)})
							logf("g%d: branch %p of head %p (v%d)", g, c, h.Head, h.Head.Version())
						case k < 10 && len(snaps) > 0:
							s := snaps[rng.IntN(len(snaps))]
							err := h.Head.Rollback(s.Snap)
							if ok := h.CanRollback(s.RefHandle); ok != (err == nil) && !(ok && errors.Is(err, ErrInvalidated)) {
								errc <- fmt.Sprintf("goroutine %d step %d: rollback: %v, the reference says possible %v", g, step, err, ok)
								return
							}
							if err == nil {
								h.Rollback(s.RefHandle)
								logf("g%d: head %p rolled back to %p (v%d)", g, h.Head, s.Snap, s.Snap.Version())
							}
						}
						for _, o := range append(append([]*tailRef(nil), heads...), snaps...) {
							if msg := tailRefCheckMsg(o); msg != "" {
								errc <- fmt.Sprintf("goroutine %d step %d: a head or snapshot: %s", g, step, msg)
								return
							}
						}
					}
				}()
			}
			// The root reads its rows meanwhile, and appends its own.
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
				rootRef.Append(tokRow(uint32(900000 + i)))
				tailRefCheck(t, i, &tailRef{RefHandle: rootRef, name: "root"})
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
