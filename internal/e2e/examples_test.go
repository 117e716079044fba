package e2e

import (
	"os/exec"
	"testing"
)

// TestGoldenExamples runs the Example functions of a golden package of
// package gen, which show the generated API in use (go test ./... does not
// reach packages under testdata).
func TestGoldenExamples(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command(goBin, "test", "-count=1", "-run=^Example", "./gen/testdata/src/kv")
	cmd.Dir = checkout(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the generated API's examples: %v\n%s", err, out)
	}
}
