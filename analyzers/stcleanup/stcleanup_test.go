package stcleanup_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/stcleanup"
)

func TestLeaks(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), stcleanup.Analyzer, "a", "b", "cascade", "mainprog", "handleerr", "releaseall", "share", "ignore", "borrow", "resourcecalls", "advice", "gfx", "engine")
}

func TestFix(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, analysistest.TestData(), stcleanup.Analyzer, "fix")
}
