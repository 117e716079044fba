package fileplan

import "testing"

// TestPlanOrdersDependenciesBelow checks the plan of small graphs: a chain
// plans with no arrow back up, a cycle of two with exactly one, and a file
// every other needs lands at the bottom.
func TestPlanOrdersDependenciesBelow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		edges []edge
		back  int
	}{
		{"chain", []string{"a", "b", "c"}, []edge{{2, 1, "x"}, {1, 0, "y"}}, 0},
		{"cycle", []string{"a", "b"}, []edge{{0, 1, "x"}, {1, 0, "y"}}, 1},
		{"hub", []string{"a", "b", "c", "base"}, []edge{{0, 3, "x"}, {1, 3, "x"}, {2, 3, "x"}, {0, 1, "y"}}, 0},
		{"two cycles", []string{"a", "b", "c", "d"}, []edge{{0, 1, "x"}, {1, 0, "x"}, {2, 3, "x"}, {3, 2, "x"}, {2, 0, "z"}}, 2},
	} {
		p := build(tc.files, tc.edges)
		if len(p.Back) != tc.back {
			t.Errorf("%s: %d arrows back up (%v), want %d", tc.name, len(p.Back), p.Back, tc.back)
		}
		if len(p.Files) != len(tc.files) || len(p.Arrows) != len(tc.edges) {
			t.Errorf("%s: plan has %d files and %d arrows, want %d and %d", tc.name, len(p.Files), len(p.Arrows), len(tc.files), len(tc.edges))
		}
		if tc.name == "hub" && p.Files[0] != "base" {
			t.Errorf("hub: plan starts at %s, want base", p.Files[0])
		}
	}
}

// TestLoadThisPackage loads a real package: fileplan itself has one file
// besides its tests, so no arrows at all.
func TestLoadThisPackage(t *testing.T) {
	p, err := Load(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Files) != 1 || len(p.Arrows) != 0 {
		t.Errorf("plan of fileplan: %v files, %v arrows", p.Files, p.Arrows)
	}
}
