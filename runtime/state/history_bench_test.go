package state

import (
	"fmt"
	"testing"
)

// BenchmarkRollbackInvalidate times one cycle of Write, Snapshot, Write,
// Rollback and snapshot Release on a head with descendants=invalidate,
// after a number of earlier cycles; a branch of the same lineage, twice as
// deep, stays live throughout. Compare the rows: a cycle after 40000
// others against one after none.
func BenchmarkRollbackInvalidate(b *testing.B) {
	for _, before := range []int{0, 10000, 40000} {
		b.Run(fmt.Sprintf("after=%d", before), func(b *testing.B) {
			p := newPool(b, PoolOptions{BlockBytes: 256})
			h := must[*Head](b)(p.NewHead(kv(Mutable, 8, Invalidate), "me"))
			defer h.Release()
			br := must[*Head](b)(h.Branch())
			defer br.Release()
			row := kvRows(1, 1)
			cycle := func(x *Head) {
				check(b, x.Write(0, row))
				s := must[*Snap](b)(x.Snapshot())
				check(b, x.Write(1, row))
				check(b, x.Rollback(s))
				check(b, s.Release())
			}
			for range before {
				cycle(br)
				cycle(br)
				cycle(h)
			}
			b.ResetTimer()
			for b.Loop() {
				cycle(h)
			}
		})
	}
}
