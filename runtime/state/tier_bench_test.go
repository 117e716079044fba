package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkTierBringBack1MiB brings a state of 1 MiB (1024 rows of 1 KiB,
// in 64 KiB blocks) back from the host tier, against a raw copy of the
// same bytes from host memory to device memory, side by side: ratio is
// the first's time over the second's (docs/BENCHMARKS.md, "The host
// tier"). The move out between two returns is not timed, nor is the raw
// round's copy of the bytes to the host before its timed copy back.
func BenchmarkTierBringBack1MiB(b *testing.B) {
	be := benchBackend(b)
	p := benchPool(b, be, PoolOptions{BlockBytes: 64 << 10, HostTier: 4 << 20})
	l := &Layout{Type: "Prompt", Columns: []Column{{Name: "KV", ElemSize: 4, Width: 256}}, Retention: Optional}
	h, err := p.NewHead(l, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer h.Release()
	row := make([]byte, 1024*1024)
	for i := range row {
		row[i] = byte(i * 7)
	}
	if err := h.Append([][]byte{row}); err != nil {
		b.Fatal(err)
	}
	dst, err := be.Alloc(len(row))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Free(dst)
	back := func() time.Duration {
		if _, moved, err := h.moveOut(); !moved || err != nil {
			b.Fatalf("move out: %v, %v", moved, err)
		}
		start := time.Now()
		if err := h.Prefetch(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// The raw copy's round mirrors the move out too, untimed: the same
	// bytes to the host first, so that both find the caches alike.
	raw := func() time.Duration {
		if err := be.CopyDtoH(row, dst); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := be.CopyHtoD(dst, row); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	alternate(b, 1, back, "ns/bring-back", raw, "ns/raw-copy")
}

// BenchmarkTierPromptRecompute serves prompts from a working set larger
// than device memory and smaller than the tier, visited at random: a
// prompt the pool dropped is computed again (its rows appended anew).
// It reports the prompt rows computed again per visit without a tier and
// with one (docs/BENCHMARKS.md, "The host tier").
func BenchmarkTierPromptRecompute(b *testing.B) {
	const prompts, rows, resident = 64, 64, 16 // device memory holds 16 prompts
	l := &Layout{Type: "Prompt", Columns: []Column{{Name: "KV", ElemSize: 4, Width: 256}}, Retention: Optional}
	serve := func(tier int64, visits int) (recomputed int) {
		be := benchBackend(b)
		p := benchPool(b, be, PoolOptions{BlockBytes: 16 << 10, MaxBytes: resident * rows * 1024, HostTier: tier})
		batch := make([]byte, rows*1024)
		hs := make([]*Head, prompts)
		compute := func(i int) {
			h, err := p.NewHead(l, Owner(fmt.Sprint("p", i)))
			if err != nil {
				b.Fatal(err)
			}
			if err := h.Append([][]byte{batch}); err != nil {
				b.Fatal(err)
			}
			hs[i] = h
		}
		for i := range prompts {
			compute(i)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		dst := [][]byte{make([]byte, 1024)}
		for range visits {
			i := rng.IntN(prompts)
			err := hs[i].Read(rows-1, rows, dst)
			if errors.Is(err, ErrEvicted) {
				hs[i].Release()
				compute(i)
				recomputed += rows
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, h := range hs {
			h.Release()
		}
		return recomputed
	}
	const visits = 1000
	var off, on int
	for b.Loop() {
		off += serve(0, visits)
		on += serve(prompts*rows*1024*2, visits)
	}
	n := float64(b.N * visits)
	b.ReportMetric(float64(off)/n, "rows-recomputed/visit-no-tier")
	b.ReportMetric(float64(on)/n, "rows-recomputed/visit-tier")
}
