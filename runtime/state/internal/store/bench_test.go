package store

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// The benchmarks come in pairs measured side by side; docs/BENCHMARKS.md
// gives their ratios.

// benchBackend returns the backend the benchmarks run on: the host
// backend, or the one GPUSTATE_BACKEND names (make gpu-check sets cuda).
// A benchmark that fails names the backend and the variable's value.
func benchBackend(b *testing.B) device.Backend {
	env := os.Getenv(device.EnvBackend)
	if env == "" {
		be := device.Host()
		logBackendOnFailure(b, be, env)
		return be
	}
	be, err := device.Open()
	if err != nil {
		b.Fatalf("%s=%q: %v", device.EnvBackend, env, err)
	}
	b.Cleanup(func() { be.Close() })
	logBackendOnFailure(b, be, env)
	return be
}

// logBackendOnFailure has b log, when it fails, the backend it ran on and
// what GPUSTATE_BACKEND was.
func logBackendOnFailure(b *testing.B, be device.Backend, env string) {
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("backend %s (%s=%q)", be.Name(), device.EnvBackend, env)
		}
	})
}

func benchPool(b *testing.B, be device.Backend, opt PoolOptions) *Pool {
	p, err := NewPool(be, opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

// sideBySide measures a and c alternately, batch calls of each per round
// (which goes first alternates too), so that both see the same machine:
// it reports each one's time per call and the median over rounds of a's
// time over c's, and returns a's mean time per call.
func sideBySide(b *testing.B, batch int, a func(), unitA string, c func(), unitC string) (meanA time.Duration) {
	b.Helper()
	return alternate(b, batch, timed(batch, a), unitA, timed(batch, c), unitC)
}

// timed returns a round of n calls of f that answers its time.
func timed(n int, f func()) func() time.Duration {
	return func() time.Duration {
		start := time.Now()
		for range n {
			f()
		}
		return time.Since(start)
	}
}

// alternate runs the rounds a and c in turn until b.Loop ends (which goes
// first alternates too), each answering its own time, per calls a round.
// It reports each one's time per call under unitA and unitC (none where
// the unit is empty) and the median over rounds of a's time over c's as
// ratio, and returns a's mean time per call.
func alternate(b *testing.B, per int, a func() time.Duration, unitA string, c func() time.Duration, unitC string) (meanA time.Duration) {
	b.Helper()
	var ta, tc time.Duration
	var ratios []float64
	for i := 0; b.Loop(); i++ {
		var da, dc time.Duration
		if i%2 == 0 {
			da, dc = a(), c()
		} else {
			dc, da = c(), a()
		}
		ta, tc = ta+da, tc+dc
		ratios = append(ratios, float64(da)/float64(dc))
	}
	n := float64(len(ratios) * per)
	slices.Sort(ratios)
	if unitA != "" {
		b.ReportMetric(float64(ta.Nanoseconds())/n, unitA)
	}
	if unitC != "" {
		b.ReportMetric(float64(tc.Nanoseconds())/n, unitC)
	}
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
	return time.Duration(float64(ta) / n)
}

// BenchmarkSnapshot takes and releases a snapshot of a state of 1M rows and
// of one of 1 row: ratio is the first's time over the second's, and must
// not grow with the state.
func BenchmarkSnapshot(b *testing.B) {
	p := benchPool(b, benchBackend(b), PoolOptions{})
	heads := make([]*Head, 2)
	for i, rows := range []int{1 << 20, 1} {
		h, err := p.NewHead(kv(Append, 0, Keep), "s")
		if err != nil {
			b.Fatal(err)
		}
		defer h.Release()
		if _, err := h.AppendDevice(rows); err != nil {
			b.Fatal(err)
		}
		heads[i] = h
	}
	snap := func(h *Head) func() {
		return func() {
			s, err := h.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			s.Release()
		}
	}
	sideBySide(b, 64, snap(heads[0]), "ns/snapshot-1M", snap(heads[1]), "ns/snapshot-1")
}

// BenchmarkBranchDiverge branches a state of 1M rows and writes one row to
// the branch; it reports the physical bytes this took (branch-B) beside
// those of a full copy (copy-B).
func BenchmarkBranchDiverge(b *testing.B) {
	for _, g := range []Growth{Append, Mutable} {
		b.Run(g.String(), func(b *testing.B) {
			const rows = 1 << 20
			p := benchPool(b, benchBackend(b), PoolOptions{})
			h, err := p.NewHead(kv(g, rows, Keep), "s")
			if err != nil {
				b.Fatal(err)
			}
			defer h.Release()
			if g == Append {
				if _, err := h.AppendDevice(rows - 1); err != nil {
					b.Fatal(err)
				}
			}
			full := h.Stats().PhysicalBytes
			one := kvRows(1, 1)
			var took int64
			for b.Loop() {
				before := p.Stats().PhysicalBytes
				c, err := h.Branch()
				if err != nil {
					b.Fatal(err)
				}
				if g == Append {
					err = c.Append(one)
				} else {
					err = c.Write(rows/2, one)
				}
				if err != nil {
					b.Fatal(err)
				}
				took = p.Stats().PhysicalBytes - before
				c.Release()
			}
			b.ReportMetric(float64(took), "branch-B")
			b.ReportMetric(float64(full), "copy-B")
			b.ReportMetric(float64(took)/float64(full), "ratio")
		})
	}
}

// BenchmarkAppend appends a batch of 1.5 MiB (64K rows) to a state, and
// copies the same bytes to the same amount of memory (64 batches' worth,
// written in turn as the head's blocks are) on the same backend: ratio is
// the store's time over the plain copy's, the inverse of the throughput
// ratio.
func BenchmarkAppend(b *testing.B) {
	for _, bb := range []int{DefaultBlockBytes, 1 << 20} {
		b.Run(fmt.Sprintf("block=%dKiB", bb>>10), func(b *testing.B) { benchAppend(b, bb) })
	}
}

func benchAppend(b *testing.B, blockBytes int) {
	const batch = 1 << 16
	rows := kvRows(batch, 3)
	p := benchPool(b, benchBackend(b), PoolOptions{BlockBytes: blockBytes})
	var h *Head
	n := 0
	store := func() {
		if n%64 == 0 {
			if h != nil {
				h.Release()
			}
			var err error
			if h, err = p.NewHead(kv(Append, 0, Keep), "s"); err != nil {
				b.Fatal(err)
			}
		}
		n++
		if err := h.Append(rows); err != nil {
			b.Fatal(err)
		}
	}
	be := p.Backend()
	dst := make([]device.Ptr, 2)
	for i, c := range rows {
		var err error
		if dst[i], err = be.Alloc(64 * len(c)); err != nil {
			b.Fatal(err)
		}
		if err := be.Memset(dst[i], 0, 64*len(c)); err != nil {
			b.Fatal(err)
		}
	}
	m := 0
	memmove := func() {
		for k, c := range rows {
			if err := be.CopyHtoD(dst[k]+device.Ptr(m%64*len(c)), c); err != nil {
				b.Fatal(err)
			}
		}
		m++
	}
	// Warm both: the store's slabs and the copy's pages are touched once.
	for range 64 {
		store()
		memmove()
	}
	ta := sideBySide(b, 4, store, "ns/append", memmove, "ns/memmove")
	b.ReportMetric(float64(len(rows[0])+len(rows[1]))/float64(ta.Nanoseconds())*1e3, "MB/s")
	if h != nil {
		h.Release()
	}
	for _, d := range dst {
		be.Free(d)
	}
}

// BenchmarkWrite writes one row of a mutable state whose blocks a snapshot
// shares (copy on write: one block per column copied first), and one row of
// a state that shares nothing (in place); ratio is the first's time over
// the second's.
func BenchmarkWrite(b *testing.B) {
	const rows = 1 << 16
	one := kvRows(1, 5)
	p := benchPool(b, benchBackend(b), PoolOptions{})
	shared, err := p.NewHead(kv(Mutable, rows, Keep), "s")
	if err != nil {
		b.Fatal(err)
	}
	defer shared.Release()
	alone, err := p.NewHead(kv(Mutable, rows, Keep), "s")
	if err != nil {
		b.Fatal(err)
	}
	defer alone.Release()
	const batch = 32
	snaps := make([]*Snap, 0, batch)
	i, j := 0, 0
	// Each copy-on-write write takes a snapshot first, so that the blocks
	// it writes are shared; the snapshot's cost (a few hundred ns, see
	// BenchmarkSnapshot) is inside the timing, its release outside.
	cow := func() {
		s, err := shared.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		snaps = append(snaps, s)
		if err := shared.Write((i*7919)%rows, one); err != nil {
			b.Fatal(err)
		}
		i++
	}
	inPlace := func() {
		if err := alone.Write((j*7919)%rows, one); err != nil {
			b.Fatal(err)
		}
		j++
	}
	var ta, tc time.Duration
	var ratios []float64
	for b.Loop() {
		start := time.Now()
		for range batch {
			cow()
		}
		da := time.Since(start)
		b.StopTimer()
		for _, s := range snaps {
			s.Release()
		}
		snaps = snaps[:0]
		b.StartTimer()
		start = time.Now()
		for range batch {
			inPlace()
		}
		dc := time.Since(start)
		ta, tc = ta+da, tc+dc
		ratios = append(ratios, float64(da)/float64(dc))
	}
	n := float64(len(ratios) * batch)
	slices.Sort(ratios)
	b.ReportMetric(float64(ta.Nanoseconds())/n, "ns/cow-write")
	b.ReportMetric(float64(tc.Nanoseconds())/n, "ns/in-place-write")
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
}

// BenchmarkCopyOnWrite makes every row of a 16 MiB mutable state
// writable while a snapshot shares them (WriteDevice over the whole state:
// every block copied on the device), to set against the backend's device
// copy bandwidth.
func BenchmarkCopyOnWrite(b *testing.B) {
	const rows = 16 << 20 / 24
	p := benchPool(b, benchBackend(b), PoolOptions{})
	h, err := p.NewHead(kv(Mutable, rows, Keep), "s")
	if err != nil {
		b.Fatal(err)
	}
	defer h.Release()
	b.SetBytes(h.Stats().PhysicalBytes)
	for b.Loop() {
		b.StopTimer()
		s, err := h.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := h.WriteDevice(0, rows); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Release()
		b.StartTimer()
	}
}

// BenchmarkBlockAlloc takes and gives back one block of the backend
// (Alloc and Free of the default block size), and one block of the pool:
// ratio is the backend's time over the pool's.
func BenchmarkBlockAlloc(b *testing.B) {
	p := benchPool(b, benchBackend(b), PoolOptions{})
	warm, err := p.alloc("s", 1, false)
	if err != nil {
		b.Fatal(err)
	}
	warm[0].SetRefs(0)
	p.free(warm)
	buf := make([]*block, 0, 1) // as a head reuses its own
	pool := func() {
		blk, err := p.allocIn(buf, p.own, "s", 1, handDirty)
		if err != nil {
			b.Fatal(err)
		}
		blk[0].SetRefs(0)
		p.free(blk)
	}
	be := p.Backend()
	backend := func() {
		ptr, err := be.Alloc(DefaultBlockBytes)
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Free(ptr); err != nil {
			b.Fatal(err)
		}
	}
	sideBySide(b, 16, backend, "ns/backend-alloc", pool, "ns/pool-alloc")
}

// BenchmarkReconstruct reconstructs versions of a checkpointed state with
// At, and reports Plan's estimate beside the measured time per op.
func BenchmarkReconstruct(b *testing.B) {
	for _, c := range []struct {
		name  string
		g     Growth
		batch int
	}{
		{"append/small", Append, 16},
		{"append/large", Append, 4096},
		{"mutable/small", Mutable, 16},
		{"mutable/large", Mutable, 4096},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := benchPool(b, benchBackend(b), PoolOptions{})
			l := kv(c.g, 1<<18, Keep)
			l.Checkpoint = &CheckpointPolicy{Every: 16, Keep: 4}
			h, err := p.NewHead(l, "s")
			if err != nil {
				b.Fatal(err)
			}
			defer h.Release()
			rows := kvRows(c.batch, 1)
			var target Version
			for i := range 40 {
				if c.g == Append {
					err = h.Append(rows)
				} else {
					err = h.Write((i*7919*c.batch)%(1<<18-c.batch), rows)
				}
				if err != nil {
					b.Fatal(err)
				}
				if i == 30 {
					target = h.Version() // 15 deltas past a checkpoint
				}
			}
			// One reconstruction first, forgotten by the fit: the pool
			// then has the blocks the loop's reconstructions take, as
			// they find them, and the estimate is the model's alone.
			s, err := h.At(target)
			if err != nil {
				b.Fatal(err)
			}
			s.Release()
			p.calib.mu.Lock()
			p.calib.fits = nil
			p.calib.mu.Unlock()
			plan, err := h.Plan(target)
			if err != nil {
				b.Fatal(err)
			}
			// Reconstructions read versions not used lately: each one
			// starts with the CPU's caches holding other data, as the
			// cost model's calibration does. The flush stays inside the
			// timing, so that the loop ends in about a second: ns/op is
			// mostly the flush, and the figures are measured-ns (At's own
			// measurement of the reconstruction) against estimate-ns.
			evict := make([]byte, 64<<20)
			var measured time.Duration
			n := 0
			for b.Loop() {
				for i := 0; i < len(evict); i += 64 {
					evict[i]++
				}
				s, err := h.At(target)
				if err != nil {
					b.Fatal(err)
				}
				last, _ := h.LastReconstruction()
				measured += last.Measured
				n++
				s.Release()
			}
			b.ReportMetric(float64(plan.Estimate.Nanoseconds()), "estimate-ns")
			b.ReportMetric(float64(measured.Nanoseconds())/float64(n), "measured-ns")
			b.ReportMetric(float64(plan.Estimate)/(float64(measured)/float64(n)), "estimate/measured")
			b.ReportMetric(float64(plan.Deltas), "deltas")
		})
	}
}
