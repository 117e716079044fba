package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	t.Setenv("GPUSTATE_BACKEND", "host")
	var out bytes.Buffer
	cfg := config{prompt: 40, generate: 24, drafts: 3, beams: 3, steps: 6}
	if err := run(&out, cfg); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"prefill: 40 prompt tokens",
		"its attention matches the host's",
		"pending bytes back to 0 B",
		"output identical to greedy decoding",
		"beam search: 3 beams x 6 steps",
		"memory pressure: a pool capped at 192.0 KiB holds 4 optional PromptCache states",
		"fits only by eviction: 2 of 4 PromptCache states evicted",
		"evicted prefix-0 answers state.ErrEvicted on Read, and its Release succeeds",
		"mandatory session's 32 rows read back intact; pool stats: 96.0 KiB evicted",
		"the pool holds 0 live handles",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestConfigChecked(t *testing.T) {
	for _, cfg := range []config{
		{prompt: 0, generate: 1, drafts: 1, beams: 1, steps: 1},
		{prompt: 500, generate: 100, drafts: 1, beams: 1, steps: 1},
		{prompt: 8, generate: 8, drafts: 1, beams: vocab + 1, steps: 1},
	} {
		if err := run(new(bytes.Buffer), cfg); err == nil {
			t.Errorf("run(%+v) = nil, want an error", cfg)
		}
	}
}
