package codeshape

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCIRunsTheDemoChecks checks that .ci/run checks what make demo checks:
// it runs make generated (every committed generated file is current:
// stategen -check ./...) and make demo (the examples regenerate, run, and
// their expected findings hold), and the Makefile's targets still do so.
func TestCIRunsTheDemoChecks(t *testing.T) {
	ci := commands(readRepo(t, ".ci/run"))
	for _, want := range []string{"make generated", "make demo"} {
		if !slices.Contains(ci, want) {
			t.Errorf(".ci/run does not run %q", want)
		}
	}
	targets := makeTargets(readRepo(t, "Makefile"))
	for target, want := range map[string]string{
		"generated": "./cmd/stategen -check ./...",
		"demo":      "scripts/demo.sh",
	} {
		if !strings.Contains(targets[target], want) {
			t.Errorf("make %s no longer runs %s:\n%s", target, want, targets[target])
		}
	}
}

// readRepo returns the file at the module-relative path rel.
func readRepo(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// commands returns the lines of a shell script that are not comments,
// trimmed.
func commands(script string) []string {
	var out []string
	for line := range strings.Lines(script) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// makeTargets returns the recipe of each rule of a Makefile, by target.
func makeTargets(makefile string) map[string]string {
	rule := regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_-]*):`)
	out := make(map[string]string)
	target := ""
	for line := range strings.Lines(makefile) {
		switch m := rule.FindStringSubmatch(line); {
		case m != nil:
			target = m[1]
		case strings.HasPrefix(line, "\t") && target != "":
			out[target] += line
		default:
			target = ""
		}
	}
	return out
}
