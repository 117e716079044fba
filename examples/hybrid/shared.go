package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/gpustate/gpustate/examples/hybrid/decoder"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// Sessions of one tenant open with the same system prompt. A hybrid
// decoder cannot share the KV rows of that prompt alone: the recurrent
// state after the prompt goes with them. The group registers the state
// of every member at each KV block boundary, and a session's AdoptPrefix
// restores both members at the longest registered prefix, so the session
// computes only the rest.

// sharedRun is what the sessions of one run did.
type sharedRun struct {
	computed, adopted int   // rows fed through the model, rows adopted
	physical          int64 // the pool's physical bytes with every session live
	cached            int64 // the pool's CachedBytes after the sessions' release
}

// sessionPrompt is session i's prompt: the system prompt, then its own.
func sessionPrompt(system []int32, i, private int) []int32 {
	out := slices.Clone(system)
	for j := range private {
		out = append(out, int32((i*13+j*5+11)%vocab))
	}
	return out
}

// runSessions prefills every session's prompt in a fresh pool on b, in
// domain (none: NewDecoderState), and checks each session's scores after
// its prompt against the reference computed without gpustate.
func runSessions(b device.Backend, kn *kernel, system []int32, sessions, private int, domain state.Domain) (_ sharedRun, err error) {
	var run sharedRun
	p, err := state.NewPool(b, state.PoolOptions{})
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	var live []*decoder.DecoderState
	release := func() error {
		var errs []error
		for _, s := range live {
			errs = append(errs, s.Release())
		}
		live = nil
		return errors.Join(errs...)
	}
	defer func() { err = errors.Join(err, release()) }()
	for i := range sessions {
		owner := state.Owner(fmt.Sprintf("session-%d", i))
		//statevet:ignore stcleanup reason="the deferred release() frees every session in live, which the analysis does not follow through the closure"
		s, err := openSession(p, owner, domain)
		if err != nil {
			return run, err
		}
		live = append(live, s)
		prompt := sessionPrompt(system, i, private)
		// At least the last token is fed: its scores start the reply.
		n, err := s.AdoptPrefix(prompt[:len(prompt)-1])
		if err != nil {
			return run, err
		}
		logits, err := prefill(kn, s, prompt[n:])
		if err != nil {
			return run, err
		}
		run.adopted += n
		run.computed += len(prompt) - n
		ref := newPlain()
		var want [vocab]float32
		for _, t := range prompt {
			want = ref.feed(t)
		}
		if logits != want {
			return run, fmt.Errorf("session %d: the scores after its prompt differ from those computed without gpustate", i)
		}
	}
	run.physical = p.Stats().PhysicalBytes
	if err := release(); err != nil {
		return run, err
	}
	run.cached = p.Stats().CachedBytes
	return run, nil
}

// sharing runs the sessions with and without a domain and prints the rows
// adopted and the bytes saved.
func sharing(w io.Writer, b device.Backend, kn *kernel, cfg config) error {
	system := promptTokens(cfg.system)
	with, err := runSessions(b, kn, system, cfg.sessions, cfg.private, "tenant-a")
	if err != nil {
		return err
	}
	without, err := runSessions(b, kn, system, cfg.sessions, cfg.private, "")
	if err != nil {
		return err
	}
	total := with.computed + with.adopted
	fmt.Fprintf(w, "prefix sharing: %d sessions of tenant-a, each a %d-token system prompt and %d tokens of its own\n", cfg.sessions, cfg.system, cfg.private)
	fmt.Fprintf(w, "prefill: %d rows computed, %d adopted with the recurrent state at their prefix (AdoptPrefix on the group): %d%% of %d rows skipped; every session's scores equal those computed without gpustate\n",
		with.computed, with.adopted, 100*with.adopted/max(total, 1), total)
	fmt.Fprintf(w, "memory: physical %d bytes shared, %d bytes with NewDecoderState (%.1fx less); after the sessions' release the pool keeps %d bytes of registered states (optional retention)\n",
		with.physical, without.physical, float64(without.physical)/float64(max(with.physical, 1)), with.cached)
	if without.adopted != 0 {
		return fmt.Errorf("sessions without a domain adopted %d rows", without.adopted)
	}
	return nil
}

// openSession makes a session's group: shared within domain, or, with no
// domain, on its own.
func openSession(p *state.Pool, owner state.Owner, domain state.Domain) (*decoder.DecoderState, error) {
	if domain != "" {
		return decoder.NewDecoderStateShared(p, owner, domain)
	}
	return decoder.NewDecoderState(p, owner)
}
