// Package fakecuda builds the fake CUDA driver of the tests
// (runtime/device/testdata/fakecuda.c, and the other C fakes there and in
// runtime/device/nvml/testdata) with gcc, and loads its controls. The
// tests of runtime/device, runtime/device/nvml and runtime/state share it;
// see docs/INTERNALS.md (runtime/device).
package fakecuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
)

// Driver is a built fake CUDA driver library, loaded for control.
type Driver struct {
	// Path is the library's path, for device.CUDAOptions.Library or
	// $GPUSTATE_LIBCUDA.
	Path string
	// Set and Get are the fake's fakecuda_set and fakecuda_get: Set
	// answers 1 for a known control.
	Set func(key string, value int64) int32
	Get func(key string) int64
	// SetCurrent is the fake's cuCtxSetCurrent, for tests that change the
	// calling thread's context behind the backend's back.
	SetCurrent func(ctx uintptr) int32
}

// Must sets a control of the fake, failing t when it is unknown.
func (d *Driver) Must(t testing.TB, key string, value int64) {
	t.Helper()
	if d.Set(key, value) != 1 {
		t.Fatalf("fake CUDA driver: unknown control %q", key)
	}
}

// Source returns the path of a file of runtime/device's testdata.
func Source(name string) string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "runtime", "device", "testdata", name)
}

// Compile builds the C file src into the shared library out with gcc,
// with extra flags (defines) added; it skips t where gcc is missing.
func Compile(t testing.TB, src, out string, flags ...string) {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: cannot build the fake driver libraries the tests run against")
	}
	args := append([]string{"-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", out, src}, flags...)
	args = append(args, "-lpthread")
	if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", filepath.Base(src), err, b)
	}
}

var built struct {
	sync.Mutex
	dir     string
	paths   map[string]string  // defines -> the library built with them
	drivers map[string]*Driver // defines -> the library loaded for control
}

// Build returns the path of the fake driver library libcuda.so.1 built
// with the given preprocessor defines, once per set of defines in a
// process, without loading it: for tests that hand it to a child process.
func Build(t testing.TB, defines ...string) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	return build(t, defines)
}

// build is Build with built locked.
func build(t testing.TB, defines []string) string {
	t.Helper()
	key := strings.Join(defines, " ")
	if path, ok := built.paths[key]; ok {
		return path
	}
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "fakecuda")
		if err != nil {
			t.Fatal(err)
		}
		built.dir = dir
		built.paths, built.drivers = map[string]string{}, map[string]*Driver{}
	}
	dir := filepath.Join(built.dir, "v"+strings.NewReplacer("-D", "", " ", "_").Replace(key))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "libcuda.so.1")
	Compile(t, Source("fakecuda.c"), path, defines...)
	built.paths[key] = path
	return path
}

// Open returns the fake driver built with the given preprocessor defines
// (by Build; a library is loaded once in a process and never unloaded),
// reset to one device with 1 GiB of memory and no injected failures.
func Open(t testing.TB, defines ...string) *Driver {
	t.Helper()
	key := strings.Join(defines, " ")
	built.Lock()
	defer built.Unlock()
	d := built.drivers[key]
	if d == nil {
		d = &Driver{Path: build(t, defines)}
		h, err := purego.Dlopen(d.Path, purego.RTLD_LAZY|purego.RTLD_LOCAL)
		if err != nil {
			t.Fatalf("loading the fake CUDA driver: %v", err)
		}
		purego.RegisterLibFunc(&d.Set, h, "fakecuda_set")
		purego.RegisterLibFunc(&d.Get, h, "fakecuda_get")
		purego.RegisterLibFunc(&d.SetCurrent, h, "cuCtxSetCurrent")
		built.drivers[key] = d
	}
	d.Must(t, "reset", 0)
	return d
}

// Cleanup removes the libraries Build and Open built; a TestMain calls it
// once the tests have run.
func Cleanup() {
	built.Lock()
	defer built.Unlock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
		built.dir, built.paths, built.drivers = "", nil, nil
	}
}
