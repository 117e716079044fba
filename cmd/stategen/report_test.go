package main

import (
	"strings"
	"testing"
)

const simSrc = `package sim

// Side is the grid's side.
const Side = 16

// Heat is a simulation's field with checkpoints and a budget for them.
//
//state:contract
//state:growth mutable bound=Side
//state:owner run
//state:rollback descendants=keep
//state:checkpoint every=4 keep=2 budget=2*256
type Heat struct {
	Cells []float32 ` + "`state:\"width=4\"`" + `
}
`

// TestReportHistory checks that -report charts the past versions of a
// state with checkpoints, the budget included, and that -check accepts
// what go generate wrote.
func TestReportHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	newModule(t, map[string]string{"sim/sim.go": simSrc})
	if code, out := stategen(t, "-report", "CONTRACTS.md", "./..."); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	rep := readFile(t, "CONTRACTS.md")
	for _, want := range []string{
		"| checkpoints and reconstruction | every 4, keep 2, budget 512 bytes.",
		"### Past versions of Heat",
		"the last 5 to 8 versions of its line are reconstructable",
		"The contract sets a budget of 512 B for checkpoint memory.",
		"for uniform access over a window of 8 versions",
		// 16 rows of 16 bytes: a checkpoint holds 256 bytes.
		"| 1 | 256 B |",
		"| 2 | 512 B | 640 B | 0, 4 | the declared policy: every 4 versions; best within the budget of 512 B |",
		"Within the budget of 512 B, `state.Place` keeps 2 checkpoints (512 B)",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	if code, out := stategen(t, "-check", "./..."); code != 0 {
		t.Errorf("-check after generating: exit %d\n%s", code, out)
	}
	if !strings.Contains(readFile(t, "sim/heat_state.go"), "with a budget of 512 bytes for checkpoint memory") {
		t.Error("the generated docs do not state the budget")
	}
}
