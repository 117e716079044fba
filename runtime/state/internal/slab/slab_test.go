package slab

import (
	"sync"
	"testing"
)

type rec struct {
	a, b int64
	p    *int
}

func TestNewNeverRepeats(t *testing.T) {
	var s Slab[rec]
	seen := make(map[*rec]bool)
	for i := range 1000 {
		v := s.New()
		if seen[v] {
			t.Fatalf("call %d: a value handed out before", i)
		}
		if *v != (rec{}) {
			t.Fatalf("call %d: not zero: %+v", i, *v)
		}
		seen[v] = true
		v.a = int64(i) // written by its holder, never seen again by New
	}
}

func TestNewAllocatesOncePerChunk(t *testing.T) {
	var s Slab[rec]
	n := count[rec]()
	if n < minValues || n > maxValues {
		t.Fatalf("count %d outside [%d, %d]", n, minValues, maxValues)
	}
	got := testing.AllocsPerRun(10*n, func() { s.New() })
	if want := 1 / float64(n); got > want*1.5 {
		t.Errorf("%v allocations a value, want about %v", got, want)
	}
}

func TestCountBounds(t *testing.T) {
	if got := count[[1 << 20]byte](); got != minValues {
		t.Errorf("large values: %d a chunk, want %d", got, minValues)
	}
	if got := count[byte](); got != maxValues {
		t.Errorf("small values: %d a chunk, want %d", got, maxValues)
	}
	if got := count[struct{}](); got != maxValues {
		t.Errorf("empty values: %d a chunk, want %d", got, maxValues)
	}
}

func TestNewConcurrent(t *testing.T) {
	var s Slab[rec]
	const workers, each = 8, 500
	out := make([][]*rec, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				v := s.New()
				v.a = int64(w)
				out[w] = append(out[w], v)
			}
		})
	}
	wg.Wait()
	seen := make(map[*rec]bool)
	for w, vs := range out {
		for _, v := range vs {
			if seen[v] || v.a != int64(w) {
				t.Fatalf("worker %d: a value shared with another worker", w)
			}
			seen[v] = true
		}
	}
}
