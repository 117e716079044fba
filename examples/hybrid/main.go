// Command hybrid runs a small hybrid decoder (attention layers over a KV
// cache, gated linear recurrences as recurrent layers) whose state is one
// gpustate group: the KV cache and the recurrent state move together.
// It generates tokens by speculative decoding (drafts fed on a branch of
// the group, Merge on accept, group Rollback on reject) and checks them
// against plain greedy decoding computed without gpustate, then runs beam
// search over branches of the group and checks it against beam search
// over full copies. Sessions of one tenant then adopt a system prompt's
// KV rows together with the recurrent state at that prefix (AdoptPrefix on
// the group), compared with the same sessions without sharing. It prints
// what it did and the pool's bytes.
//
// It runs on the CUDA backend where a GPU is present and on the host
// backend elsewhere; GPUSTATE_BACKEND=host|cuda forces one. On the host
// backend the attention layers run as a Go kernel that reads the KV rows
// in place through the cache's block tables (kernel.go); elsewhere they
// read the rows to the host.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/gpustate/gpustate/examples/hybrid/decoder"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

func main() {
	cfg := config{}
	flag.IntVar(&cfg.prompt, "prompt", 24, "prompt `tokens`")
	flag.IntVar(&cfg.generate, "tokens", 48, "`tokens` to generate by speculative decoding")
	flag.IntVar(&cfg.drafts, "drafts", 4, "draft `tokens` per speculative round")
	flag.IntVar(&cfg.beams, "beams", 4, "beam search `width`")
	flag.IntVar(&cfg.steps, "steps", 8, "beam search `steps`")
	flag.IntVar(&cfg.sessions, "sessions", 8, "`sessions` of one tenant that share a system prompt")
	flag.IntVar(&cfg.system, "system", 64, "system prompt `tokens` the sessions share")
	flag.IntVar(&cfg.private, "private", 12, "private `tokens` of each session after the system prompt")
	flag.Parse()
	if err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "hybrid:", err)
		os.Exit(1)
	}
}

// config sizes the run.
type config struct {
	prompt, generate, drafts, beams, steps int
	sessions, system, private              int
}

func (c config) check() error {
	switch {
	case c.prompt < 1 || c.generate < 1 || c.drafts < 1 || c.beams < 1 || c.beams > vocab || c.steps < 1:
		return fmt.Errorf("need -prompt, -tokens, -drafts, -beams and -steps of at least 1, and -beams of at most %d", vocab)
	case c.prompt+c.generate+c.drafts > decoder.MaxTokens || c.prompt+c.steps > decoder.MaxTokens:
		return fmt.Errorf("the prompt and what is generated must fit the cache's %d tokens", decoder.MaxTokens)
	case c.sessions < 1 || c.system < 0 || c.private < 0 || c.system+c.private < 1 || c.system+c.private > decoder.MaxTokens:
		return fmt.Errorf("need -sessions of at least 1, and a system prompt and private tokens of at least 1 token that fit the cache's %d", decoder.MaxTokens)
	}
	return nil
}

// promptTokens is a deterministic prompt of n tokens.
func promptTokens(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32((i*7 + 3) % vocab)
	}
	return out
}

func run(w io.Writer, cfg config) (err error) {
	if err := cfg.check(); err != nil {
		return err
	}
	b, err := device.Open()
	if err != nil {
		return err
	}
	defer b.Close()
	p, err := state.NewPool(b, state.PoolOptions{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	kn, err := loadKernel(b)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, kn.Close()) }()
	if kn.attends() {
		fmt.Fprintf(w, "backend: %s; attention runs as the %s kernel, reading the KV rows in place through block tables\n", b.Name(), attendName)
	} else {
		fmt.Fprintf(w, "backend: %s; attention reads the KV rows to the host (no %s kernel on this backend)\n", b.Name(), attendName)
	}

	s, err := decoder.NewDecoderState(p, "session-1")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Release()) }()
	prompt := promptTokens(cfg.prompt)
	logits, err := prefill(kn, s, prompt)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "prefill: %d prompt tokens through %d recurrent and %d attention layers; the group holds %d KV rows and %d recurrent rows\n",
		len(prompt), decoder.RecLayers, decoder.AttnLayers, s.KV().Len(), s.Rec().Len())

	if err := speculative(w, kn, s, logits, prompt, cfg); err != nil {
		return err
	}
	if err := beamSearch(w, kn, p, s, logits, prompt, cfg); err != nil {
		return err
	}
	if err := sharing(w, b, kn, cfg); err != nil {
		return err
	}
	st := p.Stats()
	fmt.Fprintf(w, "before the session is released, the pool holds %d live handles: its 2 members\n", st.Live)
	return nil
}

// speculative runs speculative decoding on a branch of the session, so
// that beam search starts from the prompt, and checks it against greedy
// decoding.
func speculative(w io.Writer, kn *kernel, s *decoder.DecoderState, logits [vocab]float32, prompt []int32, cfg config) error {
	g, err := s.Branch()
	if err != nil {
		return err
	}
	defer g.Release()
	out, st, err := speculate(kn, g, prompt, logits, cfg.generate, cfg.drafts)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "speculative decoding: %d tokens in %d rounds of up to %d drafts: %d drafts accepted (Merge), %d rejected, %d group rollbacks moving KV rows and recurrent state together\n",
		len(out), st.rounds, cfg.drafts, st.accepted, st.rejected, st.rollbacks)
	want := greedy(prompt, cfg.generate)
	if !slices.Equal(out, want) {
		return fmt.Errorf("speculative decoding gave %v, greedy decoding %v", out, want)
	}
	fmt.Fprintf(w, "output identical to greedy decoding without gpustate: %v\n", out)
	if got, want := g.KV().Len(), len(prompt)+len(out); got != want {
		return fmt.Errorf("the KV cache holds %d rows after decoding, want %d", got, want)
	}
	return nil
}

// beamSearch runs beam search over group branches and checks it against
// beam search over full copies.
func beamSearch(w io.Writer, kn *kernel, p *state.Pool, s *decoder.DecoderState, logits [vocab]float32, prompt []int32, cfg config) error {
	hs, phys, logical, err := beams(kn, p, s, logits, cfg.beams, cfg.steps)
	if err != nil {
		return err
	}
	want := plainBeams(prompt, cfg.beams, cfg.steps)
	for i := range want {
		if i >= len(hs) || !slices.Equal(hs[i].tokens, want[i].tokens) || hs[i].score != want[i].score {
			return fmt.Errorf("beam %d: %v (%.6f), beam search without gpustate %v (%.6f)", i, hs[min(i, len(hs)-1)].tokens, hs[min(i, len(hs)-1)].score, want[i].tokens, want[i].score)
		}
	}
	fmt.Fprintf(w, "beam search: %d beams x %d steps over group branches, identical to beam search over full copies; best %v (log-probability %.3f)\n",
		cfg.beams, cfg.steps, hs[0].tokens, hs[0].score)
	fmt.Fprintf(w, "beam memory: the beams read as %d bytes, the pool holds %d physical bytes with the prompt's session (%.1fx less: branches share the prompt's blocks)\n",
		logical, phys, float64(logical)/float64(phys))
	return nil
}
