package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gpustate/gpustate/examples/hybrid/decoder"
	"github.com/gpustate/gpustate/runtime/state"
)

// feed runs token through the model on a session's group: the attention
// layers read the KV cache (in place, through its block tables, when the
// kernel runs on this backend; else copied to the host), the recurrent
// layers the recurrent state; then it steps the recurrent state with the
// layers' inputs (StepHost: the history keeps the inputs), appends the token's
// KV row, and returns the next token's scores.
func feed(kn *kernel, s *decoder.DecoderState, token int32) (_ [vocab]float32, err error) {
	kv, rec := s.KV(), s.Rec()
	h, err := rec.Read(0, decoder.RecLayers)
	if err != nil {
		return [vocab]float32{}, err
	}
	var ctx attender
	if kn.attends() && kv.Len() > 0 {
		tab, err := kv.BlockTable()
		if err != nil {
			return [vocab]float32{}, err
		}
		defer func() { err = errors.Join(err, tab.Release()) }()
		kc, err := tab.Column(0)
		if err != nil {
			return [vocab]float32{}, err
		}
		vc, err := tab.Column(1)
		if err != nil {
			return [vocab]float32{}, err
		}
		ctx = tables{kn: kn, keys: kc.Ptr, values: vc.Ptr, perBlock: kc.RowsPerBlock, rows: kv.Len()}
	} else {
		rows, err := kv.Read(0, kv.Len())
		if err != nil {
			return [vocab]float32{}, err
		}
		ctx = context{keys: rows.Keys, values: rows.Values}
	}
	in := decoder.RecInput{X: make([]float32, decoder.RecLayers*dim)}
	row, logits, err := forward(ctx, h.H, token, kv.Len(), in.X)
	if err != nil {
		return [vocab]float32{}, err
	}
	// The recurrent state first: an append that fills a KV block registers
	// every member's state as it is then, for sessions that share the
	// prefix (NewDecoderStateShared).
	if err := rec.StepHost(in, stepRows); err != nil {
		return [vocab]float32{}, err
	}
	return logits, kv.Append(row)
}

// stepRows is the recurrent layers' step, as StepHost runs it: rows holds
// every layer's state, one row per layer, and each layer's recurrence
// rewrites its row from its input row. StepHost copies the rows out of
// device memory and back where it must (on the host backend, rows are the
// state's own bytes: nothing is copied). The history keeps in, not the
// rows: a rollback to a version rebuilt by At, or a failed step, runs the
// step again on the recorded input, and recur computes the same rows from
// the same rows and input (the contract's verify=hash checks that it
// does).
func stepRows(rows *decoder.Recurrent, in decoder.RecInput) error {
	for layer := range decoder.RecLayers {
		recur(rows.H[layer*dim:(layer+1)*dim], layer, in.X[layer*dim:(layer+1)*dim])
	}
	return nil
}

// prefill feeds the prompt and returns the scores after its last token.
func prefill(kn *kernel, s *decoder.DecoderState, prompt []int32) ([vocab]float32, error) {
	var logits [vocab]float32
	for _, t := range prompt {
		var err error
		if logits, err = feed(kn, s, t); err != nil {
			return logits, err
		}
	}
	return logits, nil
}

// specStats counts what speculative decoding did.
type specStats struct {
	rounds, accepted, rejected, rollbacks int
}

// speculate generates n tokens by speculative decoding from the state s
// and the scores after its last token. Each round the draft model proposes
// up to k tokens, the first being the target's own choice; they are fed on
// a branch of the group, a cut taken after each. The target's choice after
// each draft decides how many are accepted: the group merges the branch
// (Merge on accept) and, when a draft was rejected, rolls back to the cut
// after the last accepted one (Rollback on reject): the KV rows and the
// recurrent state move back together. The output equals greedy decoding.
func speculate(kn *kernel, s *decoder.DecoderState, prompt []int32, logits [vocab]float32, n, k int) ([]int32, specStats, error) {
	var out []int32
	var st specStats
	next := argmax(logits)
	for len(out) < n {
		history := append(append(slices.Clone(prompt), out...), next)
		drafts := []int32{next}
		for len(drafts) < min(k, n-len(out)) {
			d := draftNext(history)
			drafts = append(drafts, d)
			history = append(history, d)
		}
		accepted, choice, err := verify(kn, s, drafts)
		if err != nil {
			return out, st, err
		}
		st.rounds++
		st.accepted += accepted - 1 // the first is the target's own choice
		if accepted < len(drafts) {
			st.rejected += len(drafts) - accepted
			st.rollbacks++
		}
		out = append(out, drafts[:accepted]...)
		next = choice
	}
	return out, st, nil
}

// verify feeds drafts on a branch of s, merges it, and rolls s back to the
// cut after the drafts the target accepts. It returns how many it accepted
// and the target's choice after them.
func verify(kn *kernel, s *decoder.DecoderState, drafts []int32) (accepted int, choice int32, err error) {
	br, err := s.Branch()
	if err != nil {
		return 0, 0, err
	}
	defer br.Release()
	var cuts []*decoder.DecoderSnapshot
	defer func() {
		for _, c := range cuts {
			err = errors.Join(err, c.Release())
		}
	}()
	var choices []int32
	for _, d := range drafts {
		logits, err := feed(kn, br, d)
		if err != nil {
			return 0, 0, err
		}
		cut, err := br.Snapshot()
		if err != nil {
			return 0, 0, err
		}
		cuts = append(cuts, cut)
		choices = append(choices, argmax(logits))
	}
	accepted = 1
	for accepted < len(drafts) && drafts[accepted] == choices[accepted-1] {
		accepted++
	}
	if err := s.Merge(br); err != nil {
		return 0, 0, fmt.Errorf("merge of the drafts: %w", err)
	}
	if accepted < len(drafts) {
		if err := s.Rollback(cuts[accepted-1]); err != nil {
			return 0, 0, fmt.Errorf("rollback to the last accepted draft: %w", err)
		}
	}
	return accepted, choices[accepted-1], nil
}

// groupBeam is a beam of the search over group branches.
type groupBeam struct {
	g      *decoder.DecoderState
	h      hypothesis
	logits [vocab]float32
}

func releaseBeams(bs []groupBeam) error {
	var err error
	for _, b := range bs {
		err = errors.Join(err, b.g.Release())
	}
	return err
}

// beams runs beam search of width beams for steps tokens from s (after a
// prompt whose last scores are logits): every beam is a branch of the
// group, so beams share the rows of their common prefix and a beam's
// recurrent state branches with its KV cache. It returns the hypotheses,
// best first, and the pool's physical bytes with the last beams live (the
// prompt's session included), against the logical bytes the beams read
// as.
func beams(kn *kernel, p *state.Pool, s *decoder.DecoderState, logits [vocab]float32, width, steps int) (_ []hypothesis, phys, logical int64, err error) {
	root, err := s.Branch()
	if err != nil {
		return nil, 0, 0, err
	}
	live := []groupBeam{{g: root, logits: logits}}
	defer func() { err = errors.Join(err, releaseBeams(live)) }()
	for range steps {
		hs := make([]hypothesis, len(live))
		ls := make([][vocab]float32, len(live))
		for i, b := range live {
			hs[i], ls[i] = b.h, b.logits
		}
		var next []groupBeam
		for _, c := range expand(hs, ls, width) {
			g, err := live[c.parent].g.Branch()
			if err != nil {
				return nil, 0, 0, errors.Join(err, releaseBeams(next))
			}
			next = append(next, groupBeam{g: g, h: c.hypothesis})
			if next[len(next)-1].logits, err = feed(kn, g, c.token); err != nil {
				return nil, 0, 0, errors.Join(err, releaseBeams(next))
			}
		}
		old := live
		live = next
		if err := releaseBeams(old); err != nil {
			return nil, 0, 0, err
		}
	}
	out := make([]hypothesis, len(live))
	for i, b := range live {
		out[i] = b.h
		logical += b.g.Stats().LogicalBytes
	}
	return out, p.Stats().PhysicalBytes, logical, nil
}
