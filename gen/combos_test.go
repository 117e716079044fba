package gen

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
)

// A combo is one combination of the directives that shape the API.
type combo struct {
	Mutable    bool
	Snapshot   bool
	Branch     int // 0 none, 1 isolated merge=unsupported, 2 isolated merge=fastforward
	Rollback   int // 0 none, 1 descendants=invalidate, 2 descendants=keep
	Checkpoint bool
}

func (c combo) Name() string {
	var b strings.Builder
	if c.Mutable {
		b.WriteString("Mutable")
	} else {
		b.WriteString("Append")
	}
	if c.Snapshot {
		b.WriteString("Snap")
	} else {
		b.WriteString("NoSnap")
	}
	b.WriteString([]string{"", "Branch", "BranchFF"}[c.Branch])
	b.WriteString([]string{"", "RollbackInv", "RollbackKeep"}[c.Rollback])
	if c.Checkpoint {
		b.WriteString("Checkpoint")
	}
	return b.String()
}

func (c combo) Bound() int {
	if c.Mutable {
		return 16
	}
	return 64
}

func (c combo) Describe() string {
	s := "an append state"
	if c.Mutable {
		s = "a mutable state"
	}
	if !c.Snapshot {
		s += " without snapshots"
	}
	s += []string{"", " with isolated branches never merged", " with branches merged by fast-forward"}[c.Branch]
	s += []string{"", ", rolled back invalidating descendants", ", rolled back keeping descendants"}[c.Rollback]
	if c.Checkpoint {
		s += ", with checkpoints"
	}
	return s
}

// allCombos lists every combination the language allows: rollback and
// checkpoints need snapshots.
func allCombos() []combo {
	var out []combo
	for _, mutable := range []bool{false, true} {
		for _, snapshot := range []bool{true, false} {
			for branch := range 3 {
				for rollback := range 3 {
					for _, checkpoint := range []bool{false, true} {
						if !snapshot && (rollback != 0 || checkpoint) {
							continue
						}
						out = append(out, combo{mutable, snapshot, branch, rollback, checkpoint})
					}
				}
			}
		}
	}
	return out
}

// find returns the first combination that satisfies ok.
func find(t *testing.T, cs []combo, ok func(combo) bool) string {
	for _, c := range cs {
		if ok(c) {
			return c.Name()
		}
	}
	t.Fatal("no such combination")
	return ""
}

// TestCombinations generates the handles of every combination into a
// module that requires this one, then compiles and runs a test of the
// runtime's semantics through each generated API, checks that calls the
// contract forbids do not compile, and runs statevet on the generated code.
func TestCombinations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a module")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	combos := allCombos()
	if len(combos) != 42 {
		t.Fatalf("%d combinations, want 42", len(combos))
	}
	dir := t.TempDir()
	files := comboModule(t, root, combos)
	forbidden := forbiddenCalls(t, combos)
	for _, f := range forbidden {
		files["forbidden/"+f.pkg+"/"+f.pkg+".go"] = []byte(f.src)
	}
	writeFiles(t, dir, files)
	for _, kv := range []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	generateCombos(t, dir, len(combos)+1) // and Ring, the window state

	goCmd := func(args ...string) ([]byte, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		return cmd.CombinedOutput()
	}
	if out, err := goCmd("vet", "./combos"); err != nil {
		t.Fatalf("go vet ./combos: %v\n%s", err, out)
	}
	if out, err := goCmd("test", "-count=1", "./combos"); err != nil {
		t.Fatalf("go test ./combos: %v\n%s", err, out)
	}
	// Each forbidden call is a compile error in its own package.
	out, err := goCmd("build", "./forbidden/...")
	if err == nil {
		t.Fatal("calls the contracts forbid compiled")
	}
	checkForbidden(t, forbidden, string(out))

	// statevet finds nothing in generated code.
	if matches, _ := filepath.Glob(filepath.Join(root, "cmd", "statevet", "*.go")); len(matches) == 0 {
		t.Log("cmd/statevet not present: statevet not run on the generated code")
		return
	}
	if out, err := goCmd("run", "github.com/gpustate/gpustate/cmd/statevet", "-test=false", "./combos"); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("statevet on generated code: %v\n%s", err, out)
	}
}

// comboModule returns the files of a module that requires the one at
// root and declares every combination, with its tests.
func comboModule(t *testing.T, root string, combos []combo) map[string][]byte {
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"go.mod":                 fmt.Appendf(nil, "module example.com/user\n\ngo 1.26.0\n\nrequire github.com/gpustate/gpustate v0.0.0\n\nreplace github.com/gpustate/gpustate => %s\n", root),
		"go.sum":                 sum,
		"combos/combos.go":       execTemplate(t, "types.go.tmpl", combos),
		"combos/combos_test.go":  execTemplate(t, "combos_test.go.tmpl", combos),
		"combos/helpers_test.go": readTestdata(t, "helpers_test.go.txt"),
		"combos/model_test.go":   readTestdata(t, "model_test.go.txt"),
		"forbidden/README":       []byte("each package here calls what its contract does not generate\n"),
	}
}

// A forbiddenCall is a package that calls what a contract forbids, and
// what the compiler says of it.
type forbiddenCall struct{ pkg, call, want, src string }

func forbiddenCalls(t *testing.T, combos []combo) []forbiddenCall {
	appendT := find(t, combos, func(c combo) bool { return !c.Mutable && c.Snapshot })
	mutableT := find(t, combos, func(c combo) bool { return c.Mutable })
	noBranch := find(t, combos, func(c combo) bool { return c.Snapshot && c.Branch == 0 })
	noMerge := find(t, combos, func(c combo) bool { return c.Branch == 1 })
	noRollback := find(t, combos, func(c combo) bool { return c.Snapshot && c.Rollback == 0 })
	noCheckpoint := find(t, combos, func(c combo) bool { return c.Snapshot && !c.Checkpoint })
	noSnapshot := find(t, combos, func(c combo) bool { return !c.Snapshot })
	calls := []forbiddenCall{
		{"writeonappend", fmt.Sprintf("s.Write(0, combos.%s{})", appendT), "has no field or method Write", ""},
		{"writedeviceonappend", "s.WriteDevice(0, 1)", "has no field or method WriteDevice", ""},
		{"appendonmutable", fmt.Sprintf("s2.Append(combos.%s{})", mutableT), "has no field or method Append", ""},
		{"branchnone", "s3.Branch()", "has no field or method Branch", ""},
		{"mergeunsupported", "s4.Merge(s4)", "has no field or method Merge", ""},
		{"norollback", "s5.Rollback(nil)", "has no field or method Rollback", ""},
		{"nocheckpoint", "s6.At(1)", "has no field or method At", ""},
		{"snapshotnone", "s7.Snapshot()", "has no field or method Snapshot", ""},
		{"nosnapshottype", fmt.Sprintf("(*combos.%sSnapshot)(nil)", noSnapshot), "undefined: combos." + noSnapshot + "Snapshot", ""},
		{"boundonwindow", "(*combos.RingState)(nil).Bound()", "has no field or method Bound", ""},
	}
	for i, f := range calls {
		calls[i].src = fmt.Sprintf(`package %s

import "example.com/user/combos"

func use(s *combos.%sState, s2 *combos.%sState, s3 *combos.%sState, s4 *combos.%sState, s5 *combos.%sState, s6 *combos.%sState, s7 *combos.%sState) {
	_, _, _, _, _, _, _ = s, s2, s3, s4, s5, s6, s7
	_ = %s
}
`, f.pkg, appendT, mutableT, noBranch, noMerge, noRollback, noCheckpoint, noSnapshot, f.call)
	}
	return calls
}

// writeFiles writes files, by path relative to dir.
func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// generateCombos generates the handles of the n combinations in dir's
// package combos.
func generateCombos(t *testing.T, dir string, n int) {
	pkgs, err := Load(dir, "./combos")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range pkgs[0].Contracts.Diagnostics {
		t.Errorf("%s: %s", pkgs[0].Fset.Position(d.Pos), d.Message)
	}
	gen, err := pkgs[0].Generate()
	if err != nil {
		t.Fatal(err)
	}
	if len(gen) != n {
		t.Fatalf("generated %d files for %d combinations", len(gen), n)
	}
	for _, f := range gen {
		if err := os.WriteFile(filepath.Join(dir, "combos", f.Name), f.Content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkForbidden checks that go build's output holds the compile error of
// every forbidden call, in its package.
func checkForbidden(t *testing.T, calls []forbiddenCall, out string) {
	for _, f := range calls {
		file := "forbidden/" + f.pkg + "/" + f.pkg + ".go"
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, file) && strings.Contains(line, f.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no compile error %q; go build said:\n%s", f.pkg, f.want, out)
		}
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "combos", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func execTemplate(t *testing.T, name string, data any) []byte {
	t.Helper()
	tmpl, err := template.New(name).Parse(string(readTestdata(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
