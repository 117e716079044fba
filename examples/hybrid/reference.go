package main

import (
	"slices"

	"github.com/gpustate/gpustate/examples/hybrid/decoder"
)

// plain is a session's state without gpustate: the KV cache and the
// recurrent state as plain slices, copied whole to branch. Greedy decoding
// and beam search over it are the reference the program checks its output
// against, token for token.
type plain struct {
	ctx context
	h   []float32
}

func newPlain() *plain { return &plain{h: make([]float32, decoder.RecLayers*dim)} }

func (p *plain) clone() *plain {
	return &plain{ctx: context{keys: slices.Clone(p.ctx.keys), values: slices.Clone(p.ctx.values)}, h: slices.Clone(p.h)}
}

// feed runs token through the model and returns the next token's scores.
func (p *plain) feed(token int32) [vocab]float32 {
	row, logits := plainForward(p.ctx, p.h, token, len(p.ctx.keys)/kvw)
	p.ctx.keys = append(p.ctx.keys, row.Keys...)
	p.ctx.values = append(p.ctx.values, row.Values...)
	return logits
}

// greedy feeds the prompt and then generates n tokens, each the argmax of
// the scores after the one before.
func greedy(prompt []int32, n int) []int32 {
	p := newPlain()
	var logits [vocab]float32
	for _, t := range prompt {
		logits = p.feed(t)
	}
	out := make([]int32, 0, n)
	for range n {
		t := argmax(logits)
		out = append(out, t)
		logits = p.feed(t)
	}
	return out
}

// plainBeams is beam search without gpustate: each beam a full copy.
func plainBeams(prompt []int32, width, steps int) []hypothesis {
	root := newPlain()
	var logits [vocab]float32
	for _, t := range prompt {
		logits = root.feed(t)
	}
	type pb struct {
		s      *plain
		h      hypothesis
		logits [vocab]float32
	}
	beams := []pb{{s: root, logits: logits}}
	for range steps {
		hs := make([]hypothesis, len(beams))
		ls := make([][vocab]float32, len(beams))
		for i, b := range beams {
			hs[i], ls[i] = b.h, b.logits
		}
		var next []pb
		for _, c := range expand(hs, ls, width) {
			s := beams[c.parent].s.clone()
			l := s.feed(c.token)
			next = append(next, pb{s: s, h: c.hypothesis, logits: l})
		}
		beams = next
	}
	out := make([]hypothesis, len(beams))
	for i, b := range beams {
		out[i] = b.h
	}
	return out
}
