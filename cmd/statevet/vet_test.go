package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// The fixture module: package store declares a contract with an error and an
// appends method; package user calls it, and an appends method of the
// repository's examples/contracts/valid (through a replace directive), in
// loops that discard the error. The findings in user exist only if the
// directives cross the package and module boundaries as facts.
var fixture = map[string]string{
	"store/store.go": `package store

// Cache forgets the merge decision of its branches.
//
//state:contract
//state:growth append bound=64
//state:owner session
//state:branch isolated
type Cache struct{ X []float32 }

// Log is a handle.
type Log struct{ n int }

// Append grows the log.
//
//state:appends
func (l *Log) Append(x int) error { l.n++; return nil }
`,
	"user/user.go": `package user

import (
	"example.com/fixture/store"

	"github.com/gpustate/gpustate/examples/contracts/valid"
)

func fill(l *store.Log, r *valid.Ring, xs []int) error {
	for _, x := range xs {
		l.Append(x)
		_ = r.Push(float32(x))
		if err := l.Append(x); err != nil {
			return err
		}
	}
	return nil
}
`,
	"printf/printf.go": `package printf

import "fmt"

// Say has a mistake go vet's printf check reports: statevet as the vet tool
// must report it too.
func Say(n int) { fmt.Printf("%s rows\n", n) }
`,
	"clean/clean.go": `package clean

// Plain has no directives and imports none: statevet skips it.
func Plain(xs []int) int { return len(xs) }
`,
}

var wantVet = []string{
	"printf/printf.go:7:31: fmt.Printf format %s has arg n of wrong type int",
	"store/store.go:8:1: isolated branches of Cache need a merge decision; add merge=unsupported or merge=fastforward",
	"user/user.go:11:3: error of (*store.Log).Append is discarded inside a loop",
	"user/user.go:12:7: error of (*valid.Ring).Push is discarded inside a loop",
}

// TestVetTool builds statevet and runs it through go vet -vettool, then
// standalone with -json and -fix, on the fixture module.
func TestVetTool(t *testing.T) {
	if testing.Short() {
		t.Skip("builds statevet and runs go vet")
	}
	goCmd, bin := tools(t)
	help := run(t, t.TempDir(), nil, bin, "help")
	for _, a := range suite {
		if !strings.Contains(help, a.Name) {
			t.Errorf("statevet help does not list %s:\n%s", a.Name, help)
		}
	}
	mod, env := module(t, fixture)

	// go vet -vettool: the findings, go vet's own (printf) included, and
	// nothing else.
	out, err := runErr(mod, env, goCmd, "vet", "-vettool="+bin, "./...")
	if err == nil {
		t.Fatalf("go vet succeeded on a module with faults:\n%s", out)
	}
	if got := findings(out); !equal(got, wantVet) {
		t.Fatalf("go vet -vettool findings:\n%s\nwant:\n%s\nfull output:\n%s", strings.Join(got, "\n"), strings.Join(wantVet, "\n"), out)
	}

	// Standalone, -json.
	out, _ = runErr(mod, env, bin, "-json", "./...")
	var tree map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &tree); err != nil {
		t.Fatalf("statevet -json output is not JSON: %v\n%s", err, out)
	}
	if _, ok := tree["example.com/fixture/user"]["stgrowth"]; !ok {
		t.Errorf("statevet -json has no stgrowth finding for package user:\n%s", out)
	}
	if _, ok := tree["example.com/fixture/clean"]; ok {
		t.Errorf("statevet -json reports on package clean:\n%s", out)
	}

	// Standalone, -fix: the merge decision is added and the finding goes away.
	runErr(mod, env, bin, "-fix", "./store")
	fixed, err := os.ReadFile(filepath.Join(mod, "store/store.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(fixed, []byte("//state:branch isolated merge=unsupported\n")) {
		t.Errorf("statevet -fix did not add merge=unsupported:\n%s", fixed)
	}
	if out, err := runErr(mod, env, bin, "./store"); err != nil {
		t.Errorf("statevet still reports on the fixed package: %v\n%s", err, out)
	}
}

var findingRE = regexp.MustCompile(`^(?:\./)?([^\s:]+\.go:\d+:\d+: .*)$`)

// findings returns the "file:line:col: message" lines of out, messages cut
// to the length of the wanted ones' stems, sorted.
func findings(out string) []string {
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if m := findingRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			got = append(got, m[1])
		}
	}
	sort.Strings(got)
	return got
}

// equal reports whether each got line starts with the wanted one.
func equal(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) {
			return false
		}
	}
	return true
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// TestMain removes the statevet binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// tools returns the go command and a statevet binary built once for all
// tests, skipping the test where there is no go command.
func tools(t *testing.T) (goCmd, bin string) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "statevet"); buildErr != nil {
			return
		}
		var out string
		out, buildErr = runErr("../..", nil, goCmd, "build", "-o", filepath.Join(binDir, "statevet"), "./cmd/statevet")
		if buildErr != nil {
			buildErr = fmt.Errorf("go build ./cmd/statevet: %v\n%s", buildErr, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return goCmd, filepath.Join(binDir, "statevet")
}

// module writes a module example.com/fixture that requires this repository
// (through a replace directive) with the given files, and returns its
// directory and the environment that keeps go commands in it offline.
func module(t *testing.T, files map[string]string) (dir string, env []string) {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "fixture")
	write(t, filepath.Join(dir, "go.mod"), "module example.com/fixture\n\ngo 1.26\n\n"+
		"require github.com/gpustate/gpustate v0.0.0\n\nreplace github.com/gpustate/gpustate => "+repo+"\n")
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "go.sum"), string(sum))
	for name, src := range files {
		write(t, filepath.Join(dir, name), src)
	}
	return dir, []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOSUMDB=off"}
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
