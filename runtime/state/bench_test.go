package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// The benchmarks come in pairs measured side by side; docs/BENCHMARKS.md
// gives their ratios.

func benchPool(b *testing.B, be device.Backend, opt PoolOptions) *Pool {
	p, err := NewPool(be, opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

// BenchmarkSnapshot takes and releases a snapshot of a state of 1 row and
// of 1M rows: the cost must not grow with the state.
func BenchmarkSnapshot(b *testing.B) {
	for _, rows := range []int{1, 1 << 20} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			p := benchPool(b, device.Host(), PoolOptions{})
			h, err := p.NewHead(kv(Append, 0, Keep), "s")
			if err != nil {
				b.Fatal(err)
			}
			defer h.Release()
			if _, err := h.AppendDevice(rows); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				s, err := h.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				s.Release()
			}
		})
	}
}

// BenchmarkBranchDiverge branches a state of 1M rows and writes one row to
// the branch; it reports the physical bytes this took (branch-B) beside
// those of a full copy (copy-B) as metrics.
func BenchmarkBranchDiverge(b *testing.B) {
	for _, g := range []Growth{Append, Mutable} {
		b.Run(g.String(), func(b *testing.B) {
			const rows = 1 << 20
			p := benchPool(b, device.Host(), PoolOptions{})
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
		})
	}
}

// BenchmarkAppend appends 1 MiB per column batch to a state, against a
// plain copy of the same bytes to one allocation of the same backend.
func BenchmarkAppend(b *testing.B) {
	const batch = 1 << 16 // rows: 1 MiB of keys, 512 KiB of values
	rows := kvRows(batch, 3)
	size := int64(len(rows[0]) + len(rows[1]))
	b.Run("store", func(b *testing.B) {
		p := benchPool(b, device.Host(), PoolOptions{})
		b.SetBytes(size)
		var h *Head
		for i := 0; b.Loop(); i++ {
			if i%64 == 0 {
				if h != nil {
					h.Release()
				}
				var err error
				if h, err = p.NewHead(kv(Append, 0, Keep), "s"); err != nil {
					b.Fatal(err)
				}
			}
			if err := h.Append(rows); err != nil {
				b.Fatal(err)
			}
		}
		h.Release()
	})
	// The same bytes copied to the same amount of memory: 64 batches' worth
	// per column, written in turn, as the store's head is.
	b.Run("memmove", func(b *testing.B) {
		be := device.Host()
		defer be.Close()
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
		b.SetBytes(size)
		for i := 0; b.Loop(); i++ {
			for k, c := range rows {
				if err := be.CopyHtoD(dst[k]+device.Ptr(i%64*len(c)), c); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkWrite writes one row of a mutable state in place, and with a
// snapshot sharing its blocks, so that the write copies one block per
// column first.
func BenchmarkWrite(b *testing.B) {
	const rows = 1 << 16
	one := kvRows(1, 5)
	for _, shared := range []bool{false, true} {
		name := "in-place"
		if shared {
			name = "copy-on-write"
		}
		b.Run(name, func(b *testing.B) {
			p := benchPool(b, device.Host(), PoolOptions{})
			h, err := p.NewHead(kv(Mutable, rows, Keep), "s")
			if err != nil {
				b.Fatal(err)
			}
			defer h.Release()
			for i := 0; b.Loop(); i++ {
				var s *Snap
				if shared {
					b.StopTimer()
					if s, err = h.Snapshot(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if err := h.Write((i*7919)%rows, one); err != nil {
					b.Fatal(err)
				}
				if shared {
					b.StopTimer()
					s.Release()
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkBlockAlloc takes and gives back one block from the pool, and
// one block's worth of memory from the backend.
func BenchmarkBlockAlloc(b *testing.B) {
	b.Run("pool", func(b *testing.B) {
		p := benchPool(b, device.Host(), PoolOptions{})
		warm, err := p.alloc("s", 1, false)
		if err != nil {
			b.Fatal(err)
		}
		p.free(warm)
		for b.Loop() {
			blk, err := p.alloc("s", 1, false)
			if err != nil {
				b.Fatal(err)
			}
			blk[0].rc.Store(0)
			p.free(blk)
		}
	})
	b.Run("backend", func(b *testing.B) {
		be := device.Host()
		defer be.Close()
		for b.Loop() {
			ptr, err := be.Alloc(DefaultBlockBytes)
			if err != nil {
				b.Fatal(err)
			}
			if err := be.Free(ptr); err != nil {
				b.Fatal(err)
			}
		}
	})
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
			p := benchPool(b, device.Host(), PoolOptions{})
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
			plan, err := h.Plan(target)
			if err != nil {
				b.Fatal(err)
			}
			// Reconstructions read versions not used lately: each one
			// starts with the CPU's caches holding other data, as the
			// cost model's calibration does.
			evict := make([]byte, 64<<20)
			var measured time.Duration
			n := 0
			for b.Loop() {
				b.StopTimer()
				for i := 0; i < len(evict); i += 64 {
					evict[i]++
				}
				b.StartTimer()
				s, err := h.At(target)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				last, _ := h.LastReconstruction()
				measured += last.Measured
				n++
				s.Release()
				b.StartTimer()
			}
			b.ReportMetric(float64(plan.Estimate.Nanoseconds()), "estimate-ns")
			b.ReportMetric(float64(measured.Nanoseconds())/float64(n), "measured-ns")
			b.ReportMetric(float64(plan.Estimate)/(float64(measured)/float64(n)), "estimate/measured")
			b.ReportMetric(float64(plan.Deltas), "deltas")
		})
	}
}
