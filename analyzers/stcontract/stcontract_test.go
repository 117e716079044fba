package stcontract_test

import (
	"go/build"
	"os/exec"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/stcontract"
)

func Test(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), stcontract.Analyzer, "valid", "bad", "edge", "funcs", "onefault", "ignore", "window", "share", "replay", "groups", "extern", "ifacedirs", "bindings")
}

func TestFixes(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, analysistest.TestData(), stcontract.Analyzer, "fixes", "externfix")
}

// TestCgo checks a contract next to a cgo preamble, over C element types.
func TestCgo(t *testing.T) {
	if !build.Default.CgoEnabled {
		t.Skip("cgo is disabled")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no C compiler")
	}
	analysistest.Run(t, analysistest.TestData(), stcontract.Analyzer, "cgo")
}
