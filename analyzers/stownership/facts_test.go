package stownership_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/stownership"
)

// TestFacts checks the acquirer, takes and releases facts inferred by the
// obligation analysis.
func TestFacts(t *testing.T) {
	analysistest.Run(t, filepath.Join(analysistest.TestData(), "facts"), stownership.Analyzer, "wrap", "helpers")
}
