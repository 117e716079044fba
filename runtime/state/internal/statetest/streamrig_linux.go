//go:build linux

package statetest

import (
	"testing"

	"github.com/gpustate/gpustate/internal/fakecuda"
	"github.com/gpustate/gpustate/runtime/device"
)

// FakeStreamRig opens the CUDA backend on the fake driver of package
// device (testdata/fakecuda.c there, built by internal/fakecuda), whose
// streams are threads, closed when t ends: Hold and Release set the
// driver's hold, and Polls counts its cuEventQuery calls. The test
// binary's TestMain calls fakecuda.Cleanup.
func FakeStreamRig(t *testing.T) *StreamRig {
	f := fakecuda.Open(t)
	c, err := device.OpenCUDA(device.CUDAOptions{Library: f.Path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	set := f.Set
	return &StreamRig{
		Backend: c,
		Fill:    LoadFill(t, c),
		Hold:    func(t *testing.T, _ device.Stream) { set("hold", 1) },
		Release: func() { set("hold", 0) },
		Polls:   func() int64 { return f.Get("calls:cuEventQuery") },
	}
}
