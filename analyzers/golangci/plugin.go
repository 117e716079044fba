// Package golangci registers the statevet analyzers as golangci-lint v2
// module plugins. A custom golangci-lint binary that imports it (for its
// side effect) offers one linter per analyzer, named after it (stcontract,
// stgrowth, stcleanup, stalias, streleased), and a linter named statevet
// that runs them all. //nolint:NAME works for every analyzer's name under
// either, nolintlint included, and a silenced finding takes its related
// information with it (see nolint.go):
//
//	linters:
//	  enable: [statevet]
//	  settings:
//	    custom:
//	      statevet:
//	        type: module
//
// The binary's main lives in its own module, tools/golangci-lint, so that
// golangci-lint's dependencies never enter this module's go.mod.
package golangci

import (
	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis"

	"github.com/gpustate/gpustate/analyzers/suite"
)

// AllName is the plugin that runs every analyzer.
const AllName = "statevet"

func init() {
	var all []*analysis.Analyzer
	for _, a := range suite.Analyzers() {
		all = append(all, wrap(a, AllName))
		register.Plugin(a.Name, newPlugin([]*analysis.Analyzer{wrap(a, a.Name)}))
	}
	register.Plugin(AllName, newPlugin(all))
}

// plugin is one golangci-lint linter running the analyzers it holds.
type plugin struct {
	analyzers []*analysis.Analyzer
}

// newPlugin returns the constructor golangci-lint calls with the linter's
// settings. The analyzers take no settings; any given are rejected, so a
// misspelt option is not silently ignored.
func newPlugin(analyzers []*analysis.Analyzer) register.NewPlugin {
	return func(settings any) (register.LinterPlugin, error) {
		if _, err := register.DecodeSettings[struct{}](settings); err != nil {
			return nil, err
		}
		return &plugin{analyzers: analyzers}, nil
	}
}

// BuildAnalyzers returns the plugin's analyzers.
func (p *plugin) BuildAnalyzers() ([]*analysis.Analyzer, error) {
	return p.analyzers, nil
}

// GetLoadMode asks for type information: every analyzer needs it, and the
// dataflow analyzers need facts of imported packages.
func (p *plugin) GetLoadMode() string {
	return register.LoadModeTypesInfo
}
