//go:build linux

package device

import (
	"os"
	"testing"

	"github.com/gpustate/gpustate/internal/fakecuda"
)

// fake is a built variant of testdata/fakecuda.c, loaded for control
// (package internal/fakecuda builds it).
type fake struct {
	path string
	set  func(key string, value int64) int32
	get  func(key string) int64
	// setCurrent is the fake's cuCtxSetCurrent, for tests that change the
	// calling thread's context behind the backend's back.
	setCurrent func(ctx uintptr) int32
}

// fakeDriver builds the fake driver library with the given preprocessor
// defines (once per set of defines) and returns it, reset to one device
// with 1 GiB of memory and no injected failures.
func fakeDriver(t testing.TB, defines ...string) *fake {
	t.Helper()
	d := fakecuda.Open(t, defines...)
	return &fake{path: d.Path, set: d.Set, get: d.Get, setCurrent: d.SetCurrent}
}

// must sets a control of the fake.
func (f *fake) must(t testing.TB, key string, value int64) {
	t.Helper()
	if f.set(key, value) != 1 {
		t.Fatalf("fake CUDA driver: unknown control %q", key)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	fakecuda.Cleanup()
	os.Exit(code)
}
