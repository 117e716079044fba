package state

import (
	"os"
	"testing"

	"github.com/gpustate/gpustate/internal/fakecuda"
)

func TestMain(m *testing.M) {
	code := m.Run()
	fakecuda.Cleanup() // the fake CUDA drivers the tests built
	os.Exit(code)
}
