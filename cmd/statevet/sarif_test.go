package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/internal/sarif"
	"github.com/gpustate/gpustate/internal/version"
)

// TestSARIF runs statevet -sarif on the kvcache misuse example (a finding of
// each dataflow analyzer, one with related information) and on a contract
// with a fixable fault, and checks the log: valid SARIF 2.1.0, one rule per
// analyzer with its doc and URL, each finding a result with its rule, level,
// region, related locations and fixes, and the same bytes on a second run.
func TestSARIF(t *testing.T) {
	if testing.Short() {
		t.Skip("builds statevet and loads packages")
	}
	_, bin := tools(t)
	misuse, err := os.ReadFile("../../examples/kvcache/misuse/misuse.go")
	if err != nil {
		t.Fatal(err)
	}
	mod, env := module(t, map[string]string{
		"misuse/misuse.go": string(misuse),
		"fixme/fixme.go":   standaloneFixture["fixme/fixme.go"],
	})
	args := []string{"-sarif", "-tags=statevet_demo", "./misuse", "./fixme"}
	stdout, stderr, code := exitCode(t, mod, env, bin, args...)
	if code != 0 {
		t.Fatalf("statevet -sarif: exit %d\n%s", code, stderr)
	}
	if err := sarif.Validate([]byte(stdout)); err != nil {
		t.Fatalf("statevet -sarif wrote an invalid log: %v\n%s", err, stdout)
	}
	again, _, _ := exitCode(t, mod, env, bin, args...)
	if again != stdout {
		t.Errorf("a second run wrote other bytes:\n%s\nthen:\n%s", stdout, again)
	}

	var log sarif.Log
	if err := json.Unmarshal([]byte(stdout), &log); err != nil {
		t.Fatal(err)
	}
	if len(log.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(log.Runs))
	}
	run := log.Runs[0]
	if v := run.Tool.Driver.Version; v != version.String() || !strings.HasPrefix(v, "v") {
		t.Errorf("driver version %q, want %q", v, version.String())
	}
	if run.Tool.Driver.Name != "statevet" || len(run.Tool.Driver.Rules) != len(suite) {
		t.Fatalf("driver %q with %d rules, want statevet with %d", run.Tool.Driver.Name, len(run.Tool.Driver.Rules), len(suite))
	}
	for i, a := range suite {
		r := run.Tool.Driver.Rules[i]
		if r.ID != a.Name || r.HelpURI != a.URL || r.FullDescription == nil || r.FullDescription.Text != strings.TrimSpace(a.Doc) ||
			r.ShortDescription == nil || !strings.HasPrefix(a.Doc, r.ShortDescription.Text) {
			t.Errorf("rule %d = %+v, want %s with its doc and URL", i, r, a.Name)
		}
	}
	byRule := make(map[string][]sarif.Result)
	for _, r := range run.Results {
		if r.Level != "error" || run.Tool.Driver.Rules[r.RuleIndex].ID != r.RuleID {
			t.Errorf("result %+v: level or ruleIndex wrong", r)
		}
		byRule[r.RuleID] = append(byRule[r.RuleID], r)
	}
	for rule, n := range map[string]int{"stcontract": 2, "stgrowth": 2, "stcleanup": 1, "stalias": 1, "streleased": 1} {
		if len(byRule[rule]) != n {
			t.Errorf("%d %s results, want %d", len(byRule[rule]), rule, n)
		}
	}
	// The leak: its region, and the return it leaks through as related.
	if leaks := byRule["stcleanup"]; len(leaks) == 1 {
		l := leaks[0]
		loc := l.Locations[0].PhysicalLocation
		if loc.ArtifactLocation.URI != "misuse/misuse.go" || loc.ArtifactLocation.URIBaseID != "%SRCROOT%" ||
			loc.Region.StartLine != 44 || loc.Region.StartColumn != 12 || loc.Region.EndLine != 44 || loc.Region.EndColumn <= 12 {
			t.Errorf("the leak's location is %+v %+v, want misuse/misuse.go:44:12 under %%SRCROOT%%", loc.ArtifactLocation, *loc.Region)
		}
		if len(l.RelatedLocations) != 1 || l.RelatedLocations[0].PhysicalLocation.Region.StartLine != 49 ||
			l.RelatedLocations[0].Message == nil || l.RelatedLocations[0].Message.Text != "this return leaks it" {
			t.Errorf("the leak's related locations are %+v, want the return at line 49", l.RelatedLocations)
		}
	}
	// The missing merge decision carries its fix, as a byte replacement.
	fixed := false
	for _, r := range byRule["stcontract"] {
		for _, f := range r.Fixes {
			c := f.ArtifactChanges[0]
			rep := c.Replacements[0]
			if c.ArtifactLocation.URI == "fixme/fixme.go" && rep.InsertedContent != nil && strings.Contains(rep.InsertedContent.Text, "merge=unsupported") &&
				rep.DeletedRegion.ByteOffset != nil {
				fixed = true
			}
		}
	}
	if !fixed {
		t.Errorf("no stcontract result carries the merge=unsupported fix:\n%s", stdout)
	}
	if _, stderr, code := exitCode(t, mod, env, bin, "-sarif", "-json", "./fixme"); code != 2 || !bytes.Contains([]byte(stderr), []byte("exclude each other")) {
		t.Errorf("-sarif -json: exit %d, stderr %q; want 2 and a refusal", code, stderr)
	}
}
