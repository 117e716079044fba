package stalias_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gpustate/gpustate/analyzers/stalias"
)

func TestSnapshotWrites(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), stalias.Analyzer, "a", "spans", "share", "ignore", "alias", "coupled")
}
