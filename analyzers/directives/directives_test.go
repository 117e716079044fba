package directives_test

import (
	"go/ast"
	"go/types"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/directives"
)

// probe reports what the directives Result says about every call and
// variable declaration, so that the fixtures can check it with // want.
var probe = &analysis.Analyzer{
	Name:     "probe",
	Doc:      "probe: report what directives.Result knows",
	Requires: []*analysis.Analyzer{directives.Analyzer},
	Run: func(pass *analysis.Pass) (any, error) {
		r := pass.ResultOf[directives.Analyzer].(*directives.Result)
		if r.Active() && pass.Pkg.Name() == "gpuonly" {
			pass.Reportf(pass.Files[0].Package, "gpuonly is active, but no directives hold there")
		}
		if !r.Active() {
			if len(r.Package().Contracts) != 0 {
				pass.Reportf(pass.Files[0].Package, "inactive package with contracts")
			}
			return nil, nil
		}
		for _, f := range pass.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					var fn *types.Func
					switch fun := ast.Unparen(n.Fun).(type) {
					case *ast.SelectorExpr:
						if sel := pass.TypesInfo.Selections[fun]; sel != nil {
							fn, _ = sel.Obj().(*types.Func)
						} else {
							fn, _ = pass.TypesInfo.Uses[fun.Sel].(*types.Func)
						}
					case *ast.Ident:
						fn, _ = pass.TypesInfo.Uses[fun].(*types.Func)
					}
					if d := r.Func(fn); d != nil {
						pass.Reportf(n.Pos(), "call %s: %s", fn.FullName(), (&directives.FuncFact{Func: *d}).String())
					}
				case *ast.ValueSpec:
					for _, name := range n.Names {
						t := pass.TypesInfo.TypeOf(name)
						if r.IsSnapshot(t) {
							pass.Reportf(name.Pos(), "snapshot %s", t)
						}
						if named, ok := t.(*types.Named); ok {
							if c := r.Contract(named.Obj()); c != nil {
								pass.Reportf(name.Pos(), "contract %s valid=%t", t, c.Valid)
							}
						}
					}
				}
				return true
			})
		}
		return nil, nil
	},
}

func TestFacts(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), directives.Analyzer, "a", "c", "d")
}

// TestExternFacts checks the facts of extern lines: exported by the package
// that declares them and by every package that imports it, directly or
// not; and those of directives on interface methods.
func TestExternFacts(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), directives.Analyzer, "ext", "fapp", "ftop", "ifc", "vkext")
}

// TestBindingVerbs checks that the verbs of bindings (frees, acquire N,
// release=N, takes onsuccess, child, valid, errmap) travel as facts, on
// extern lines and on declarations, to importers.
func TestBindingVerbs(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), probe, "vkapp")
}

// TestExternResult checks that Result.Func answers for calls through an
// interface and for the targets of extern lines, in the declaring package's
// importers, direct or not, and not for a concrete type's own methods.
func TestExternResult(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), probe, "app", "top", "ifcuse", "gpuonly")
}

func TestResult(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), probe, "b", "c")
}
