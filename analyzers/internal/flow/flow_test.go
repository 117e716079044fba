package flow_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/internal/flow"
)

// TestFacts checks the inferred acquirer, takes, releases and writes facts.
func TestFacts(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), flow.Analyzer, "wrap", "writes")
}
