package main

import (
	"golang.org/x/tools/go/analysis"

	"github.com/gpustate/gpustate/analyzers/stalias"
	"github.com/gpustate/gpustate/analyzers/stcleanup"
	"github.com/gpustate/gpustate/analyzers/stcontract"
	"github.com/gpustate/gpustate/analyzers/stgrowth"
	"github.com/gpustate/gpustate/analyzers/streleased"
)

// suite is every analyzer statevet runs: add new analyzers here, and only
// here. The directives analyzer they all require runs once per package
// without being listed.
var suite = []*analysis.Analyzer{
	stcontract.Analyzer,
	stgrowth.Analyzer,
	stcleanup.Analyzer,
	stalias.Analyzer,
	streleased.Analyzer,
}
