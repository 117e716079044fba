package store

import (
	"encoding/binary"
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
// round's copy of the bytes to the host before its timed copy back. The
// return is timed from Prefetch until its copies have landed.
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
		if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
			b.Fatalf("move out: %v, %v", moved, err)
		}
		start := time.Now()
		if err := h.Prefetch(); err != nil {
			b.Fatal(err)
		}
		// Prefetch queues the copies: timed until they have landed.
		h.mu.Lock()
		err := h.async.land()
		h.mu.Unlock()
		if err != nil {
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
// with one (docs/BENCHMARKS.md, "The host tier"): for optional heads, and
// for sessions that adopt a prompt's cached prefix blocks.
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
	// shared serves the prompts as sessions of one domain: each visit
	// adopts what the cache holds of its prompt, computes the rest and
	// releases, which leaves its blocks cached; the pool pushes the
	// cached blocks out, to the tier where it has one.
	sl := &Layout{Type: "Shared", Columns: []Column{{Name: "KV", ElemSize: 4, Width: 64}, {Name: "Token", ElemSize: 4, Width: 1}},
		Growth: Append, Bound: rows, BlockRows: 16, ShareKey: "Token"}
	const blockBytes = 16*256 + 256 // a block of each column
	shared := func(tier int64, visits int) (recomputed int) {
		be := benchBackend(b)
		p := benchPool(b, be, PoolOptions{MaxBytes: resident * rows / 16 * blockBytes, HostTier: tier})
		seen := make([]bool, prompts)
		rng := rand.New(rand.NewPCG(1, 2))
		kv := make([]byte, rows*256)
		for range visits {
			i := rng.IntN(prompts)
			toks := make([]byte, rows*4)
			for r := range rows {
				binary.LittleEndian.PutUint32(toks[4*r:], uint32(i*rows+r))
			}
			h, err := p.NewSharedHead(sl, "s", "d")
			if err != nil {
				b.Fatal(err)
			}
			n, err := h.AdoptPrefix(toks)
			if err != nil {
				b.Fatal(err)
			}
			if err := h.Append([][]byte{kv[n*256:], toks[n*4:]}); err != nil {
				b.Fatal(err)
			}
			if seen[i] {
				recomputed += rows - n
			}
			seen[i] = true
			h.Release()
		}
		return recomputed
	}
	const visits = 1000
	var off, on, soff, son int
	for b.Loop() {
		off += serve(0, visits)
		on += serve(prompts*rows*1024*2, visits)
		soff += shared(0, visits)
		son += shared(prompts*rows/16*blockBytes*2, visits)
	}
	n := float64(b.N * visits)
	b.ReportMetric(float64(off)/n, "rows-recomputed/visit-no-tier")
	b.ReportMetric(float64(on)/n, "rows-recomputed/visit-tier")
	b.ReportMetric(float64(soff)/n, "shared-rows-recomputed/visit-no-tier")
	b.ReportMetric(float64(son)/n, "shared-rows-recomputed/visit-tier")
}
