package streleased_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/streleased"
)

func TestUseAfterRelease(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), streleased.Analyzer, "a", "alias", "share", "ignore", "freed")
}
