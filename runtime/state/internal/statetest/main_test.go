package statetest

import (
	"os"
	"testing"

	"github.com/gpustate/gpustate/internal/fakecuda"
)

func TestMain(m *testing.M) {
	code := m.Run()
	fakecuda.Cleanup() // the fake CUDA drivers FakeStreamRig built
	os.Exit(code)
}
