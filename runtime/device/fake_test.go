//go:build linux

package device

import (
	"os"
	"testing"

	"github.com/gpustate/gpustate/internal/fakecuda"
)

// fake is a built variant of testdata/fakecuda.c, loaded for control.
type fake = fakecuda.Driver

// fakeDriver builds the fake driver library with the given preprocessor
// defines (once per set of defines, by internal/fakecuda) and returns it,
// reset to one device with 1 GiB of memory and no injected failures.
func fakeDriver(t testing.TB, defines ...string) *fake {
	t.Helper()
	return fakecuda.Open(t, defines...)
}

func TestMain(m *testing.M) {
	code := m.Run()
	fakecuda.Cleanup()
	os.Exit(code)
}
