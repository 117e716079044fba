package stgrowth_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/stgrowth"
)

func Test(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), stgrowth.Analyzer, "growth", "loop", "store", "user", "deadstore")
}
