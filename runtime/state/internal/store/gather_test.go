package store

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestReadRowsManyRuns: ReadRows of more runs than the host path finds at
// once (random indices, repeats and stretches of consecutive rows across
// block boundaries) reads what Read reads row by row, column by column.
func TestReadRowsManyRuns(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := kvCacheLayout(16)
	l.Growth = Append
	h := headOf(t, p, l, "a")
	const rows = 600
	all := zeroRows(l, rows)
	for c := range all {
		for i := range all[c] {
			all[c][i] = byte(i*7 + c*31 + i/251)
		}
	}
	check(t, h.Append(all))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 31, 32, 33, 64, 65, 200} {
		idx := make([]int, 0, n)
		for len(idx) < n {
			at := rng.IntN(rows)
			for k := 0; k < 1+rng.IntN(5) && len(idx) < n && at+k < rows; k++ {
				idx = append(idx, at+k) // a stretch of consecutive rows
			}
		}
		dst := zeroRows(l, n)
		check(t, h.ReadRows(idx, dst))
		one := zeroRows(l, 1)
		for k, i := range idx {
			check(t, h.Read(i, i+1, one))
			for c := range dst {
				rb := len(one[c])
				if !bytes.Equal(dst[c][k*rb:(k+1)*rb], one[c]) {
					t.Fatalf("%d indices: row %d (index %d) of column %d differs from Read", n, i, k, c)
				}
			}
		}
	}
}
