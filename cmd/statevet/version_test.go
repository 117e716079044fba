package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/internal/version"
)

// TestVersionFull checks statevet -V=full: the line go vet parses (NAME
// version devel ... buildID=HASH, the hash of the executable, on which go
// vet keys its cache) carrying gpustate's version. TestVetTool shows go
// vet accepts it.
func TestVersionFull(t *testing.T) {
	if testing.Short() {
		t.Skip("builds statevet")
	}
	_, bin := tools(t)
	out := run(t, t.TempDir(), nil, bin, "-V=full")
	f := strings.Fields(out)
	if len(f) != 5 || f[1] != "version" || f[2] != "devel" {
		t.Fatalf("statevet -V=full printed %q, want NAME version devel gpustate-VERSION buildID=HASH", out)
	}
	if want := "gpustate-" + version.Release; !strings.HasPrefix(f[3], want) {
		t.Errorf("statevet -V=full names version %q, want %s...", f[3], want)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("buildID=%02x", sha256.Sum256(data)); f[4] != want {
		t.Errorf("statevet -V=full: %s, want %s (the executable's hash)", f[4], want)
	}
}
