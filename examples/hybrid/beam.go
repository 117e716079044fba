package main

import (
	"slices"
	"sort"
)

// hypothesis is a beam's tokens and their summed log-probability.
type hypothesis struct {
	tokens []int32
	score  float64
}

// candidate is one continuation of a beam.
type candidate struct {
	hypothesis
	parent int
	token  int32
}

// expand returns the width best continuations of beams (their hypotheses
// and next-token scores), best first; ties go to the earlier beam, then the
// lower token, so both decoders choose alike.
func expand(beams []hypothesis, logits [][vocab]float32, width int) []candidate {
	var cands []candidate
	for i, b := range beams {
		lp := logSoftmax(logits[i])
		for t := range vocab {
			cands = append(cands, candidate{
				hypothesis: hypothesis{tokens: append(slices.Clone(b.tokens), int32(t)), score: b.score + lp[t]},
				parent:     i,
				token:      int32(t),
			})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
	return cands[:min(width, len(cands))]
}
