package version

import (
	"os"
	"regexp"
	"runtime/debug"
	"testing"
)

// TestFromBuildInfo checks which version a binary reports for each way it
// can be built.
func TestFromBuildInfo(t *testing.T) {
	dev := Release + "-devel"
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"checkout", debug.BuildInfo{Main: debug.Module{Path: Module, Version: "(devel)"}}, dev},
		{"go install @v0.2.1", debug.BuildInfo{Main: debug.Module{Path: Module, Version: "v0.2.1"}}, "v0.2.1"},
		{"tool directive", debug.BuildInfo{
			Main: debug.Module{Path: "example.com/chat", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "golang.org/x/tools", Version: "v0.52.0"}, {Path: Module, Version: "v0.3.0"}},
		}, "v0.3.0"},
		{"replaced by a checkout", debug.BuildInfo{
			Main: debug.Module{Path: "example.com/chat", Version: "(devel)"},
			Deps: []*debug.Module{{Path: Module, Version: "v0.0.0", Replace: &debug.Module{Path: "/src/gpustate"}}},
		}, dev},
		{"replaced by a fork's version", debug.BuildInfo{
			Main: debug.Module{Path: "example.com/chat", Version: "(devel)"},
			Deps: []*debug.Module{{Path: Module, Version: "v0.3.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.3.1"}}},
		}, "v0.3.1"},
		{"not linked", debug.BuildInfo{Main: debug.Module{Path: "example.com/other", Version: "v1.0.0"}}, dev},
	} {
		if got := fromBuildInfo(&tc.bi); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestChangelog checks that Release is the newest version CHANGELOG.md
// describes.
func TestChangelog(t *testing.T) {
	data, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## (v\d+\.\d+\.\d+\S*)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("CHANGELOG.md has no ## vX.Y.Z heading")
	}
	if string(m[1]) != Release {
		t.Errorf("CHANGELOG.md's newest version is %s, version.Release is %s", m[1], Release)
	}
}
