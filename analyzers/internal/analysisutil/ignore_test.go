package analysisutil_test

import (
	"go/ast"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/internal/analysisutil"
)

// reporter returns an analyzer with the name of a statevet analyzer that
// reports every call of the function called fn, with requires run first.
func reporter(name, fn string, requires ...*analysis.Analyzer) *analysis.Analyzer {
	return &analysis.Analyzer{
		Name:     name,
		Doc:      "reports calls of " + fn,
		Requires: requires,
		Run: analysisutil.WithIgnores(func(pass *analysis.Pass) (any, error) {
			for _, f := range pass.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					if call, ok := n.(*ast.CallExpr); ok {
						if id, ok := call.Fun.(*ast.Ident); ok && id.Name == fn {
							pass.Reportf(call.Pos(), "call of %s", fn)
						}
					}
					return true
				})
			}
			return nil, nil
		}),
	}
}

// TestIgnoreNamingTwo runs two analyzers over one package, one required
// by the other so that both run: an ignore naming both is used when either
// fires, and is reported once, by the last to finish, when neither does.
func TestIgnoreNamingTwo(t *testing.T) {
	growth := reporter("stgrowth", "growth")
	released := reporter("streleased", "released", growth)
	analysistest.Run(t, analysistest.TestData(), released, "multi")
}
