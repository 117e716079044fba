package store

import (
	"os"
	"testing"

	"github.com/gpustate/gpustate/internal/fakecuda"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// The model tests (model_test.go, the *_model_test.go files, TestModelAt,
// the group prefix models of group_share_test.go, and the interaction
// model of package state_test) take two flags, which statetest registers:
// -model.steps, the steps per seed (make fuzz runs them long), and
// -model.seed, one seed to run alone. Every model failure prints the seed
// and the command that replays it, with the flags the run was given, such
// as
//
//	go test ./runtime/state/internal/store -run '^TestModel$/^3$' -args -model.seed=3

func TestMain(m *testing.M) {
	code := m.Run()
	fakecuda.Cleanup() // the fake CUDA drivers the tests built
	os.Exit(code)
}

// modelSteps returns the steps per seed of a model test: def, or
// -model.steps.
func modelSteps(_ testing.TB, def int) int { return statetest.Steps(def, 1) }
