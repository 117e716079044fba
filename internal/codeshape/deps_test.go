package codeshape

import (
	"os/exec"
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
