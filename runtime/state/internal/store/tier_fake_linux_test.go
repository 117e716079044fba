//go:build linux

package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/internal/fakecuda"
	"github.com/gpustate/gpustate/runtime/device"
)

// TestTierPageLocked runs the host tier on the CUDA backend over the fake
// driver: its slabs are page-locked memory from cuMemHostAlloc, given back
// with cuMemFreeHost when the pool closes, and a state moves out and back
// with its rows. Where cuMemHostAlloc fails, the tier takes the Go heap
// instead and works the same.
func TestTierPageLocked(t *testing.T) {
	for _, pinned := range []bool{true, false} {
		t.Run(fmt.Sprint("pinned=", pinned), func(t *testing.T) {
			f := fakecuda.Open(t)
			c, err := device.OpenCUDA(device.CUDAOptions{Library: f.Path})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if !pinned {
				f.Must(t, "fail:cuMemHostAlloc", 2) // CUDA_ERROR_OUT_OF_MEMORY
			}
			p, err := NewPool(c, PoolOptions{BlockBytes: 256, MaxBytes: 4 * 256, HostTier: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			h := must[*Head](t)(p.NewHead(wide("Cache", Optional), "a"))
			fill(t, h, 2, 40)
			m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), "m"))
			fill(t, m, 3, 1)
			if h.tier == nil {
				t.Fatal("the optional head is not in the tier")
			}
			if got := h.tier.spans[0].slab.pinned; got != pinned {
				t.Fatalf("the tier's slab is page-locked: %v, want %v", got, pinned)
			}
			checkInv(t, p)
			check(t, m.Release())
			if got := readWide(t, h); !bytes.Equal(got, catWide(wideRow(40), wideRow(41))) {
				t.Fatal("rows brought back from page-locked memory differ")
			}
			check(t, h.Release())
			check(t, p.Close())
			if pinned {
				if a, fr := f.Get("calls:cuMemHostAlloc"), f.Get("calls:cuMemFreeHost"); a != 1 || fr != 1 {
					t.Fatalf("cuMemHostAlloc called %d times, cuMemFreeHost %d: want one slab, given back at close", a, fr)
				}
			}
		})
	}
}
