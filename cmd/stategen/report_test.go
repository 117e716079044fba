package main

import (
	"strings"
	"testing"
)

const simSrc = `package sim

// Side is the grid's side.
const Side = 16

// Heat is a simulation's field with a checkpoint per 1 KiB of deltas written.
//
//state:contract
//state:growth mutable bound=Side
//state:owner run
//state:rollback descendants=keep
//state:checkpoint budget=4*256 keep=2
type Heat struct {
	Cells []float32 ` + "`state:\"width=4\"`" + `
}
`

// TestReportHistory checks that -report charts the past versions of a
// state with checkpoints spaced by a budget, and that -check accepts
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
		"| checkpoints and reconstruction | budget 1024 bytes (1 KiB), keep 2.",
		"### Past versions of Heat",
		"rebuilding any retained version replays at most 1 KiB of deltas",
		// 16 rows of 16 bytes a version: the budget is reached every 4.
		"At 256 B a version, the budget of 1 KiB is reached every 4 versions",
		"for uniform access over a window of 8 versions",
		// 16 rows of 16 bytes: a checkpoint holds 256 bytes.
		"| 1 | 256 B |",
		"| 2 | 512 B | 640 B | 0, 4 | the declared policy: budget 1 KiB, about every 4 versions |",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	if code, out := stategen(t, "-check", "./..."); code != 0 {
		t.Errorf("-check after generating: exit %d\n%s", code, out)
	}
	// Doc comments wrap; read them as one line.
	src := strings.ReplaceAll(readFile(t, "sim/heat_state.go"), "\n\t// ", " ")
	src = strings.ReplaceAll(src, "\n// ", " ")
	if !strings.Contains(src, "a checkpoint whenever the writes since the last one reach 1024 bytes (1 KiB), the last 2 kept, so rebuilding any retained version replays at most 1 KiB of deltas") {
		t.Error("the generated docs do not say what the budget does")
	}
}
