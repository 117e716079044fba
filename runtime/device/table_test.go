package device

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// TestTableFind checks find against a brute-force search over random
// allocations and random ranges, including ranges at and past the edges.
func TestTableFind(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb table
	var live []region
	next := Ptr(4096)
	for range 200 {
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			if _, err := tb.remove(live[i].base); err != nil {
				t.Fatalf("remove %#x: %v", uint64(live[i].base), err)
			}
			live = append(live[:i], live[i+1:]...)
		} else {
			r := region{base: next, size: uint64(1 + rng.IntN(100))}
			next += Ptr(r.size) + Ptr(rng.IntN(3)) // sometimes adjacent
			tb.insert(r)
			live = append(live, r)
		}
		var sum uint64
		for _, r := range live {
			sum += r.size
		}
		if tb.bytes != sum {
			t.Fatalf("bytes = %d, want %d", tb.bytes, sum)
		}
		for range 50 {
			p := Ptr(4096 + rng.IntN(int(next-4096)+10))
			n := rng.IntN(40) - 2
			r, off, err := tb.find(p, n)
			inside := false // [p, p+n) lies in one live allocation
			for _, l := range live {
				if n >= 0 && p >= l.base && uint64(p-l.base)+uint64(n) <= l.size {
					inside = true
				}
			}
			switch {
			case n < 0:
				if !errors.Is(err, ErrInvalidSize) {
					t.Fatalf("find(%#x, %d): %v, want ErrInvalidSize", uint64(p), n, err)
				}
			case !inside:
				if !errors.Is(err, ErrInvalidPtr) {
					t.Fatalf("find(%#x, %d) = %#x+%d, want ErrInvalidPtr", uint64(p), n, uint64(r.base), off)
				}
			case err != nil:
				t.Fatalf("find(%#x, %d): %v, want a live allocation", uint64(p), n, err)
			case r.base+Ptr(off) != p || off+uint64(n) > r.size:
				t.Fatalf("find(%#x, %d) = %#x+%d of %d", uint64(p), n, uint64(r.base), off, r.size)
			}
		}
	}
	if _, err := tb.remove(next + 100); !errors.Is(err, ErrInvalidPtr) {
		t.Fatalf("remove of an unknown Ptr: %v", err)
	}
	if rs := tb.clear(); len(rs) != len(live) || tb.bytes != 0 || len(tb.regions) != 0 {
		t.Fatalf("clear returned %d regions, left %d bytes", len(rs), tb.bytes)
	}
}
