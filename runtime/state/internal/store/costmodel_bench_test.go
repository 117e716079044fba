package store

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// costShape is one of the five shapes the cost model is measured on:
// append and mutable writes of 16 or 4096 rows, and replayed steps.
type costShape struct {
	name   string
	g      Growth
	batch  int
	replay bool
}

var costShapes = []costShape{
	{"append/small", Append, 16, false},
	{"append/large", Append, 4096, false},
	{"mutable/small", Mutable, 16, false},
	{"mutable/large", Mutable, 4096, false},
	{"replay", Mutable, 0, true},
}

// buildShape makes a checkpointed head of shape c on p (every=16 keep=4)
// with 40 versions, and returns it with the version 15 deltas past a
// checkpoint.
func buildShape(t testing.TB, p *Pool, c costShape) (*Head, Version) {
	bound := 1 << 18
	if c.replay {
		bound = 1 << 12 // a step rewrites every row
	}
	l := kv(c.g, bound, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 16, Keep: 4}
	h := must[*Head](t)(p.NewHead(l, "s"))
	rows := kvRows(max(c.batch, 1), 1)
	f := stepReusing(p.Backend(), []int{16, 8})
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
	return h, target
}

// stepReusing is stepOn with host buffers made once, as a step that runs
// a kernel allocates nothing per call: its recorded times are then those
// of its work, not of the Go heap growing under it.
func stepReusing(b device.Backend, rowBytes []int) StepFunc {
	var bufs [][]byte
	return func(spans [][]device.Span, in [][]byte) error {
		if bufs == nil {
			bufs = make([][]byte, len(spans))
		}
		for c, col := range spans {
			n := 0
			for _, sp := range col {
				n += sp.Rows * rowBytes[c]
			}
			if cap(bufs[c]) < n {
				bufs[c] = make([]byte, n)
			}
			bufs[c] = bufs[c][:n]
			off := 0
			for _, sp := range col {
				k := sp.Rows * rowBytes[c]
				if err := b.CopyDtoH(bufs[c][off:off+k], sp.Ptr); err != nil {
					return err
				}
				off += k
			}
		}
		recur(bufs, in)
		for c, col := range spans {
			off := 0
			for _, sp := range col {
				k := sp.Rows * rowBytes[c]
				if err := b.CopyHtoD(sp.Ptr, bufs[c][off:off+k]); err != nil {
					return err
				}
				off += k
			}
		}
		return nil
	}
}

// coldBytes is the size of the buffer the benchmarks stream through to
// empty the CPU's caches, as other work would between a version's writes
// and its reconstruction: larger than the last-level cache of the machines
// the host backend serves.
const coldBytes = 32 << 20

// coldBuffer returns the benchmarks' cache-evicting buffer, made and
// written on first use (untouched pages may all map one zero page).
var coldBuffer = sync.OnceValue(func() []byte {
	b := make([]byte, coldBytes)
	for i := 0; i < len(b); i += 64 {
		b[i] = byte(i >> 6)
	}
	return b
})

// coldSink keeps the flushes' reads from being optimized away.
var coldSink atomic.Uint32

// flushCaches streams through the cold buffer, so that the CPU's caches
// hold none of the history.
func flushCaches() {
	cold := coldBuffer()
	var sink byte
	for j := 0; j < len(cold); j += 64 {
		sink += cold[j]
	}
	coldSink.Store(uint32(sink))
}

// reconstructOnce plans At(target) on h and performs it, both after
// flushing the CPU's caches when cold (Plan's first call measures the cost
// model on the history as it finds it), and returns Plan's estimate over
// the time At measured.
func reconstructOnce(t testing.TB, h *Head, target Version, cold bool) (Plan, float64) {
	if cold {
		flushCaches()
	}
	pl := must[Plan](t)(h.Plan(target))
	s := must[*Snap](t)(h.At(target))
	last, _ := h.LastReconstruction()
	check(t, s.Release())
	return pl, float64(pl.Estimate) / float64(last.Measured)
}

// BenchmarkCostModel measures Plan's estimates against the times At
// measures, cold and hot, over the five shapes. Cold: three runs of each
// shape, each on a new pool and head, whose first plan (which measures the
// cost model on the history as it finds it) and reconstruction follow a
// flush of the CPU's caches;
// cold-within25% counts the runs (of 15) whose estimate is within 25% of
// the measured time. Hot: the last head of each shape then reconstructs
// the same version 12 times more, caches warm, and the estimate (refined
// by each measured reconstruction) is compared with the measured time over
// the last four; hot-worst is the largest factor, over the shapes, between
// the median of those and 1. -v logs every run.
func BenchmarkCostModel(b *testing.B) {
	for b.Loop() {
		within, worst := 0, 1.0
		for _, c := range costShapes {
			var h *Head
			var target Version
			for run := range 3 {
				p := newPool(b, PoolOptions{})
				if h != nil {
					check(b, h.Release())
				}
				h, target = buildShape(b, p, c)
				pl, r := reconstructOnce(b, h, target, true)
				if r >= 0.75 && r <= 1.25 {
					within++
				}
				b.Logf("cold %-13s run %d: estimate/measured %.2f (estimate %v, new memory %d bytes)", c.name, run, r, pl.Estimate, pl.NewBytes)
			}
			var hot []float64
			for range 12 {
				_, r := reconstructOnce(b, h, target, false)
				hot = append(hot, r)
			}
			last := slices.Clone(hot[len(hot)-4:])
			slices.Sort(last)
			mid := (last[1] + last[2]) / 2
			worst = max(worst, math.Exp(math.Abs(math.Log(mid))))
			b.Logf("hot  %-13s estimate/measured %.2f over the last four of %.2f", c.name, mid, hot)
			check(b, h.Release())
		}
		b.ReportMetric(float64(within), "cold-within25%/15")
		b.ReportMetric(worst, "hot-worst")
	}
}
