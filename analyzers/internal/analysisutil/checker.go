package analysisutil

import "golang.org/x/tools/go/analysis"

// Checker returns the analyzer that reports findings named name: its Doc
// the section of docSource (its doc.go) MustExtractDoc finds, its URL the
// package's page, run wrapped by WithIgnores so //statevet:ignore silences
// it, and the analyzers it requires.
func Checker(name, docSource string, run func(*analysis.Pass) (any, error), requires ...*analysis.Analyzer) *analysis.Analyzer {
	return &analysis.Analyzer{
		Name:     name,
		Doc:      MustExtractDoc(docSource, name),
		URL:      "https://pkg.go.dev/github.com/gpustate/gpustate/analyzers/" + name,
		Run:      WithIgnores(run),
		Requires: requires,
	}
}
