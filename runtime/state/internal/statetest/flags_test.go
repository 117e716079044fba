package statetest

import (
	"strings"
	"testing"
)

func TestReplay(t *testing.T) {
	t.Run("a b", func(t *testing.T) {
		got := Replay(t, 7, 12, "-race")
		want := `go test -race ./runtime/state/internal/store -run '^TestReplay$/^a_b$' -args -model.seed=7 -model.steps=12`
		if got != want {
			t.Errorf("Replay:\n got %s\nwant %s", got, want)
		}
	})
	if got := Replay(t, 0, 0); strings.Contains(got, "-model.steps") != StepsSet() {
		t.Errorf("Replay without steps: %s", got)
	}
}

func TestSeedValue(t *testing.T) {
	var s seedValue
	if s.String() != "" || s.set {
		t.Fatalf("zero seedValue: %q set=%v", s.String(), s.set)
	}
	if err := s.Set("0"); err != nil || !s.set || s.n != 0 {
		t.Fatalf("Set(0): %v, %+v: seed 0 is a seed", err, s)
	}
	if err := s.Set("x"); err == nil {
		t.Fatal("Set(x): no error")
	}
}

func TestStepsDefault(t *testing.T) {
	if StepsSet() {
		t.Skip("-model.steps given")
	}
	if got := Steps(40, 10); got != 40 {
		t.Errorf("Steps(40, 10) without -model.steps = %d, want 40", got)
	}
	if got := Seeds(1, 2); len(got) != 2 {
		if _, ok := Seed(); !ok {
			t.Errorf("Seeds(1, 2) without -model.seed = %v", got)
		}
	}
}
