package stcontract

import (
	_ "embed"

	"golang.org/x/tools/go/analysis"

	"github.com/gpustate/gpustate/analyzers/directives"
	"github.com/gpustate/gpustate/analyzers/internal/analysisutil"
	"github.com/gpustate/gpustate/contract"
)

//go:embed doc.go
var doc string

// Analyzer reports malformed or contradictory contracts.
var Analyzer = analysisutil.Checker("stcontract", doc, run, directives.Analyzer)

// run reports the stcontract diagnostics of the package's parse. The
// directives analyzer has parsed and validated every contract with package
// contract; this analyzer only reports what it found, so that stategen and
// statevet agree on every rule. Inactive packages (no directives here or in
// imports) return at once.
func run(pass *analysis.Pass) (any, error) {
	r := pass.ResultOf[directives.Analyzer].(*directives.Result)
	if !r.Active() {
		return nil, nil
	}
	for _, d := range r.Package().Diagnostics {
		if d.Analyzer == contract.StContract {
			analysisutil.Report(pass, d)
		}
	}
	return nil, nil
}
