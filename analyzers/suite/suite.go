// Package suite lists every statevet analyzer, for the drivers that run them
// all: cmd/statevet, the golangci-lint plugin and tests that check every
// analyzer at once.
package suite

import (
	"golang.org/x/tools/go/analysis"

	"github.com/gpustate/gpustate/analyzers/stalias"
	"github.com/gpustate/gpustate/analyzers/stcleanup"
	"github.com/gpustate/gpustate/analyzers/stcontract"
	"github.com/gpustate/gpustate/analyzers/stgrowth"
	"github.com/gpustate/gpustate/analyzers/streleased"
)

// Analyzers returns every analyzer statevet runs, in a fixed order: add new
// analyzers here, and only here. The directives analyzer they all require
// runs once per package without being listed.
func Analyzers() []*analysis.Analyzer {
	return []*analysis.Analyzer{
		stcontract.Analyzer,
		stgrowth.Analyzer,
		stcleanup.Analyzer,
		stalias.Analyzer,
		streleased.Analyzer,
	}
}
