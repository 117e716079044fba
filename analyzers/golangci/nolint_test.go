package golangci

import (
	"go/ast"
	"go/token"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"
)

// fake reports every call to acquire, with related information at the
// end of the enclosing function, as stcleanup reports a leak and the
// return it leaks through.
var fake = &analysis.Analyzer{
	Name: "fake",
	Doc:  "reports calls to acquire",
	Run: func(pass *analysis.Pass) (any, error) {
		for _, f := range pass.Files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if call, ok := n.(*ast.CallExpr); ok {
						if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "acquire" {
							pass.Report(analysis.Diagnostic{Pos: call.Pos(), Message: "acquire called",
								Related: []analysis.RelatedInformation{{Pos: fn.Body.Rbrace, Message: "this return leaks it"}}})
						}
					}
					return true
				})
			}
		}
		return nil, nil
	},
}

// TestNolintUnderStatevet: under the statevet linter, //nolint:fake (the
// analyzer's own name) drops the finding, on its line, the line above or
// over a whole declaration; //nolint and //nolint:statevet leave it to
// golangci-lint, which silences it, and strip its related information;
// //nolint:errcheck leaves it whole.
func TestNolintUnderStatevet(t *testing.T) {
	res := analysistest.Run(t, analysistest.TestData(), wrap(fake, AllName), "nolintall")
	checkRelated(t, res, map[string]bool{"plain": true, "otherName": true})
}

// TestNolintUnderOwnName: under the analyzer's own linter golangci-lint
// matches //nolint:fake itself (so nolintlint sees the directive used):
// the finding reaches it, without its related information, which would
// otherwise show alone.
func TestNolintUnderOwnName(t *testing.T) {
	res := analysistest.Run(t, analysistest.TestData(), wrap(fake, "fake"), "nolintown")
	checkRelated(t, res, map[string]bool{"plain": true, "otherName": true, "byLinter": true})
}

// checkRelated checks that the findings in the functions named keep their
// related information and every other finding has none.
func checkRelated(t *testing.T, res []*analysistest.Result, keep map[string]bool) {
	t.Helper()
	n := 0
	for _, r := range res {
		for _, d := range r.Diagnostics {
			n++
			fn := enclosing(r.Pass.Files, d.Pos)
			if got := len(d.Related) > 0; got != keep[fn] {
				t.Errorf("finding in %s: related information %v, want %v", fn, got, keep[fn])
			}
		}
	}
	if n == 0 {
		t.Error("no findings")
	}
}

// enclosing names the function declaration around pos.
func enclosing(files []*ast.File, pos token.Pos) string {
	for _, f := range files {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Pos() <= pos && pos < fn.End() {
				return fn.Name.Name
			}
		}
	}
	return ""
}

// TestNolintNames parses comments as golangci-lint does.
func TestNolintNames(t *testing.T) {
	for _, tc := range []struct {
		text  string
		names []string
		ok    bool
	}{
		{"//nolint", nil, true},
		{"// nolint:all", nil, true},
		{"//nolint:stcleanup // why", []string{"stcleanup"}, true},
		{"//nolint:StCleanup, stalias", []string{"stcleanup", "stalias"}, true},
		{"//nolint:stalias,all", nil, true},
		{"//nolintx", nil, false},
		{"// a nolint in prose", nil, false},
	} {
		names, ok := nolintNames(tc.text)
		if ok != tc.ok || len(names) != len(tc.names) {
			t.Errorf("%q: %v %v, want %v %v", tc.text, names, ok, tc.names, tc.ok)
			continue
		}
		for i := range names {
			if names[i] != tc.names[i] {
				t.Errorf("%q: %v, want %v", tc.text, names, tc.names)
			}
		}
	}
}
