package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestPressureConcurrentJointSets: goroutines each drive their own optional
// heads (append, window, mutable; snapshots, branches, rollbacks,
// releases) while mandatory heads press on a small pool, with and without
// a tier. Every row a handle reads back is its own; nothing stalls; every
// block comes back.
func TestPressureConcurrentJointSets(t *testing.T) {
	for _, tier := range []bool{false, true} {
		for seed := range uint64(6) {
			t.Run(fmt.Sprintf("tier=%v/%d", tier, seed), func(t *testing.T) {
				opt := PoolOptions{BlockBytes: 256, MaxBytes: 48 * 256, PendingWait: -1}
				if tier {
					opt.HostTier = 16 * 256
				}
				p := newPool(t, opt)
				ls := pressureLayouts()
				var wg sync.WaitGroup
				errc := make(chan error, 16)
				for w := range 5 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := pressureWorker(p, ls, seed*100+uint64(w), byte(w+1), 600); err != nil {
							errc <- err
						}
					}()
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 5))
					var ms []*Head
					for range 800 {
						if len(ms) == 0 || rng.IntN(6) == 0 {
							h, err := p.NewHead(wide("Session", Mandatory), "m")
							if err != nil {
								errc <- err
								return
							}
							ms = append(ms, h)
						}
						h := ms[rng.IntN(len(ms))]
						n := 1 + rng.IntN(3)
						if err := h.Append([][]byte{make([]byte, 256*n)}); err != nil && !errors.Is(err, ErrNoMemory) {
							errc <- fmt.Errorf("mandatory append: %w", err)
							return
						}
						if rng.IntN(5) == 0 {
							i := rng.IntN(len(ms))
							ms[i].Release()
							ms = slices.Delete(ms, i, i+1)
						}
					}
					for _, h := range ms {
						h.Release()
					}
				}()
				done := make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					panic("stalled")
				}
				close(errc)
				for err := range errc {
					t.Error(err)
				}
				if st := p.Stats(); st.Blocks != 0 {
					t.Fatalf("%d blocks in use after every release: %+v", st.Blocks, st)
				}
				checkInv(t, p)
			})
		}
	}
}

type pressureRef struct {
	h     *Head
	s     *Snap
	rows  [][]byte
	n     int
	l     *Layout
	gone  bool
	owner byte
}

func pressureWorker(p *Pool, ls []*Layout, seed uint64, owner byte, steps int) (err error) {
	rng := rand.New(rand.NewPCG(seed, 9))
	var xs []*pressureRef
	id := uint64(seed) << 32
	defer func() {
		for _, x := range xs {
			if x.h != nil {
				x.h.Release()
			} else {
				x.s.Release()
			}
		}
	}()
	o := Owner(fmt.Sprint("w", owner))
	read := func(x *pressureRef) error {
		if x.gone {
			return nil
		}
		lo, hi := 0, x.n
		if x.l.Window > 0 {
			lo = max(0, hi-x.l.Window)
		}
		if hi == lo {
			return nil
		}
		dst := make([]byte, (hi-lo)*256)
		var r reader = x.h
		if x.h == nil {
			r = x.s
		}
		e := r.Read(lo, hi, [][]byte{dst})
		if errors.Is(e, ErrEvicted) {
			x.gone = true
			return nil
		}
		if errors.Is(e, ErrNoMemory) {
			return nil
		}
		if e != nil {
			return fmt.Errorf("read: %w", e)
		}
		for i := lo; i < hi; i++ {
			want := x.rows[i]
			if want == nil {
				want = make([]byte, 256)
			}
			if got := dst[(i-lo)*256 : (i-lo+1)*256]; string(got) != string(want) {
				return fmt.Errorf("worker %d: row %d of %s differs (got owner byte %d)", owner, i, x.l.Type, got[8])
			}
		}
		return nil
	}
	for range steps {
		var heads []*pressureRef
		for _, x := range xs {
			if x.h != nil && !x.gone {
				heads = append(heads, x)
			}
		}
		k := rng.IntN(100)
		switch {
		case k < 8 || len(heads) == 0:
			l := ls[rng.IntN(len(ls))]
			h, e := p.NewHead(l, o)
			if errors.Is(e, ErrNoMemory) {
				continue
			}
			if e != nil {
				return e
			}
			x := &pressureRef{h: h, l: l, owner: owner}
			if l.Growth == Mutable {
				x.rows, x.n = make([][]byte, l.Bound), l.Bound
			}
			xs = append(xs, x)
		case k < 45:
			x := heads[rng.IntN(len(heads))]
			id++
			row := ownedRow(id, owner)
			if x.l.Growth == Mutable {
				at := rng.IntN(x.n)
				e := x.h.Write(at, [][]byte{row})
				switch {
				case e == nil:
					x.rows[at] = row
				case errors.Is(e, ErrEvicted):
					x.gone = true
				case errors.Is(e, ErrNoMemory):
				default:
					return fmt.Errorf("write: %w", e)
				}
				continue
			}
			e := x.h.Append([][]byte{row})
			switch {
			case e == nil:
				x.rows = append(x.rows, row)
				x.n++
			case errors.Is(e, ErrEvicted):
				x.gone = true
			case errors.Is(e, ErrNoMemory):
			default:
				return fmt.Errorf("append: %w", e)
			}
		case k < 58:
			x := heads[rng.IntN(len(heads))]
			s, e := x.h.Snapshot()
			switch {
			case e == nil:
				xs = append(xs, &pressureRef{s: s, l: x.l, rows: slices.Clone(x.rows), n: x.n, owner: owner})
			case errors.Is(e, ErrEvicted):
				x.gone = true
			case errors.Is(e, ErrNoMemory):
			default:
				return fmt.Errorf("snapshot: %w", e)
			}
		case k < 66:
			x := heads[rng.IntN(len(heads))]
			b, e := x.h.Branch()
			switch {
			case e == nil:
				xs = append(xs, &pressureRef{h: b, l: x.l, rows: slices.Clone(x.rows), n: x.n, owner: owner})
			case errors.Is(e, ErrEvicted):
				x.gone = true
			case errors.Is(e, ErrNoMemory):
			default:
				return fmt.Errorf("branch: %w", e)
			}
		case k < 72:
			x := heads[rng.IntN(len(heads))]
			var ss []*pressureRef
			for _, y := range xs {
				if y.s != nil && y.l == x.l {
					ss = append(ss, y)
				}
			}
			if len(ss) == 0 {
				continue
			}
			y := ss[rng.IntN(len(ss))]
			e := x.h.Rollback(y.s)
			switch {
			case e == nil:
				x.rows, x.n = slices.Clone(y.rows), y.n
			case errors.Is(e, ErrEvicted), errors.Is(e, ErrNotAncestor), errors.Is(e, ErrExpired), errors.Is(e, ErrNoMemory):
			default:
				return fmt.Errorf("rollback: %w", e)
			}
		case k < 82 && len(xs) > 2:
			i := rng.IntN(len(xs))
			x := xs[i]
			if x.h != nil {
				err = x.h.Release()
			} else {
				err = x.s.Release()
			}
			xs = slices.Delete(xs, i, i+1)
			if err != nil {
				return err
			}
		default:
			if len(xs) > 0 {
				if e := read(xs[rng.IntN(len(xs))]); e != nil {
					return e
				}
			}
		}
	}
	for _, x := range xs {
		if e := read(x); e != nil {
			return e
		}
	}
	return nil
}
