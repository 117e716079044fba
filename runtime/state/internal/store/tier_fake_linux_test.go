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
			if got := p.tier.hm.pinned(h.tier.blks[0]); got != pinned {
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

// TestTierCopiesOnStream: on the CUDA backend the moves run on the tier's
// stream in stream order: a move out queues a wait on the event of the
// stream recorded on the blocks and then its async copies (no synchronous
// copy); Prefetch queues the copies back and waits for nothing.
func TestTierCopiesOnStream(t *testing.T) {
	f, c, p, h := fakeTierHead(t)
	st, err := c.NewStream()
	check(t, err)
	defer st.Close()
	check(t, h.RecordStream(st))
	p.tier.stream() // made before the counts
	calls := func(names ...string) []int64 {
		var n []int64
		for _, name := range names {
			n = append(n, f.Get("calls:"+name))
		}
		return n
	}
	names := []string{"cuStreamWaitEvent", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoH_v2", "cuEventSynchronize", "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoD_v2"}
	before := calls(names...)
	if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
		t.Fatalf("move out: %v, %v", moved, err)
	}
	after := calls(names...)
	want := []int64{1, 1, 0, -1, 0, 0} // the two blocks follow one another: one copy
	for i, name := range names {
		if want[i] < 0 {
			continue // the freed blocks' fence waits in a goroutine of its own
		}
		if d := after[i] - before[i]; d != want[i] {
			t.Errorf("move out: %s called %d times, want %d", name, d, want[i])
		}
	}
	p.WaitPending() // the freed blocks' fence waits, in a goroutine of its own
	before = calls(names...)
	check(t, h.Prefetch())
	after = calls(names...)
	want = []int64{0, 0, 0, 0, 1, 0}
	for i, name := range names {
		if d := after[i] - before[i]; d != want[i] {
			t.Errorf("Prefetch: %s called %d times, want %d", name, d, want[i])
		}
	}
	if got := readWide(t, h); !bytes.Equal(got, catWide(wideRow(40), wideRow(41))) {
		t.Fatal("rows brought back differ")
	}
	checkInv(t, p)
}

// fakeTierHead returns the fake CUDA driver, a backend on it, a pool of
// 256-byte blocks with a host tier, and an optional head of two rows
// seeded 40, all closed when t ends.
func fakeTierHead(t *testing.T) (*fakecuda.Driver, *device.CUDA, *Pool, *Head) {
	t.Helper()
	f := fakecuda.Open(t)
	c, err := device.OpenCUDA(device.CUDAOptions{Library: f.Path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p, err := NewPool(c, PoolOptions{BlockBytes: 256, MaxBytes: 16 * 256, HostTier: 64 << 10})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	h := headOf(t, p, wide("Cache", Optional), "a")
	fill(t, h, 2, 40)
	return f, c, p, h
}
