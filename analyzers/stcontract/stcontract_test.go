package stcontract_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/stcontract"
)

func Test(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), stcontract.Analyzer, "valid", "bad", "edge", "funcs")
}

func TestFixes(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, analysistest.TestData(), stcontract.Analyzer, "fixes")
}
