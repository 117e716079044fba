package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// kvSrc declares a state type KV beside helpers of the user's own named
// as stategen named its helpers once (readKV, kvLayout): the generated
// file declares none of them.
const kvSrc = `package kv

import "github.com/gpustate/gpustate/runtime/state"

// KV holds keys.
//
//state:contract
//state:growth append bound=8
//state:owner session
type KV struct {
	Keys []int32
}

// kvLayout is the user's own.
var kvLayout = "mine"

// readKV is the user's own.
func readKV(s *KVState) (KV, error) { return s.Read(0, s.Len()) }

var _ = state.Version(0)
`

const kvTest = `package kv

import (
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

func TestKV(t *testing.T) {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := NewKVState(p, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if err := s.Append(KV{Keys: []int32{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	rows, err := readKV(s)
	if err != nil || len(rows.Keys) != 3 || rows.Keys[2] != 3 || kvLayout != "mine" {
		t.Fatalf("readKV = %v, %v", rows, err)
	}
}
`

// TestUserHelpersDoNotClash generates KV beside the user's readKV and
// kvLayout, and runs a test of the package through the handles.
func TestUserHelpersDoNotClash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	newModule(t, map[string]string{"kv/kv.go": kvSrc, "kv/kv_test.go": kvTest})
	if code, out := stategen(t, "./..."); code != 0 {
		t.Fatalf("stategen: exit %d\n%s", code, out)
	}
	if out, err := exec.Command("go", "test", "./...").CombinedOutput(); err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
}

// TestUserDeclarationClashes checks that a name of the user's that the
// generated file would declare is an error at the user's declaration, and
// that nothing is written.
func TestUserDeclarationClashes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	dir := newModule(t, map[string]string{
		"a/a.go": `package a

// A is a state.
//
//state:contract
//state:growth append bound=8
//state:owner session
type A struct {
	X []int32
}
`,
		"a/mine.go": `package a

// AState is the user's own.
type AState struct{}

func (s *ASpans) Len() int { return 0 }

func (s *AState) Append(rows A) error { return nil }
`,
	})
	code, out := stategen(t, "./...")
	if code != 1 {
		t.Fatalf("exit %d, want 1; output:\n%s", code, out)
	}
	for _, want := range []string{
		`(?m)^a/mine\.go:4:6: AState is declared here, and stategen generates AState for state type A; rename it$`,
		`(?m)^a/mine\.go:8:18: AState\.Append is declared here, and stategen generates AState\.Append for state type A; rename it$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`ASpans\.Len`).MatchString(out) {
		t.Errorf("a method the generated ASpans does not declare is reported:\n%s", out)
	}
	if exists(filepath.Join(dir, "a", "a_state.go")) {
		t.Error("wrote a_state.go despite the clash")
	}
}
