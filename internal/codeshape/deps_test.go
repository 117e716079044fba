package codeshape

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportsFlowOneWay checks the nevers of docs/INTERNALS.md against the
// go command's own dependency lists: the generator never links the runtime,
// the analyzers never link the runtime or the CUDA layer, and the device
// layer knows nothing of versions or contracts.
func TestImportsFlowOneWay(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	const mod = "github.com/gpustate/gpustate/"
	never := []struct {
		pkg       string
		forbidden []string
	}{
		{"./cmd/stategen", []string{mod + "runtime/", "github.com/ebitengine/purego", "github.com/NVIDIA/go-nvml"}},
		{"./gen/...", []string{mod + "runtime/", "github.com/ebitengine/purego"}},
		{"./cmd/statevet", []string{mod + "runtime/", mod + "gen", "github.com/ebitengine/purego", "github.com/NVIDIA/go-nvml"}},
		{"./runtime/device/...", []string{mod + "runtime/state", mod + "contract", mod + "gen", mod + "placement"}},
		{"./placement", []string{mod}},
		{"./contract", []string{mod + "runtime/", mod + "gen", mod + "analyzers"}},
	}
	for _, n := range never {
		cmd := exec.Command(goBin, "list", "-deps", n.pkg)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", n.pkg, err)
		}
		self := strings.Fields(string(out))
		for _, dep := range self {
			for _, f := range n.forbidden {
				if strings.HasPrefix(dep, f) && !isSelf(dep, n.pkg) {
					t.Errorf("%s depends on %s", n.pkg, dep)
				}
			}
		}
	}
}

// isSelf reports whether dep is one of the packages the pattern names
// itself (placement may import placement).
func isSelf(dep, pattern string) bool {
	p := strings.TrimSuffix(strings.TrimPrefix(pattern, "./"), "/...")
	return strings.HasPrefix(dep, "github.com/gpustate/gpustate/"+p)
}

// checkers are the analyzers that report findings (analyzers/suite). What
// several of them need (the directives' facts, the ownership analysis)
// lives in analyzers of its own that report nothing, as golang.org/x/tools
// keeps ctrlflow apart from the checkers that read its graphs.
var checkers = []string{"stcontract", "stgrowth", "stcleanup", "stalias", "streleased"}

// TestNoCheckerImportsAnother checks that no analyzer that reports findings
// depends on another: each can be run, tested and changed alone.
func TestNoCheckerImportsAnother(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	const analyzers = "github.com/gpustate/gpustate/analyzers/"
	list := exec.Command(goBin, "list", "./analyzers/...")
	list.Dir = "../.."
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list ./analyzers/...: %v", err)
	}
	// A new analyzer package is a checker unless it is a shared analysis.
	shared := []string{"directives", "stownership", "suite", "golangci"}
	for _, p := range strings.Fields(string(out)) {
		name, ok := strings.CutPrefix(p, analyzers)
		if !ok || strings.Contains(name, "/") || slices.Contains(shared, name) {
			continue
		}
		if !slices.Contains(checkers, name) {
			t.Errorf("analyzers/%s is neither a checker listed here nor a shared analysis", name)
		}
	}
	for _, c := range checkers {
		cmd := exec.Command(goBin, "list", "-deps", "./analyzers/"+c)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps ./analyzers/%s: %v", c, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if other, ok := strings.CutPrefix(dep, analyzers); ok && other != c && slices.Contains(checkers, other) {
				t.Errorf("analyzers/%s imports the checker analyzers/%s; move what they share into an analyzer of its own", c, other)
			}
		}
	}
}

// TestBlocksStandAlone checks that the block allocator of runtime/state
// (internal/blocks) depends on nothing else of runtime/state: the store's
// features reach their per-block state through the block pointer or the
// block's release hook, never by fields of the allocator's (docs/INTERNALS.md,
// "The store's map").
func TestBlocksStandAlone(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	const (
		state  = "github.com/gpustate/gpustate/runtime/state"
		blocks = state + "/internal/blocks"
	)
	cmd := exec.Command(goBin, "list", "-deps", "./runtime/state/internal/blocks")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./runtime/state/internal/blocks: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if (dep == state || strings.HasPrefix(dep, state+"/")) && dep != blocks {
			t.Errorf("runtime/state/internal/blocks depends on %s", dep)
		}
	}
}
