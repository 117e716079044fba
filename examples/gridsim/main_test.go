package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/runtime/state"
)

func TestRun(t *testing.T) {
	t.Setenv("GPUSTATE_BACKEND", "host")
	var out bytes.Buffer
	if err := run(&out, config{steps: 40, back: 30, old: 2}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"stepped 40 times by the diffusion kernel",
		"history: 4 checkpoints",
		// every=8 keep=4: the checkpoints of steps 16, 24, 32 and 40 are kept.
		"Plan: seed from the checkpoint of step 24, apply 6 deltas",
		"alternative: the checkpoint of step 16, 14 deltas",
		"the snapshot is identical to the field recomputed from scratch (30 steps), bit for bit",
		"retained: steps 16..40 reconstruct bit for bit; steps 0..15 answer state.ErrNotRetained",
		"At(step 2): state: Field.At: version 2 is not in the retained history",
		"put the head back at step 30",
		"re-stepped 31..40",
		"identical to the first run bit for bit",
		"the pool holds 0 live handles",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestShortRun checks a run whose whole history is still kept.
func TestShortRun(t *testing.T) {
	t.Setenv("GPUSTATE_BACKEND", "host")
	var out bytes.Buffer
	if err := run(&out, config{steps: 12, back: 5, old: 1}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"Plan: seed from the checkpoint of step 0, apply 5 deltas",
		"retained: steps 0..12 reconstruct bit for bit: the whole run is still kept",
		"At(step 1): still retained",
		"re-stepped 6..12",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStepBackTooFar checks that stepping back past the kept window is
// state.ErrNotRetained, not a wrong field.
func TestStepBackTooFar(t *testing.T) {
	t.Setenv("GPUSTATE_BACKEND", "host")
	err := run(new(bytes.Buffer), config{steps: 40, back: 3, old: 2})
	if !errors.Is(err, state.ErrNotRetained) {
		t.Fatalf("run = %v, want state.ErrNotRetained", err)
	}
}

func TestConfigChecked(t *testing.T) {
	for _, cfg := range []config{
		{steps: 0, back: 0, old: 0},
		{steps: 10, back: 11, old: 0},
		{steps: 10, back: 5, old: -1},
	} {
		if err := run(new(bytes.Buffer), cfg); err == nil {
			t.Errorf("run(%+v) = nil, want an error", cfg)
		}
	}
}

// TestHeaterStaysInside checks the heater's loop stays on the grid and
// moves one cell per step.
func TestHeaterStaysInside(t *testing.T) {
	px, py := heater(0)
	for s := 1; s < 1000; s++ {
		x, y := heater(s)
		if x < 0 || x >= side || y < 0 || y >= side {
			t.Fatalf("heater(%d) = %d, %d: off the grid", s, x, y)
		}
		if d := abs(x-px) + abs(y-py); d != 1 {
			t.Fatalf("heater moved %d cells at step %d", d, s)
		}
		px, py = x, y
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
