package report

import (
	"strings"
	"testing"

	"github.com/gpustate/gpustate/contract"
)

// TestReplayText checks the price of a replayed history: a 16 KiB state
// with 256-byte inputs, 4 checkpoints 64 versions apart.
func TestReplayText(t *testing.T) {
	c := &contract.Contract{
		Type: "Recurrent", Growth: contract.GrowthMutable, Bound: 4, Valid: true,
		Fields:     []contract.Field{{Name: "H", Elem: "float32", ElemSize: 4, Width: 1024, RowBytes: 4096}},
		Checkpoint: &contract.Checkpoint{Every: 64, Keep: 4},
		Replay:     &contract.Replay{Input: "RecInput", Verify: true, Fields: []contract.Field{{Name: "X", Elem: "float32", ElemSize: 4, Width: 64, RowBytes: 256}}},
	}
	got := replayText(c)
	for _, want := range []string{
		"### Replayed history of Recurrent",
		"With 4 checkpoints of 16 KiB kept, 64 versions apart, and one input row of 256 B a step",
		"the history holds at most 128 KiB (checkpoints plus inputs), against 4.1 MiB for write sets of every row: 0.031 of it.",
		"`verify=hash`",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	c.Replay = nil
	if got := replayText(c); got != "" {
		t.Errorf("without a replay line: %q", got)
	}
}
