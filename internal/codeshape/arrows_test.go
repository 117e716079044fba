package codeshape

import (
	"testing"

	"github.com/gpustate/gpustate/internal/fileplan"
)

// maxStateArrows is the most arrows that may run back up between
// runtime/state's files (internal/fileplan): a file naming something
// declared in a file above it in the plan. docs/INTERNALS.md draws the
// plan; a new arrow back up means a feature reaching past its hooks.
const maxStateArrows = 0

// TestStateArrows keeps the store's files (runtime/state/internal/store) layered.
func TestStateArrows(t *testing.T) {
	p, err := fileplan.Load("../../runtime/state/internal/store")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Back) > maxStateArrows {
		t.Errorf("%d arrows run back up between the store's files, want at most %d (go run ./scripts/arrows ./runtime/state/internal/store lists them):", len(p.Back), maxStateArrows)
		for _, a := range p.Back {
			t.Logf("  %s -> %s (%s)", a.From, a.To, a.Via)
		}
	}
}
