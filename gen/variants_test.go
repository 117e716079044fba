package gen

import (
	"go/build/constraint"
	"runtime"
	"slices"
	"testing"
)

func TestConstraintFile(t *testing.T) {
	for expr, want := range map[string]string{
		"cuda":                    "kv_state_cuda.go",
		"!cuda":                   "kv_state_notcuda.go",
		"cuda && !race":           "kv_state_cuda_and_notrace.go",
		"(cuda || rocm) && gpu":   "kv_state_cuda_or_rocm_and_gpu.go",
		"cuda || " + runtime.GOOS: "kv_state_cuda_or_" + runtime.GOOS + "_tags.go",
		"go1.24":                  "kv_state_go124.go",
	} {
		e, err := constraint.Parse("//go:build " + expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := constraintFile("KV", e); got != want {
			t.Errorf("constraintFile(KV, %s) = %q, want %q", expr, got, want)
		}
	}
}

func TestSatisfy(t *testing.T) {
	for _, tc := range []struct {
		expr string
		tags []string
		ok   bool
	}{
		{"cuda", []string{"cuda"}, true},
		{"cuda && !rocm", []string{"cuda"}, true},
		{"cuda && rocm", []string{"cuda", "rocm"}, true},
		{"!cuda", nil, false}, // the current build includes it: nothing to load
		{"cuda && plan9 && !" + runtime.GOOS, nil, false},
		{"cuda && " + runtime.GOOS, []string{"cuda"}, true},
		{"a && b && c && d && e && f && g && h && i", nil, false}, // too many to try
	} {
		e, err := constraint.Parse("//go:build " + tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		tags, ok := satisfy(e)
		if ok != tc.ok || !slices.Equal(tags, tc.tags) {
			t.Errorf("satisfy(%s) = %v, %v; want %v, %v", tc.expr, tags, ok, tc.tags, tc.ok)
		}
	}
}

func TestOutOfReach(t *testing.T) {
	other := "windows"
	if runtime.GOOS == other {
		other = "linux"
	}
	for src, want := range map[string]bool{
		"package p\n":                                                   false,
		"//go:build cuda\n\npackage p\n":                                false,
		"//go:build !cuda\n\npackage p\n":                               false,
		"//go:build ignore\n\npackage p\n":                              false,
		"//go:build " + other + "\n\npackage p\n":                       true,
		"//go:build cuda && " + other + "\n\npackage p\n":               true,
		"//go:build cuda || " + other + "\n\npackage p\n":               false,
		"// Code generated.\n\n//go:build " + other + "\n\npackage p\n": true,
	} {
		if got := OutOfReach([]byte(src)); got != want {
			t.Errorf("OutOfReach(%q) = %v, want %v", src, got, want)
		}
	}
}
