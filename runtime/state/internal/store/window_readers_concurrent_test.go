package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// Readers of snapshots (and of At's snapshots) while the head
// appends, steps and rolls back; run with -race.

type bcSnap struct {
	s    *Snap
	want []uint32 // readable rows
	old  int
	n    int
	refs sync.WaitGroup
}

// TestConcurrentWindowReaders: a writer appends to a windowed head,
// snapshots it, rolls it back and releases snapshots (after their
// readers are done), while readers read the snapshots they are handed.
func TestConcurrentWindowReaders(t *testing.T) {
	for _, desc := range []Descendants{Keep, Invalidate} {
		t.Run(desc.String(), func(t *testing.T) {
			p := newPool(t, PoolOptions{BlockBytes: 256})
			w := 6
			h := must[*Head](t)(p.NewHead(bwLayout(w, 2, desc, Mandatory), "o"))
			defer h.Release()
			const readers = 3
			ch := make(chan *bcSnap, 64)
			errs := make(chan error, 1024) // a send never blocks a release
			var wg sync.WaitGroup
			for r := range readers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for s := range ch {
						dst := [][]byte{make([]byte, 4*(s.n-s.old))}
						for range 20 {
							err := s.s.Read(s.old, s.n, dst)
							if errors.Is(err, ErrInvalidated) && desc == Invalidate {
								break
							}
							if err != nil {
								errs <- fmt.Errorf("reader %d: %v", r, err)
								break
							}
							if got := bwDecode(dst[0]); !slices.Equal(got, s.want) {
								errs <- fmt.Errorf("reader %d: snapshot reads %v, want %v", r, got, s.want)
								break
							}
							if s.s.Len() != s.n || s.s.Oldest() != s.old {
								errs <- fmt.Errorf("reader %d: Len %d Oldest %d, want %d %d", r, s.s.Len(), s.s.Oldest(), s.n, s.old)
								break
							}
						}
						s.refs.Done()
					}
				}()
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var rows []uint32
			next := uint32(1)
			var held []*bcSnap
			var releasing sync.WaitGroup // the releases after the readers
			for step := 0; step < 400; step++ {
				switch op := rng.IntN(10); {
				case op < 5:
					n := 1 + rng.IntN(w)
					vals := make([]uint32, n)
					for i := range vals {
						vals[i] = next
						next++
					}
					check(t, h.Append(bwVals(vals)))
					rows = append(rows, vals...)
				case op < 7:
					s := must[*Snap](t)(h.Snapshot())
					n := len(rows)
					old := max(0, n-w)
					bs := &bcSnap{s: s, want: slices.Clone(rows[old:]), old: old, n: n}
					bs.refs.Add(readers)
					for range readers {
						ch <- bs
					}
					held = append(held, bs)
				case op < 9:
					if len(held) == 0 {
						continue
					}
					i := rng.IntN(len(held))
					s := held[i]
					if err := h.Rollback(s.s); err == nil {
						rows = rows[:s.n]
						// rows below the window are gone from the model's
						// view only; the values are kept for indexing.
					} else if !errors.Is(err, ErrNotAncestor) && !errors.Is(err, ErrInvalidated) {
						t.Fatal(err)
					}
				default:
					if len(held) == 0 {
						continue
					}
					i := rng.IntN(len(held))
					s := held[i]
					held = slices.Delete(held, i, i+1)
					releasing.Go(func() { // released once its readers are done
						s.refs.Wait()
						if err := s.s.Release(); err != nil {
							errs <- err
						}
					})
				}
				n := len(rows)
				old := max(0, n-w)
				dst := [][]byte{make([]byte, 4*(n-old))}
				check(t, h.Read(old, n, dst))
				if got := bwDecode(dst[0]); !slices.Equal(got, rows[old:]) {
					t.Fatalf("step %d: head reads %v, want %v", step, got, rows[old:])
				}
				select {
				case err := <-errs:
					t.Fatal(err)
				default:
				}
			}
			close(ch)
			wg.Wait()
			releasing.Wait()
			for _, s := range held {
				s.refs.Wait()
				check(t, s.s.Release())
			}
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			check(t, h.Release())
			if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.Live != 0 {
				t.Fatalf("after releasing everything: %+v", ps)
			}
		})
	}
}

// TestConcurrentAtWhileStepping: readers call At on versions of a
// replayed head while the writer steps it (some steps failing after
// writing in place) and rolls it back; every At that succeeds reads the
// rows of its version.
func TestConcurrentAtWhileStepping(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(recLayout(3, 3, Keep), "o"))
	var mu sync.Mutex
	model := map[Version][][]byte{}
	var versions []Version
	cur, _ := bgRead(h, 10)
	model[h.Version()] = bgClone(cur)
	versions = append(versions, h.Version())
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				v := versions[rng.IntN(len(versions))]
				want := model[v]
				mu.Unlock()
				s, err := h.At(v)
				if err != nil {
					if !errors.Is(err, ErrNotRetained) {
						errs <- fmt.Errorf("At(%d): %v", v, err)
						return
					}
					continue
				}
				got, err := bgRead(s, 10)
				if err != nil || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) || s.Version() != v {
					errs <- fmt.Errorf("At(%d) reads other rows (%v)", v, err)
					s.Release()
					return
				}
				if err := s.Release(); err != nil { // not check: this is not the test's goroutine
					errs <- err
					return
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var snaps []*Snap
	var snapV []Version
	for step := 0; step < 300; step++ {
		switch op := rng.IntN(10); {
		case op < 6:
			in := [][]byte{{byte(step), 7}}
			mode := 0
			if rng.IntN(4) == 0 {
				mode = 1
			}
			err := h.StepHostWith(in, true, bgStep{mode})
			if mode == 1 {
				if !errors.Is(err, errBG) {
					t.Fatal(err)
				}
				break
			}
			check(t, err)
			recur(cur, in)
			mu.Lock()
			model[h.Version()] = bgClone(cur)
			versions = append(versions, h.Version())
			mu.Unlock()
		case op < 8:
			snaps = append(snaps, must[*Snap](t)(h.Snapshot()))
			snapV = append(snapV, h.Version())
		default:
			if len(snaps) == 0 {
				break
			}
			i := rng.IntN(len(snaps))
			if err := h.Rollback(snaps[i]); err == nil {
				mu.Lock()
				cur = bgClone(model[snapV[i]])
				mu.Unlock()
			} else if !errors.Is(err, ErrNotAncestor) {
				t.Fatal(err)
			}
		}
		got, _ := bgRead(h, 10)
		if !bytes.Equal(got[0], cur[0]) || !bytes.Equal(got[1], cur[1]) {
			t.Fatalf("step %d: the head reads other rows", step)
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, s := range snaps {
		check(t, s.Release())
	}
	check(t, h.Release())
	if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.Live != 0 || ps.HistoryBytes != 0 {
		t.Fatalf("after releasing everything: %+v", ps)
	}
}
