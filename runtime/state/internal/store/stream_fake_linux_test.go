//go:build linux

package store

import (
	"testing"

	"github.com/gpustate/gpustate/internal/fakecuda"
	"github.com/gpustate/gpustate/runtime/device"
)

// fakeStreamRig opens the CUDA backend on the fake driver of package
// device (testdata/fakecuda.c there, built by internal/fakecuda), whose
// streams are threads.
func fakeStreamRig(t *testing.T) *streamRig {
	f := fakecuda.Open(t)
	c, err := device.OpenCUDA(device.CUDAOptions{Library: f.Path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	set := f.Set
	return &streamRig{
		b:       c,
		fill:    loadFill(t, c),
		hold:    func(t *testing.T, _ device.Stream) { set("hold", 1) },
		release: func() { set("hold", 0) },
		polls:   func() int64 { return f.Get("calls:cuEventQuery") },
	}
}
