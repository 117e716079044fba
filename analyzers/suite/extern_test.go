package suite_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/stalias"
	"github.com/gpustate/gpustate/analyzers/stcleanup"
	"github.com/gpustate/gpustate/analyzers/streleased"
)

// TestInterfaceLeaks checks that directives on interface methods carry to
// calls through the interface.
func TestInterfaceLeaks(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), stcleanup.Analyzer, "ifaceleak")
}

// TestExternLeaks checks that the extern lines of an imported contracts
// package carry to calls of a package it does not import.
func TestExternLeaks(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), stcleanup.Analyzer, "externleak")
}

// TestInterfaceReleased and TestExternReleased check uses after a release
// declared on an interface method, and by an extern line.
func TestInterfaceReleased(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), streleased.Analyzer, "ifacereleased")
}

func TestExternReleased(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), streleased.Analyzer, "externreleased")
}

// TestInterfaceAlias checks writers declared on an interface method and by
// extern lines, on a func and on an interface method.
func TestInterfaceAlias(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), stalias.Analyzer, "ifacealias")
}
