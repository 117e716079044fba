package analysisutil

import (
	"golang.org/x/tools/go/analysis"

	"github.com/gpustate/gpustate/contract"
)

// Report reports a contract diagnostic on pass, with its fixes as
// SuggestedFixes.
func Report(pass *analysis.Pass, d contract.Diagnostic) {
	diag := analysis.Diagnostic{Pos: d.Pos, End: d.End, Message: d.Message}
	for _, f := range d.Fixes {
		fix := analysis.SuggestedFix{Message: f.Message}
		for _, e := range f.Edits {
			fix.TextEdits = append(fix.TextEdits, analysis.TextEdit{Pos: e.Pos, End: e.End, NewText: []byte(e.NewText)})
		}
		diag.SuggestedFixes = append(diag.SuggestedFixes, fix)
	}
	pass.Report(diag)
}
