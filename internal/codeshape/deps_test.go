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
		for _, dep := range goList(t, "-deps", n.pkg) {
			for _, f := range n.forbidden {
				if strings.HasPrefix(dep, f) && !isSelf(dep, n.pkg) {
					t.Errorf("%s depends on %s", n.pkg, dep)
				}
			}
		}
	}
}

// goList runs go list with args in the module's root and returns the
// import paths it prints; it skips t where the go command is missing.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command(goBin, append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
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
	const analyzers = "github.com/gpustate/gpustate/analyzers/"
	// A new analyzer package is a checker unless it is a shared analysis.
	shared := []string{"directives", "stownership", "suite", "golangci"}
	for _, p := range goList(t, "./analyzers/...") {
		name, ok := strings.CutPrefix(p, analyzers)
		if !ok || strings.Contains(name, "/") || slices.Contains(shared, name) {
			continue
		}
		if !slices.Contains(checkers, name) {
			t.Errorf("analyzers/%s is neither a checker listed here nor a shared analysis", name)
		}
	}
	for _, c := range checkers {
		for _, dep := range goList(t, "-deps", "./analyzers/"+c) {
			if other, ok := strings.CutPrefix(dep, analyzers); ok && other != c && slices.Contains(checkers, other) {
				t.Errorf("analyzers/%s imports the checker analyzers/%s; move what they share into an analyzer of its own", c, other)
			}
		}
	}
}

// TestBlocksImportsNothingOfState checks that the block allocator
// (runtime/state/internal/blocks: size classes, slabs, free lists, fences)
// depends on nothing else of runtime/state, so the head's features reach
// it through its narrow API and never the other way (docs/INTERNALS.md).
func TestBlocksImportsNothingOfState(t *testing.T) {
	const state, blocks = "github.com/gpustate/gpustate/runtime/state", "github.com/gpustate/gpustate/runtime/state/internal/blocks"
	for _, dep := range goList(t, "-deps", "./runtime/state/internal/blocks/...") {
		if (dep == state || strings.HasPrefix(dep, state+"/")) && dep != blocks && !strings.HasPrefix(dep, blocks+"/") {
			t.Errorf("runtime/state/internal/blocks depends on %s; it imports nothing else of runtime/state", dep)
		}
	}
}

// TestStateImportsNoStore keeps the users' package a leaf under the store:
// runtime/state reaches the store only through the interfaces and the
// functions of internal/link, so that its documentation is its own and the
// store can change behind it.
func TestStateImportsNoStore(t *testing.T) {
	const state = "github.com/gpustate/gpustate/runtime/state"
	for _, dep := range goList(t, "-deps", "./runtime/state") {
		if strings.HasPrefix(dep, state+"/") && dep != state+"/internal/link" {
			t.Errorf("runtime/state depends on %s; it imports nothing of the store but internal/link", dep)
		}
	}
}
