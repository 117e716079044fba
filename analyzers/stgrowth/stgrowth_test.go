package stgrowth_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/stgrowth"
)

func Test(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), stgrowth.Analyzer, "growth", "loop", "store", "user", "deadstore", "window", "share")
}

// TestIgnore checks //statevet:ignore: it silences the finding on its line
// or the next, needs a reason, and is itself a finding when it silences
// nothing.
func TestIgnore(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), stgrowth.Analyzer, "ignore")
}
