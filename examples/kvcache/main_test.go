package main

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

func TestRun(t *testing.T) {
	t.Setenv("GPUSTATE_BACKEND", "host")
	var out bytes.Buffer
	cfg := config{prompt: 40, generate: 24, drafts: 3, beams: 3, steps: 6, sessions: 3, system: 40, private: 8}
	if err := run(&out, cfg); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"prefill: 40 prompt tokens",
		"its attention matches the host's",
		"pending bytes back to 0 B",
		"async: 40 prompt rows appended on a stream by 3 AppendAsync calls and read back by ReadAsync in stream order, the host waiting once: rows identical true",
		"ReadFields: the 40 tokens alone (160 bytes copied, not 82080), equal to the prompt true",
		"output identical to greedy decoding",
		"beam search: 3 beams x 6 steps",
		// Blocks of 16 rows: a session adopts the system prompt's 2 full
		// blocks, 32 of its 48 rows, and computes the other 16.
		"prefix sharing: 3 sessions of tenant-a, each a 40-token system prompt and 8 tokens of its own",
		"prefill: 80 rows computed, 64 adopted by AdoptPrefix instead of computed: 44% of 144 rows skipped",
		"every session's 48 rows read back identical in both runs",
		"a session of tenant-b with the same prompt adopts 0 rows",
		"memory pressure: a pool capped at 192.5 KiB holds 4 optional PromptCache states",
		"fits only by eviction: 2 of 4 PromptCache states evicted",
		"evicted prefix-0 answers state.ErrEvicted on Read, and its Release succeeds",
		"mandatory session's 32 rows read back intact; pool stats: 96.0 KiB evicted",
		"every state released: Trim gives 192.5 KiB back to the device, 0 B stays reserved",
		"host tier: 12 prompts of 16 rows, device memory for 4, each visited 3 times in turn",
		"prompt rows recomputed: 576 without a host tier, 0 with one",
		"the pool holds 0 live handles",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	m := sharedBytes.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("output shows no physical bytes of the sharing step:\n%s", out.String())
	}
	if ratio, err := strconv.ParseFloat(m[1], 64); err != nil || ratio <= 1 {
		t.Errorf("sharing step: physical bytes %sx less with sharing, want more than 1x", m[1])
	}
}

var sharedBytes = regexp.MustCompile(`physical \S+ \S+ shared, \S+ \S+ with NewKVCacheState in a fresh pool \(([0-9.]+)x less\)`)

// TestSharedSessions checks the sharing step's runs themselves: with a
// domain every session after the first adopts the system prompt's full
// blocks and the pool stores them once; without, nothing is adopted.
func TestSharedSessions(t *testing.T) {
	t.Setenv("GPUSTATE_BACKEND", "host")
	b, err := device.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const sessions, system, private = 5, 70, 10 // 4 full blocks of system prompt
	prompts := sharedPrompts(sessions, system, private)
	with, err := prefillSessions(b, prompts, tenantA)
	if err != nil {
		t.Fatal(err)
	}
	without, err := prefillSessions(b, prompts, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := (sessions - 1) * 64; with.adopted != want || with.computed != sessions*(system+private)-want {
		t.Errorf("with sharing: %d rows adopted, %d computed; want %d adopted", with.adopted, with.computed, want)
	}
	if without.adopted != 0 || without.computed != sessions*(system+private) {
		t.Errorf("without sharing: %d rows adopted, %d computed; want none adopted", without.adopted, without.computed)
	}
	if with.logical != without.logical || with.physical >= without.physical {
		t.Errorf("logical %d and %d bytes, physical %d with sharing and %d without: want equal logical, less physical with sharing",
			with.logical, without.logical, with.physical, without.physical)
	}
	if with.otherTenantAdopted != 0 {
		t.Errorf("a session of %s adopted %d rows of %s's prefix, want 0", tenantB, with.otherTenantAdopted, tenantA)
	}
	if with.cached == 0 || with.forgotten != with.cached || without.cached != 0 {
		t.Errorf("cached after release: %d bytes, ForgetPrefixes gave back %d; without sharing %d cached: want equal and nonzero, and 0",
			with.cached, with.forgotten, without.cached)
	}
	for i, prompt := range prompts {
		want := rows(prompt, 0)
		got := with.rows[i]
		if !slices.Equal(got.Keys, want.Keys) || !slices.Equal(got.Values, want.Values) || !slices.Equal(got.Token, want.Token) {
			t.Errorf("session %d: the rows read back with sharing are not the rows computed for its prompt", i)
		}
	}
}

func TestConfigChecked(t *testing.T) {
	for _, cfg := range []config{
		{prompt: 0, generate: 1, drafts: 1, beams: 1, steps: 1},
		{prompt: 500, generate: 100, drafts: 1, beams: 1, steps: 1},
		{prompt: 8, generate: 8, drafts: 1, beams: vocab + 1, steps: 1},
		{prompt: 8, generate: 8, drafts: 1, beams: 1, steps: 1, sessions: 0, system: 8, private: 8},
		{prompt: 8, generate: 8, drafts: 1, beams: 1, steps: 1, sessions: 2, system: 0, private: 0},
		{prompt: 8, generate: 8, drafts: 1, beams: 1, steps: 1, sessions: 2, system: 500, private: 13},
	} {
		if err := run(new(bytes.Buffer), cfg); err == nil {
			t.Errorf("run(%+v) = nil, want an error", cfg)
		}
	}
}
