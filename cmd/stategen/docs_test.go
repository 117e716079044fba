package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// durations matches the times the examples print, which depend on the
// machine.
var durations = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s)\b`)

// TestDocExamples runs the examples docs/STATEGEN.md shows the output of
// and compares what they print with the document, times masked.
func TestDocExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "STATEGEN.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, example := range []string{"gridsim", "kvcache", "replay"} {
		t.Run(example, func(t *testing.T) {
			cmd := "$ go run ./examples/" + example + "\n"
			_, block, ok := strings.Cut(string(doc), cmd)
			if !ok {
				t.Fatalf("docs/STATEGEN.md shows no %q", strings.TrimSpace(cmd))
			}
			block, _, _ = strings.Cut(block, "```")
			run := exec.Command("go", "run", "./examples/"+example)
			run.Dir = root
			out, err := run.CombinedOutput()
			if err != nil {
				t.Fatalf("go run: %v\n%s", err, out)
			}
			want := strings.Split(durations.ReplaceAllString(block, "T"), "\n")
			got := strings.Split(durations.ReplaceAllString(string(out), "T"), "\n")
			for i := range max(len(want), len(got)) {
				var w, g string
				if i < len(want) {
					w = want[i]
				}
				if i < len(got) {
					g = got[i]
				}
				if w != g {
					t.Fatalf("docs/STATEGEN.md differs from what the example prints at line %d:\n  doc:     %s\n  printed: %s", i+1, w, g)
				}
			}
		})
	}
}
