package store

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

// BenchmarkEstimateRefined reconstructs one version of five shapes
// (append and mutable, small and large writes, and replayed steps) again
// and again, each after streaming through the cold buffer, and reports the
// share of runs whose measured time lies within 25% of Plan's estimate
// just before, and within Plan's Low and High, once the pool has measured
// three reconstructions of the shape.
func BenchmarkEstimateRefined(b *testing.B) {
	for b.Loop() {
		estimateRefined(b)
	}
}

func estimateRefined(t *testing.B) {
	const runs = 15
	total, near, inSpread := 0, 0, 0
	for _, c := range []struct {
		name   string
		g      Growth
		batch  int
		replay bool
	}{
		{"append/small", Append, 16, false},
		{"append/large", Append, 4096, false},
		{"mutable/small", Mutable, 16, false},
		{"mutable/large", Mutable, 4096, false},
		{"replay", Mutable, 0, true}, // 1<<18 rows stepped: 6 MiB a step
	} {
		p := newPool(t, PoolOptions{})
		must[CostModel](t)(p.CostModel())
		bound := 1 << 18
		if c.replay {
			bound = 1 << 12 // a step rewrites every row
		}
		l := kv(c.g, bound, Keep)
		l.Checkpoint = &CheckpointPolicy{Every: 16, Keep: 4}
		h := must[*Head](t)(p.NewHead(l, "s"))
		rows := kvRows(max(c.batch, 1), 1)
		f := stepOn(p.Backend(), []int{16, 8}, false)
		var target Version
		for i := range 40 {
			switch {
			case c.replay:
				check(t, h.Step([][]byte{{byte(i)}}, false, f))
			case c.g == Append:
				check(t, h.Append(rows))
			default:
				check(t, h.Write((i*7919*c.batch)%(1<<18-c.batch), rows))
			}
			if i == 30 {
				target = h.Version()
			}
		}
		cold := coldBuffer()
		var sink byte
		n, within, spread := 0, 0, 0
		for i := range runs + 3 {
			pl := must[Plan](t)(h.Plan(target))
			for j := 0; j < len(cold); j += 64 {
				sink += cold[j]
			}
			s := must[*Snap](t)(h.At(target))
			last, _ := h.LastReconstruction()
			check(t, s.Release())
			if i < 3 {
				continue
			}
			n++
			r := float64(last.Measured) / float64(pl.Estimate)
			if r >= 0.75 && r <= 1.25 {
				within++
			}
			if last.Measured >= pl.Low && last.Measured <= pl.High {
				spread++
			}
		}
		coldSink.Store(uint32(sink))
		total, near, inSpread = total+n, near+within, inSpread+spread
		check(t, h.Release())
	}
	t.ReportMetric(float64(near)/float64(total), "within25%")
	t.ReportMetric(float64(inSpread)/float64(total), "within-spread")
}
