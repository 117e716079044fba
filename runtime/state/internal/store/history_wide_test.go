package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// wideLayout is a mutable layout of rows rows in five columns of
// different row sizes (more than a delta holds inline, deltaMem), of
// blockRows rows a block (0: the pool's block size).
func wideLayout(rows, blockRows int) *Layout {
	l := &Layout{Type: "Wide", Growth: Mutable, Bound: rows, Descendants: Keep, BlockRows: blockRows}
	for c := range 5 {
		l.Columns = append(l.Columns, Column{Name: fmt.Sprint("C", c), ElemSize: 1 << (c % 4), Width: 1 + c})
	}
	return l
}

// sameCols reports whether a and b hold the same bytes, column by column.
func sameCols(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, func(x, y []byte) bool { return string(x) == string(y) })
}

// TestWideHistoryBranchesConcurrent: a checkpointed layout of five
// columns (its deltas are not the inline kind, deltaMem), by Every and by
// Budget, at three block sizes: a head written once and three branches of
// it, sharing its history and that write's delta, each write the whole
// state, whole blocks of every column to the end, or a few rows,
// concurrently, and after every write read each version they recorded
// with At, until it answers ErrNotRetained. At the end everything
// released leaves no block and no history byte.
func TestWideHistoryBranchesConcurrent(t *testing.T) {
	for _, pol := range []CheckpointPolicy{{Every: 2, Keep: 2}, {Budget: 2000, Keep: 2}} {
		for _, br := range []int{0, 4, 8} {
			t.Run(fmt.Sprint(pol, br), func(t *testing.T) {
				p := newPool(t, PoolOptions{BlockBytes: 256})
				l := wideLayout(37, br)
				l.Checkpoint = &pol
				h := must[*Head](t)(p.NewHead(l, "a"))
				check(t, h.Write(0, layoutRows(l, 37, 200))) // a delta the branches share
				heads := []*Head{h}
				for range 3 {
					heads = append(heads, must[*Head](t)(h.Branch()))
				}
				whole := 1 // rows that are whole blocks of every column
				for _, per := range h.perBlock {
					a, b := whole, per
					for b != 0 {
						a, b = b, a%b
					}
					whole = whole * per / a
				}
				var wg sync.WaitGroup
				errs := make([]error, len(heads))
				for i, x := range heads {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(i), 9))
						cur, _ := readLayoutRows(x, l)
						vers := map[Version][][]byte{}
						for k := range 200 {
							at, n := 0, 37
							switch rng.IntN(4) {
							case 0:
								at = whole * rng.IntN(37/whole+1)
								n = 37 - at
							case 1:
								at = rng.IntN(30)
								n = 1 + rng.IntN(37-at)
							}
							b := layoutRows(l, n, byte(k+40*i))
							if err := x.Write(at, b); err != nil {
								errs[i] = err
								return
							}
							for c := range cur {
								rb := len(b[c]) / max(n, 1)
								if n > 0 {
									copy(cur[c][at*rb:], b[c])
								}
							}
							vers[x.Version()] = slices.Clone(cur)
							for c := range cur {
								vers[x.Version()][c] = slices.Clone(cur[c])
							}
							for v, want := range vers {
								s, err := x.At(v)
								if errors.Is(err, ErrNotRetained) {
									delete(vers, v)
									continue
								}
								if err != nil {
									errs[i] = err
									return
								}
								got, err := readLayoutRows(s, l)
								s.Release()
								if err == nil && !sameCols(got, want) {
									err = errors.New("other rows than the version had")
								}
								if err != nil {
									errs[i] = fmt.Errorf("head %d At(%d): %w", i, v, err)
									return
								}
							}
						}
					}()
				}
				wg.Wait()
				check(t, errors.Join(errs...))
				checkInv(t, p)
				for _, x := range heads {
					check(t, x.Release())
				}
				checkInv(t, p)
				if st := p.Stats(); st.PhysicalBytes != 0 || st.HistoryBytes != 0 {
					t.Fatalf("after release: %d physical %d history", st.PhysicalBytes, st.HistoryBytes)
				}
			})
		}
	}
}
