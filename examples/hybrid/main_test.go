package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/examples/hybrid/decoder"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// testPool returns a pool on the host backend and the attention kernel
// loaded on it; in -short mode the kernel is left out (attention on the
// host), so the host path runs.
func testPool(t *testing.T) (*state.Pool, *kernel) {
	t.Helper()
	b := device.Host()
	p, err := state.NewPool(b, state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kn := &kernel{b: b}
	if !testing.Short() {
		if kn, err = loadKernel(b); err != nil || !kn.attends() {
			t.Fatalf("the host backend runs no %s kernel: %v", attendName, err)
		}
	}
	t.Cleanup(func() {
		if err := kn.Close(); err != nil {
			t.Error(err)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		b.Close()
	})
	return p, kn
}

// TestKernelMatchesHost: the kernel's attention over rows in place equals
// the host's over rows read back, to the bit, for every layer.
func TestKernelMatchesHost(t *testing.T) {
	p, kn := testPool(t)
	if !kn.attends() {
		t.Skip("-short: no kernel")
	}
	s, err := decoder.NewDecoderState(p, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if _, err := prefill(&kernel{b: p.Backend()}, s, promptTokens(40)); err != nil {
		t.Fatal(err)
	}
	rows, err := s.KV().Read(0, s.KV().Len())
	if err != nil {
		t.Fatal(err)
	}
	tab, err := s.KV().BlockTable()
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Release()
	kc, _ := tab.Column(0)
	vc, _ := tab.Column(1)
	dev := tables{kn: kn, keys: kc.Ptr, values: vc.Ptr, perBlock: kc.RowsPerBlock, rows: s.KV().Len()}
	host := context{keys: rows.Keys, values: rows.Values}
	q, k, v := model.embed[1], model.embed[2], model.embed[3]
	for l := range decoder.AttnLayers {
		a, err := dev.attend(l, &q, &k, &v)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := host.attend(l, &q, &k, &v)
		if a != b {
			t.Errorf("layer %d: kernel %v, host %v", l, a, b)
		}
	}
}

func TestRun(t *testing.T) {
	t.Setenv("GPUSTATE_BACKEND", "host")
	var out bytes.Buffer
	if err := run(&out, config{prompt: 16, generate: 24, drafts: 3, beams: 3, steps: 5, sessions: 3, system: 40, private: 8}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"attention runs as the hybrid_attend kernel, reading the KV rows in place through block tables",
		"prefill: 16 prompt tokens through 2 recurrent and 2 attention layers; the group holds 16 KV rows and 2 recurrent rows",
		"speculative decoding: 24 tokens in",
		"output identical to greedy decoding without gpustate",
		"beam search: 3 beams x 5 steps over group branches, identical to beam search over full copies",
		// Blocks of 16 rows: a session after the first adopts the system
		// prompt's 2 full blocks, 32 of its 48 rows, and computes 16.
		"prefix sharing: 3 sessions of tenant-a, each a 40-token system prompt and 8 tokens of its own",
		"prefill: 80 rows computed, 64 adopted with the recurrent state at their prefix",
		"every session's scores equal those computed without gpustate",
		"before the session is released, the pool holds 2 live handles: its 2 members",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSpeculativeEqualsGreedy checks, for several draft lengths, that
// speculative decoding over the group gives greedy decoding's tokens, that
// it both accepted and rejected drafts, and that it leaves the group at
// the prompt and the tokens it emitted, every handle released.
func TestSpeculativeEqualsGreedy(t *testing.T) {
	p, kn := testPool(t)
	prompt := promptTokens(20)
	want := greedy(prompt, 40)
	for _, k := range []int{1, 2, 4, 7} {
		s, err := decoder.NewDecoderState(p, "s")
		if err != nil {
			t.Fatal(err)
		}
		logits, err := prefill(kn, s, prompt)
		if err != nil {
			t.Fatal(err)
		}
		got, st, err := speculate(kn, s, prompt, logits, 40, k)
		if err != nil {
			t.Fatalf("k=%d: %v", k, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("k=%d: speculative %v, greedy %v", k, got, want)
		}
		if k > 1 && (st.accepted == 0 || st.rollbacks == 0) {
			t.Errorf("k=%d: %+v: no draft accepted or none rejected; the test covers neither Merge alone nor Rollback", k, st)
		}
		// The recurrent state is the one greedy decoding ends with.
		ref := newPlain()
		for _, tok := range append(slices.Clone(prompt), want...) {
			ref.feed(tok)
		}
		h, err := s.Rec().Read(0, decoder.RecLayers)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(h.H, ref.h) || s.KV().Len() != len(prompt)+len(want) {
			t.Errorf("k=%d: the group's state after decoding is not greedy decoding's", k)
		}
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
		if live := p.Stats().Live; live != 0 {
			t.Fatalf("k=%d: %d handles live after the session's release", k, live)
		}
	}
}

// TestBeamsEqualPlain checks beam search over group branches against beam
// search over full copies, for several widths.
func TestBeamsEqualPlain(t *testing.T) {
	p, kn := testPool(t)
	prompt := promptTokens(12)
	s, err := decoder.NewDecoderState(p, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	logits, err := prefill(kn, s, prompt)
	if err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{1, 2, 5} {
		got, _, _, err := beams(kn, p, s, logits, width, 6)
		if err != nil {
			t.Fatal(err)
		}
		want := plainBeams(prompt, width, 6)
		if len(got) != len(want) {
			t.Fatalf("width %d: %d beams, want %d", width, len(got), len(want))
		}
		for i := range want {
			if !slices.Equal(got[i].tokens, want[i].tokens) || got[i].score != want[i].score {
				t.Errorf("width %d beam %d: %v %v, want %v %v", width, i, got[i].tokens, got[i].score, want[i].tokens, want[i].score)
			}
		}
		if width == 1 && !slices.Equal(got[0].tokens, greedy(prompt, 6)) {
			t.Errorf("a beam of width 1 is not greedy decoding: %v", got[0].tokens)
		}
	}
}

// TestRecurrentReplay checks the recurrent state's replayed history: At
// rebuilds the state after token t from a checkpoint by running the
// recorded steps (stepRows) again, and the rows equal those of decoding
// without gpustate after t tokens, to the bit.
func TestRecurrentReplay(t *testing.T) {
	p, kn := testPool(t)
	s, err := decoder.NewDecoderState(p, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	prompt := promptTokens(40)
	ref := newPlain()
	var versions []state.Version
	var want [][]float32
	for _, tok := range prompt {
		if _, err := feed(kn, s, tok); err != nil {
			t.Fatal(err)
		}
		ref.feed(tok)
		versions = append(versions, s.Rec().Version())
		want = append(want, slices.Clone(ref.h))
	}
	for _, i := range []int{0, 15, 16, 27, 39} {
		past, err := s.Rec().At(versions[i])
		if err != nil {
			t.Fatalf("At(the version after token %d): %v", i, err)
		}
		got, err := past.Read(0, decoder.RecLayers)
		past.Release()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.H, want[i]) {
			t.Errorf("after token %d, rebuilt by replay: %v...; decoding without gpustate: %v...", i, got.H[:4], want[i][:4])
		}
	}
}
