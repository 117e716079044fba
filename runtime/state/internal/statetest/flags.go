package statetest

import (
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The model tests' flags, registered once for the test binary of
// runtime/state (both its packages, state and state_test, import this one).
// They follow -args on the go test command line:
//
//	go test ./runtime/state/internal/store -run '^TestModel$/^3$' -args -model.seed=3 -model.steps=5000
var (
	stepsFlag = flag.Int("model.steps", 0,
		"steps per seed of the model tests; 0 runs each test's default (make fuzz runs them long)")
	seedFlag seedValue
)

func init() {
	flag.Var(&seedFlag, "model.seed", "run the model tests for this one seed only (a failure prints it)")
}

// seedValue is -model.seed: a seed, and whether one was given (0 is a seed).
type seedValue struct {
	n   uint64
	set bool
}

func (s *seedValue) String() string {
	if s == nil || !s.set {
		return ""
	}
	return strconv.FormatUint(s.n, 10)
}

func (s *seedValue) Set(v string) error {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return err
	}
	s.n, s.set = n, true
	return nil
}

// Steps returns the steps per seed of a model test: def, or when
// -model.steps is given, that divided by div (at least 1). A test whose
// step costs more than most divides: the group models by 10, so that one
// -model.steps runs every model for about as long.
func Steps(def, div int) int {
	if *stepsFlag <= 0 {
		return def
	}
	return max(*stepsFlag/max(div, 1), 1)
}

// StepsSet reports whether -model.steps was given.
func StepsSet() bool { return *stepsFlag > 0 }

// Seed returns the seed -model.seed names, and whether it was given.
func Seed() (uint64, bool) { return seedFlag.n, seedFlag.set }

// Seeds returns the seeds a model test runs: the one -model.seed names,
// or def.
func Seeds(def ...uint64) []uint64 {
	if n, ok := Seed(); ok {
		return []uint64{n}
	}
	return def
}

// Replay returns the command that runs t again for seed alone: t's own
// (sub)test by an anchored -run pattern, -model.seed, and -model.steps
// when -model.steps was given or steps is not 0 (a model that fails at
// step s replays in s+1 steps). goFlags go before the package, as in
// "-race".
func Replay(t testing.TB, seed uint64, steps int, goFlags ...string) string {
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := []string{"go test"}
	cmd = append(cmd, goFlags...)
	cmd = append(cmd, "./runtime/state/internal/store", "-run", "'"+strings.Join(parts, "/")+"'",
		"-args", fmt.Sprintf("-model.seed=%d", seed))
	switch {
	case steps > 0:
		cmd = append(cmd, fmt.Sprintf("-model.steps=%d", steps))
	case StepsSet():
		cmd = append(cmd, fmt.Sprintf("-model.steps=%d", *stepsFlag))
	}
	return strings.Join(cmd, " ")
}

// LogReplay has t log, when it fails, the command that replays seed
// (Replay, with the steps of the run): for models whose failures are
// t.Fatalf calls that name the seed and step but not the command.
func LogReplay(t testing.TB, seed uint64, goFlags ...string) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("replay: " + Replay(t, seed, 0, goFlags...))
		}
	})
}
