package stcleanup_test

import (
	"go/token"
	"go/types"
	"os"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/gpustate/gpustate/analyzers/internal/ownership"
	"github.com/gpustate/gpustate/analyzers/stalias"
	"github.com/gpustate/gpustate/analyzers/stcleanup"
	"github.com/gpustate/gpustate/analyzers/stownership"
	"github.com/gpustate/gpustate/analyzers/streleased"
	"github.com/gpustate/gpustate/contract"
)

// precisionPkgs is the subset of the standard library and golang.org/x/tools
// the precision tests load from source; scripts/precision.sh runs the full
// set through go vet. Set STATEVET_PRECISION_PKGS (comma-separated
// patterns) to choose others.
var precisionPkgs = []string{
	"archive/zip", "archive/tar", "bufio", "compress/gzip", "debug/elf", "debug/pe",
	"go/build", "io/fs", "mime/multipart", "net/http/httputil", "os/exec", "path/filepath",
	"golang.org/x/tools/go/packages",
	"golang.org/x/tools/go/analysis/unitchecker",
	"golang.org/x/tools/go/analysis/passes/printf",
	"golang.org/x/tools/go/ssa",
}

func load(t *testing.T) []*packages.Package {
	t.Helper()
	patterns := precisionPkgs
	if env := os.Getenv("STATEVET_PRECISION_PKGS"); env != "" {
		patterns = strings.Split(env, ",")
	}
	cfg := &packages.Config{Mode: packages.LoadAllSyntax, Tests: false}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	if n := packages.PrintErrors(pkgs); n > 0 {
		t.Fatalf("%d errors loading packages", n)
	}
	n := 0
	packages.Visit(pkgs, nil, func(*packages.Package) { n++ })
	t.Logf("%d root packages, %d in all", len(pkgs), n)
	return pkgs
}

// analyze runs stcleanup, stalias and streleased over pkgs, with the
// directives dirs in every package when dirs is not nil.
func analyze(t *testing.T, pkgs []*packages.Package, dirs ownership.Directives) []string {
	t.Helper()
	analyzers := []*analysis.Analyzer{stcleanup.Analyzer, stalias.Analyzer, streleased.Analyzer}
	if dirs != nil {
		own := stownership.New(dirs)
		analyzers = []*analysis.Analyzer{stcleanup.New(own), stalias.New(own), streleased.New(own)}
	}
	g, err := checker.Analyze(analyzers, pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for act := range g.All() {
		if act.Err != nil {
			t.Errorf("%s: %v", act, act.Err)
		}
		for _, d := range act.Diagnostics {
			pos := act.Package.Fset.Position(d.Pos)
			if act.Analyzer.Name == "streleased" && nameAfterClose(pos) {
				continue
			}
			found = append(found, act.Analyzer.Name+": "+pos.String()+": "+d.Message)
		}
	}
	return found
}

// TestPrecision runs stcleanup, stalias and streleased over code without
// directives: the analyzers must report nothing and fail nowhere (the
// writes inference runs in every package).
func TestPrecision(t *testing.T) {
	if testing.Short() {
		t.Skip("loads packages from source")
	}
	for _, f := range analyze(t, load(t), nil) {
		t.Error(f)
	}
}

// osFiles declares os.Open, os.Create, os.OpenFile and os.CreateTemp
// acquirers and (*os.File).Close their release: it runs the cleanup and
// use-after-release engines over real code, which must then report
// nothing that is not a real leak.
type osFiles struct{}

func (osFiles) Active() bool                 { return true }
func (osFiles) IsSnapshot(t types.Type) bool { return false }
func (osFiles) Func(fn *types.Func) *contract.Func {
	if fn.Pkg() == nil || fn.Pkg().Path() != "os" {
		return nil
	}
	sig := fn.Signature()
	switch {
	case sig.Recv() == nil && (fn.Name() == "Open" || fn.Name() == "Create" || fn.Name() == "OpenFile" || fn.Name() == "CreateTemp"):
		return &contract.Func{Name: fn.Name(), Acquire: true}
	case sig.Recv() != nil && fn.Name() == "Close" && types.TypeString(sig.Recv().Type(), nil) == "*os.File":
		return &contract.Func{Name: "(*File).Close", Release: true}
	}
	return nil
}

// knownLeaks are findings of the os-files run that were checked by hand and
// are real: files opened and never closed on some path. All are profile and
// trace files handed to runtime/trace or pprof and left open until the
// process exits, on purpose ("Could save f so after can call f.Close; not
// worth the effort", testing.go).
var knownLeaks = []string{
	"src/testing/testing.go:2606:",                 // -test.cpuprofile file, handed to testDeps.StartCPUProfile (an interface method: borrowed)
	"src/testing/testing.go:2619:",                 // -test.trace file
	"go/analysis/internal/checker/checker.go:107:", // -cpuprofile file
	"go/analysis/internal/checker/checker.go:119:", // -trace file
	"go/packages/gopackages/main.go:86:",           // -cpuprofile file
	"go/packages/gopackages/main.go:95:",           // -trace file
	"cmd/ssadump/main.go:110:",                     // -cpuprofile file
}

func TestPrecisionFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("loads packages from source")
	}
	for _, f := range analyze(t, load(t), osFiles{}) {
		known := false
		for _, k := range knownLeaks {
			known = known || strings.Contains(f, k)
		}
		if !known {
			t.Error(f)
		}
	}
}

// nameAfterClose reports whether the finding at pos is f.Name() after
// f.Close(): unlike a gpustate handle's, a file's Name stays valid after
// Close, so the os-files model does not hold there.
func nameAfterClose(pos token.Position) bool {
	data, err := os.ReadFile(pos.Filename)
	if err != nil {
		return false
	}
	lines := strings.Split(string(data), "\n")
	if pos.Line < 1 || pos.Line > len(lines) || pos.Column < 1 || pos.Column > len(lines[pos.Line-1]) {
		return false
	}
	rest := lines[pos.Line-1][pos.Column-1:]
	i := strings.IndexFunc(rest, func(r rune) bool { return r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return i > 0 && strings.HasPrefix(rest[i:], ".Name()")
}
