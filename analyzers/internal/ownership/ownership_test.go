package ownership_test

import (
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"
	"golang.org/x/tools/go/analysis/passes/ctrlflow"
	"golang.org/x/tools/go/analysis/passes/inspect"

	"github.com/gpustate/gpustate/analyzers/directives"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
)

// writesAnalyzer exports the facts that ownership.Build infers on its own:
// the writes facts, found in every package.
var writesAnalyzer = &analysis.Analyzer{
	Name: "writes",
	Doc:  "export the inferred writes facts",
	Run: func(pass *analysis.Pass) (any, error) {
		ownership.Build(pass, pass.ResultOf[directives.Analyzer].(*directives.Result)).Export(pass)
		return nil, nil
	},
	FactTypes: []analysis.Fact{(*ownership.Fact)(nil)},
	Requires:  []*analysis.Analyzer{directives.Analyzer, inspect.Analyzer, ctrlflow.Analyzer},
}

// TestWrites checks the inferred writes facts.
func TestWrites(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), writesAnalyzer, "writes")
}

// TestErrMaps checks the inferred errmap facts: both shapes, and the
// look-alikes that can answer nil for a non-nil error.
func TestErrMaps(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), writesAnalyzer, "errmap")
}
