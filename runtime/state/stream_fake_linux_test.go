//go:build linux

package state

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/gpustate/gpustate/runtime/device"
)

// fakeControl returns the fake CUDA driver's fakecuda_set.
func fakeControl(lib string) (func(key string, value int64) int32, error) {
	h, err := purego.Dlopen(lib, purego.RTLD_LAZY|purego.RTLD_LOCAL)
	if err != nil {
		return nil, err
	}
	var set func(key string, value int64) int32
	purego.RegisterLibFunc(&set, h, "fakecuda_set")
	return set, nil
}

// fakeStreamRig opens the CUDA backend on the fake driver of package
// device (testdata/fakecuda.c there), whose streams are threads.
func fakeStreamRig(t *testing.T) *streamRig {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: cannot build the fake CUDA driver")
	}
	lib := filepath.Join(t.TempDir(), "libcuda.so.1")
	src := filepath.Join("..", "device", "testdata", "fakecuda.c")
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-o", lib, src, "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("building the fake CUDA driver: %v\n%s", err, out)
	}
	c, err := device.OpenCUDA(device.CUDAOptions{Library: lib})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	set, err := fakeControl(lib)
	if err != nil {
		t.Fatal(err)
	}
	return &streamRig{
		b:       c,
		fill:    loadFill(t, c),
		hold:    func(t *testing.T, _ device.Stream) { set("hold", 1) },
		release: func() { set("hold", 0) },
	}
}
