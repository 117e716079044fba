package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The standalone fixture: package tagged has a faulty contract behind a
// build tag; package dup has a faulty contract and a test file, so that it
// is analyzed twice (the package and its test variant); package intest has
// a faulty contract in a test file only; package fixme has a
// fixable finding and one that no fix resolves, package fixall only a
// fixable one.
var standaloneFixture = map[string]string{
	"tagged/clean.go": `package tagged

// Plain has no directives.
func Plain() {}
`,
	"tagged/special.go": `//go:build special

package tagged

//state:contract
//state:growth append bound=8
type Tagged struct{ X []int32 }
`,
	"dup/dup.go": `package dup

//state:contract
//state:growth append bound=8
type Dup struct{ X []int32 }
`,
	"dup/dup_test.go": `package dup

import "testing"

func TestDup(t *testing.T) {}
`,
	"intest/intest.go": `package intest
`,
	"intest/intest_test.go": `package intest

//state:contract
//state:growth append bound=8
type InTest struct{ X []int32 }
`,
	"fixme/fixme.go": `package fixme

//state:contract
//state:growth append bound=8
//state:owner session
//state:branch isolated
type Fixable struct{ X []int32 }

//state:contract
//state:growth append bound=8
type Unfixable struct{ X []int32 }
`,
	"fixjson/fixjson.go": `package fixjson

//state:contract
//state:growth append bound=8
//state:owner session
//state:branch isolated
type Fixable struct{ X []int32 }

//state:contract
//state:growth append bound=8
type Unfixable struct{ X []int32 }
`,
	"fixall/fixall.go": `package fixall

//state:contract
//state:growth append bound=8
//state:ownr session
type Fixable struct{ X []int32 }
`,
}

// exitCode runs bin in dir and returns its stdout, stderr and exit code.
func exitCode(t *testing.T, dir string, env []string, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("%s %s: %v", bin, strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// TestStandalone checks statevet run on its own: -tags reaches the package
// loader, -json lists each finding once, -fix says what it changed and
// fails while findings remain.
func TestStandalone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds statevet and loads packages")
	}
	_, bin := tools(t)
	mod, env := module(t, standaloneFixture)
	const noOwner = "state type Tagged has no //state:owner line"

	t.Run("tags", func(t *testing.T) {
		stdout, stderr, code := exitCode(t, mod, env, bin, "./tagged")
		if code != 0 || stdout != "" || stderr != "" {
			t.Errorf("without the tag: exit %d, stdout %q, stderr %q; want 0 and silence", code, stdout, stderr)
		}
		for _, args := range [][]string{{"-tags=special"}, {"-tags", "special"}, {"-tags", "other,special"}} {
			_, stderr, code := exitCode(t, mod, env, bin, append(args, "./tagged")...)
			// The finding's line ends with its analyzer's name.
			if code != exitFindings || !strings.Contains(stderr, "tagged/special.go:5:1: "+noOwner) ||
				!strings.Contains(stderr, "(stcontract)\n") {
				t.Errorf("%v: exit %d, stderr:\n%s\nwant exit %d and %q", args, code, stderr, exitFindings, noOwner)
			}
		}
	})

	t.Run("json once", func(t *testing.T) {
		stdout, stderr, code := exitCode(t, mod, env, bin, "-json", "./dup")
		if code != 0 {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr)
		}
		var tree map[string]map[string][]struct {
			Posn    string `json:"posn"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal([]byte(stdout), &tree); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, stdout)
		}
		n := 0
		for id, byAnalyzer := range tree {
			for _, diags := range byAnalyzer {
				for _, d := range diags {
					if strings.HasPrefix(d.Message, "state type Dup has no //state:owner line") {
						n++
						if id != "example.com/fixture/dup" {
							t.Errorf("the finding is listed under %s, want the package itself", id)
						}
					}
				}
			}
		}
		if n != 1 {
			t.Errorf("the finding is listed %d times, want once:\n%s", n, stdout)
		}
		// Text output lists it once too.
		_, stderr, _ = exitCode(t, mod, env, bin, "./dup")
		if c := strings.Count(stderr, "state type Dup has no //state:owner line"); c != 1 {
			t.Errorf("text output lists the finding %d times:\n%s", c, stderr)
		}
	})

	t.Run("fix with findings left", func(t *testing.T) {
		stdout, stderr, code := exitCode(t, mod, env, bin, "-fix", "./fixme")
		if want := "fixme/fixme.go:6: add merge=unsupported (stcontract)\n"; stdout != want {
			t.Errorf("-fix printed %q, want %q", stdout, want)
		}
		if code != exitFindings || !strings.Contains(stderr, "state type Unfixable has no //state:owner line") ||
			strings.Contains(stderr, "merge decision") {
			t.Errorf("-fix: exit %d, stderr:\n%s\nwant exit %d and the finding that remains", code, stderr, exitFindings)
		}
		src, err := os.ReadFile(filepath.Join(mod, "fixme/fixme.go"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "//state:branch isolated merge=unsupported\n") {
			t.Errorf("the fix was not applied:\n%s", src)
		}
		// Nothing left to fix: nothing printed, and still a failure.
		stdout, _, code = exitCode(t, mod, env, bin, "-fix", "./fixme")
		if stdout != "" || code != exitFindings {
			t.Errorf("second -fix: exit %d, printed %q; want exit %d and nothing", code, stdout, exitFindings)
		}
	})

	t.Run("fix all", func(t *testing.T) {
		stdout, stderr, code := exitCode(t, mod, env, bin, "-fix", "./fixall")
		if want := "fixall/fixall.go:5: replace ownr with owner (stcontract)\n"; stdout != want || code != 0 || stderr != "" {
			t.Errorf("-fix: exit %d, stdout %q, stderr %q; want exit 0 and %q", code, stdout, stderr, want)
		}
		if _, stderr, code := exitCode(t, mod, env, bin, "./fixall"); code != 0 {
			t.Errorf("findings after -fix: exit %d\n%s", code, stderr)
		}
	})

	t.Run("fix json", func(t *testing.T) {
		// The fixes applied go to stderr, the JSON of what remains to stdout.
		stdout, stderr, code := exitCode(t, mod, env, bin, "-fix", "-json", "./fixjson")
		if code != exitFindings || stderr != "fixjson/fixjson.go:6: add merge=unsupported (stcontract)\n" {
			t.Errorf("-fix -json: exit %d, stderr %q", code, stderr)
		}
		var tree map[string]map[string][]struct{ Message string }
		if err := json.Unmarshal([]byte(stdout), &tree); err != nil {
			t.Fatalf("-fix -json: stdout is not JSON: %v\n%s", err, stdout)
		}
		left := tree["example.com/fixture/fixjson"]["stcontract"]
		if len(left) != 1 || !strings.HasPrefix(left[0].Message, "state type Unfixable has no //state:owner line") {
			t.Errorf("-fix -json: the findings left are %+v, want the missing owner of Unfixable", left)
		}
	})

	t.Run("test=false", func(t *testing.T) {
		// go vet analyzes the test files either way; -test=false drops
		// what it reports there.
		const msg = "state type InTest has no //state:owner line"
		if _, stderr, code := exitCode(t, mod, env, bin, "./intest"); code != exitFindings || !strings.Contains(stderr, "intest_test.go:3:1: "+msg) {
			t.Errorf("with tests: exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, exitFindings, msg)
		}
		if stdout, stderr, code := exitCode(t, mod, env, bin, "-test=false", "./intest"); code != 0 || stdout != "" || stderr != "" {
			t.Errorf("-test=false: exit %d, stdout %q, stderr %q; want 0 and silence", code, stdout, stderr)
		}
	})

	t.Run("help", func(t *testing.T) {
		stdout, _, code := exitCode(t, mod, env, bin, "help", "stgrowth")
		if code != 0 || !strings.HasPrefix(stdout, "stgrowth: report state that may grow without a bound") {
			t.Errorf("help stgrowth: exit %d\n%s", code, stdout)
		}
		stdout, _, _ = exitCode(t, mod, env, bin, "help")
		for _, flag := range []string{"-tags", "-json", "-sarif", "-fix", "-test"} {
			if !strings.Contains(stdout, "  "+flag+" ") && !strings.Contains(stdout, "  "+flag+"\n") {
				t.Errorf("help does not document %s:\n%s", flag, stdout)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		if _, stderr, code := exitCode(t, mod, env, bin, "./nosuch"); code != exitError {
			t.Errorf("a package that does not exist: exit %d, want %d\n%s", code, exitError, stderr)
		}
		if _, _, code := exitCode(t, mod, env, bin, "-nosuchflag", "./dup"); code != 2 {
			t.Errorf("an unknown flag: exit %d, want 2", code)
		}
		if _, stderr, code := exitCode(t, mod, env, bin, "-stcleanup", "./dup"); code != 0 {
			t.Errorf("-stcleanup alone runs stcontract: exit %d\n%s", code, stderr)
		}
	})
}

// TestVetToolArgs checks which command lines go to the go vet protocol.
func TestVetToolArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		vet  bool
	}{
		// The version flags alone are the standalone command's, which
		// answers -V=full as go vet expects.
		{[]string{"-V=full"}, false},
		{[]string{"-V"}, false},
		{[]string{"-version"}, false},
		{[]string{"-V=full", "-json"}, true},
		{[]string{"-flags"}, true},
		{[]string{"-stcontract", "/tmp/go-build/vet.cfg"}, true},
		{[]string{"./..."}, false},
		{[]string{"-json", "-tags", "x", "./..."}, false},
		{[]string{"help"}, false},
		{nil, false},
	} {
		if got := vetTool(tc.args); got != tc.vet {
			t.Errorf("vetTool(%q) = %t, want %t", tc.args, got, tc.vet)
		}
	}
}

// TestSelected checks the -NAME flags: -NAME runs only the analyzers
// named, -NAME=false all but those.
func TestSelected(t *testing.T) {
	names := func(args ...string) string {
		fs, o := flags(suite, io.Discard)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range o.selected(suite) {
			out = append(out, a.Name)
		}
		return strings.Join(out, " ")
	}
	all := names()
	if len(strings.Fields(all)) != len(suite) {
		t.Errorf("no flags select %q", all)
	}
	if got := names("-stgrowth", "-stcontract"); got != "stcontract stgrowth" {
		t.Errorf("-stgrowth -stcontract select %q", got)
	}
	if got := names("-stgrowth=false"); strings.Contains(got, "stgrowth") || len(strings.Fields(got)) != len(suite)-1 {
		t.Errorf("-stgrowth=false selects %q", got)
	}
	if got := names("-stgrowth", "-stcontract=false"); got != "stgrowth" {
		t.Errorf("-stgrowth -stcontract=false select %q", got)
	}
}
