//go:build linux

package state

import (
	"testing"

	"github.com/gpustate/gpustate/internal/fakecuda"
	"github.com/gpustate/gpustate/runtime/device"
)

// TestCUDASlabsZeroedOnce: the CUDA backend zeroes what Alloc returns and
// says so (device.AllocZeroer), so the pool does not zero its slabs again:
// one cuMemsetD8 per slab, not two.
func TestCUDASlabsZeroedOnce(t *testing.T) {
	f := fakecuda.Open(t)
	c, err := device.OpenCUDA(device.CUDAOptions{Library: f.Path})
	check(t, err)
	defer c.Close()
	if z, ok := device.Backend(c).(device.AllocZeroer); !ok || !z.AllocZeroes() {
		t.Fatal("the CUDA backend does not declare that Alloc zeroes")
	}
	p, err := NewPool(c, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	before := f.Get("calls:cuMemsetD8_v2")
	h := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "a"))
	fill(t, h, 3*slabBlocks, 1) // three slabs
	slabs := p.Stats().Slabs
	if got := f.Get("calls:cuMemsetD8_v2") - before; got != int64(slabs) {
		t.Errorf("%d memsets for %d slabs; want one each (the backend's own)", got, slabs)
	}
	dst := make([]byte, 256)
	check(t, h.Read(3*slabBlocks-1, 3*slabBlocks, [][]byte{dst}))
	if want := byte((3 * slabBlocks) % 256); dst[0] != want {
		t.Errorf("the last row reads %#x", dst[0])
	}
	check(t, h.Release())
}
