package main

import (
	"math"

	"github.com/gpustate/gpustate/examples/kvcache/cache"
)

// The decoder below is a toy with the shape of a real one: each token
// leaves a row of keys and values per layer in the cache, and the next
// token is chosen by attending from the last token over every cached row.
// Its weights are a hash, so the program needs no model file, and every
// figure it prints is reproducible.

const (
	vocab = 64
	width = cache.Layers * cache.Dim
)

// weight returns a deterministic pseudo-random weight in [-1, 1) for the
// given coordinates (splitmix64 of their mix).
func weight(kind, a, b, c uint64) float32 {
	x := kind*0x9e3779b97f4a7c15 ^ a*0xbf58476d1ce4e5b9 ^ b*0x94d049bb133111eb ^ c*0x2545f4914f6cdd1d
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float32(x>>40)/float32(1<<23) - 1
}

const (
	kindKey = iota + 1
	kindValue
	kindQuery
	kindOut
	kindPos
	kindNext
)

// bigram weighs how strongly the last token, at its position, calls for
// each next one; attention over the whole context adds to it.
const bigram = 1

// attention weighs what attention over the context adds to the bigram.
const attention = 0.02

// row computes the cache row a token leaves at position pos: its keys and
// values for every layer.
func row(token int32, pos int) cache.KVCache {
	r := cache.KVCache{
		Keys:   make([]float32, width),
		Values: make([]float32, width),
		Token:  []int32{token},
	}
	for i := range width {
		p := 0.5 * weight(kindPos, uint64(pos%16), uint64(i), 0)
		r.Keys[i] = weight(kindKey, uint64(token), uint64(i), 0) + p
		r.Values[i] = weight(kindValue, uint64(token), uint64(i), 0) - p
	}
	return r
}

// rows concatenates the cache rows of tokens, the first at position pos.
func rows(tokens []int32, pos int) cache.KVCache {
	var out cache.KVCache
	for i, t := range tokens {
		r := row(t, pos+i)
		out.Keys = append(out.Keys, r.Keys...)
		out.Values = append(out.Values, r.Values...)
		out.Token = append(out.Token, r.Token...)
	}
	return out
}

// logits scores every token of the vocabulary as the next one, at position
// pos, given cached rows ctx (oldest first, the last one the last token's).
func logits(ctx cache.KVCache, pos int) [vocab]float32 {
	n := len(ctx.Token)
	var out [vocab]float32
	if n == 0 {
		return out
	}
	for t := range vocab {
		out[t] = bigram * weight(kindNext, uint64(ctx.Token[n-1]), uint64(t), uint64(pos%3))
	}
	first := 0
	last := ctx.Token[n-1]
	scale := float32(1 / math.Sqrt(cache.Dim))
	att := make([]float32, cache.Dim)
	scores := make([]float32, n-first)
	for l := range cache.Layers {
		off := l * cache.Dim
		// One query per layer, from the last token.
		maxScore := float32(math.Inf(-1))
		for j := first; j < n; j++ {
			var s float32
			for d := range cache.Dim {
				s += weight(kindQuery, uint64(last), uint64(off+d), 0) * ctx.Keys[j*width+off+d]
			}
			s *= scale
			scores[j-first] = s
			maxScore = max(maxScore, s)
		}
		var sum float32
		for j := range scores {
			scores[j] = float32(math.Exp(float64(scores[j] - maxScore)))
			sum += scores[j]
		}
		clear(att)
		for j := first; j < n; j++ {
			w := scores[j-first] / sum
			for d := range cache.Dim {
				att[d] += w * ctx.Values[j*width+off+d]
			}
		}
		for t := range vocab {
			var s float32
			for d := range cache.Dim {
				s += att[d] * weight(kindOut, uint64(t), uint64(off+d), 0)
			}
			out[t] += attention * s
		}
	}
	return out
}

// argmax returns the best-scoring token.
func argmax(l [vocab]float32) int32 {
	best := 0
	for t := range l {
		if l[t] > l[best] {
			best = t
		}
	}
	return int32(best)
}

// logSoftmax turns scores into log-probabilities.
func logSoftmax(l [vocab]float32) [vocab]float64 {
	m := math.Inf(-1)
	for _, v := range l {
		m = max(m, float64(v))
	}
	var sum float64
	for _, v := range l {
		sum += math.Exp(float64(v) - m)
	}
	var out [vocab]float64
	for t, v := range l {
		out[t] = float64(v) - m - math.Log(sum)
	}
	return out
}
