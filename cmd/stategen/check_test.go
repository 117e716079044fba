package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/gen/report"
)

// TestCheckReports checks that -check covers reports and charts: the one
// -report names, and the one a //go:generate line of the package writes,
// each stale one (edited by hand, missing, or a chart no longer linked)
// failing the check by name.
func TestCheckReports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	src := strings.Replace(simSrc, "package sim\n",
		"package sim\n\n//go:generate go run github.com/gpustate/gpustate/cmd/stategen -report $GOPACKAGE.md\n", 1)
	newModule(t, map[string]string{"sim/sim.go": src})
	md, chart := filepath.Join("sim", "sim.md"), filepath.Join("sim", "sim-heat.svg")
	// What go generate writes, from the package's directory.
	if code, out := stategen(t, "-report", md, "./sim"); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if !exists(chart) {
		t.Fatalf("no chart %s beside the report", chart)
	}
	check := func(what string, want int, wantOut string, args ...string) {
		t.Helper()
		code, out := stategen(t, append([]string{"-check"}, args...)...)
		if code != want || !strings.Contains(out, wantOut) {
			t.Errorf("%s: -check %s: exit %d, output:\n%s\nwant exit %d and %q", what, strings.Join(args, " "), code, out, want, wantOut)
		}
	}
	check("as generated", 0, "", "./...")
	check("as generated", 0, "", "-report", md, "./sim")

	edit := func(path, text string) (restore func()) {
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := os.WriteFile(path, orig, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	restore := edit(md, readFile(t, md)+"edited by hand\n")
	check("report edited", 1, md+": out of date\nstategen: 1 generated file is not up to date", "./...")
	check("report edited", 1, md+": out of date", "-report", md, "./sim")
	restore()
	restore = edit(chart, strings.Replace(readFile(t, chart), "<svg ", "<svg data-x=\"1\" ", 1))
	check("chart edited", 1, chart+": out of date", "./...")
	restore()
	stale := filepath.Join("sim", "sim-gone.svg")
	if err := os.WriteFile(stale, []byte("<svg "+report.SVGMarker+"></svg>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("chart left over", 1, stale+": left over", "./...")
	os.Remove(stale)
	check("another report", 1, "other.md: missing", "-report", "other.md", "./sim")
	if code, out := stategen(t, "-check", "-report", "-", "./sim"); code != 2 {
		t.Errorf("-check -report -: exit %d, want 2 (nothing to compare)\n%s", code, out)
	}
	check("restored", 0, "", "./...")
}

// TestStategenArgs checks which //go:generate lines run stategen.
func TestStategenArgs(t *testing.T) {
	for _, tc := range []struct {
		line string
		args string // "-" when the line runs something else
	}{
		{"go run github.com/gpustate/gpustate/cmd/stategen -report CONTRACTS.md", "-report CONTRACTS.md"},
		{"go run -mod=mod github.com/gpustate/gpustate/cmd/stategen@v0.1.0", ""},
		{"go run ../../cmd/stategen -report=x.md", "-report=x.md"},
		{"go tool stategen -report CONTRACTS.md", "-report CONTRACTS.md"},
		{"go tool github.com/gpustate/gpustate/cmd/stategen", ""},
		{"stategen -blockbytes 65536", "-blockbytes 65536"},
		{"go run golang.org/x/tools/cmd/stringer -type=T", "-"},
		{"go tool stringer", "-"},
	} {
		args, ok := stategenArgs(strings.Fields(tc.line))
		got := strings.Join(args, " ")
		if !ok {
			got = "-"
		}
		if got != tc.args {
			t.Errorf("%s: stategen arguments %q, want %q", tc.line, got, tc.args)
		}
	}
}
