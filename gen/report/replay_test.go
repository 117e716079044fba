package report

import (
	"bytes"
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

// TestReplayPastVersions checks that "Past versions" prices a replayed
// state's history as "Replayed history" does: a version's delta is its
// step's input, not the rows it rewrote, so the history the declared
// policy holds is within the replayed history's bound.
func TestReplayPastVersions(t *testing.T) {
	c := &contract.Contract{
		Type: "Recurrent", Growth: contract.GrowthMutable, Bound: 4, Valid: true,
		Fields:     []contract.Field{{Name: "H", Elem: "float32", ElemSize: 4, Width: 1024, RowBytes: 4096}},
		Checkpoint: &contract.Checkpoint{Every: 64, Keep: 4},
		Replay:     &contract.Replay{Input: "RecInput", Fields: []contract.Field{{Name: "X", Elem: "float32", ElemSize: 4, Width: 64, RowBytes: 256}}},
	}
	h := newHistory(c, 0)
	if h == nil || h.refused != "" {
		t.Fatalf("no history charted: %+v", h)
	}
	var b bytes.Buffer
	h.write(&b)
	got := b.String()
	for _, want := range []string{
		"each version made by `Step` runs its step function again on its recorded input",
		"each version's delta is its recorded input (256 B) and step function, not the rows it wrote",
		// 255 inputs of 256 bytes, and 4 checkpoints of 16 KiB.
		"The window's 255 deltas (one per version after its oldest checkpoint) are kept whatever the placement (256 B each, 63.8 KiB in all)",
		"With the window's deltas (63.8 KiB) the history holds 127.8 KiB, 8.0x the 16 KiB the state itself holds at its bound.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	// What a write set of every row would cost is not what replay keeps.
	if strings.Contains(got, "(16 KiB each") {
		t.Errorf("the deltas are priced as write sets:\n%s", got)
	}
	// Budget spacing counts the inputs, as the runtime does: a budget of
	// 16 inputs spaces checkpoints 16 versions apart.
	c.Checkpoint = &contract.Checkpoint{Budget: 16 * 256, Keep: 4}
	if every, _ := budgetSpacing(c); every != 16 {
		t.Errorf("a budget of 16 inputs spaces checkpoints %d versions apart, want 16", every)
	}
}
