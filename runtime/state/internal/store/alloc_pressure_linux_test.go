//go:build linux

package store

import (
	"errors"
	"testing"
	"time"

	"github.com/gpustate/gpustate/internal/fakecuda"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
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

// TestPendingReleaseStallsNoRead: on the CUDA backend (the fake driver),
// a release pending behind held-back stream work has a goroutine waiting
// in cuEventSynchronize; meanwhile another session's BlockTable (a device
// allocation) and an unrelated session's Read go on.
func TestPendingReleaseStallsNoRead(t *testing.T) {
	r := statetest.FakeStreamRig(t)
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	st, err := r.Streams().NewStream()
	check(t, err)
	defer st.Close()
	reader := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "reader"))
	fill(t, reader, 2, 7)
	tabled := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "tabled"))
	fill(t, tabled, 2, 9)
	gone := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "gone"))
	fill(t, gone, 2, 1)
	r.Hold(t, st)
	defer r.Release()
	check(t, gone.RecordStream(st))
	check(t, gone.Release()) // pending: a goroutine waits for the event
	time.Sleep(20 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		tab, err := tabled.BlockTable()
		if err != nil {
			done <- err
			return
		}
		dst := make([]byte, 2*256)
		err = reader.Read(0, 2, [][]byte{dst})
		done <- errors.Join(err, tab.Release())
	}()
	select {
	case err := <-done:
		check(t, err)
	case <-time.After(20 * time.Second):
		r.Release()
		t.Fatal("BlockTable and an unrelated Read waited for another session's pending release")
	}
	r.Release()
	p.WaitPending()
	check(t, errors.Join(reader.Release(), tabled.Release()))
}
