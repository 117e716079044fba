package main

import (
	"math"

	"github.com/gpustate/gpustate/examples/hybrid/decoder"
)

// The model: a token's embedding goes through layers that alternate, a
// recurrent layer then an attention layer, and a last projection scores
// the vocabulary. A recurrent layer keeps a gated linear recurrence
// (h = a*h + (1-a)*u, the gate a and the input u computed from the hidden
// vector), a fixed-size state per session; an attention layer appends the
// token's key and value to the KV cache and attends over every cached row.
// Weights are a hash of their coordinates, so the program needs no model
// file and every figure it prints is reproducible. The arithmetic works on
// plain slices: the decoder over gpustate (decode.go) and the reference
// without it (reference.go) call the same functions.

const (
	vocab = 32
	dim   = decoder.Dim
	kvw   = decoder.AttnLayers * dim // floats of keys (or values) per token
)

// Weight kinds.
const (
	kindEmbed = iota + 1
	kindPos
	kindGate
	kindIn
	kindRecOut
	kindQuery
	kindKey
	kindValue
	kindAttnOut
	kindLogit
	kindDraft
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

// weights are the model's matrices, made once from the hash.
type weights struct {
	embed         [vocab][dim]float32
	pos           [16][dim]float32
	gate, in, out [decoder.RecLayers][dim][dim]float32
	q, k, v, aout [decoder.AttnLayers][dim][dim]float32
	logit         [vocab][dim]float32
	draft         [vocab][vocab]float32 // the draft model: a bigram table
}

var model = newWeights()

func newWeights() *weights {
	w := new(weights)
	scale := float32(1 / math.Sqrt(dim))
	for t := range vocab {
		for i := range dim {
			w.embed[t][i] = weight(kindEmbed, uint64(t), uint64(i), 0)
			w.logit[t][i] = weight(kindLogit, uint64(t), uint64(i), 0)
		}
		for u := range vocab {
			w.draft[t][u] = weight(kindDraft, uint64(t), uint64(u), 0)
		}
	}
	for p := range 16 {
		for i := range dim {
			w.pos[p][i] = 0.5 * weight(kindPos, uint64(p), uint64(i), 0)
		}
	}
	for l := range decoder.RecLayers {
		for i := range dim {
			for j := range dim {
				w.gate[l][i][j] = scale * weight(kindGate, uint64(l), uint64(i), uint64(j))
				w.in[l][i][j] = scale * weight(kindIn, uint64(l), uint64(i), uint64(j))
				w.out[l][i][j] = scale * weight(kindRecOut, uint64(l), uint64(i), uint64(j))
			}
		}
	}
	for l := range decoder.AttnLayers {
		for i := range dim {
			for j := range dim {
				w.q[l][i][j] = scale * weight(kindQuery, uint64(l), uint64(i), uint64(j))
				w.k[l][i][j] = scale * weight(kindKey, uint64(l), uint64(i), uint64(j))
				w.v[l][i][j] = scale * weight(kindValue, uint64(l), uint64(i), uint64(j))
				w.aout[l][i][j] = scale * weight(kindAttnOut, uint64(l), uint64(i), uint64(j))
			}
		}
	}
	return w
}

// matvec returns m x.
func matvec(m *[dim][dim]float32, x []float32) [dim]float32 {
	var out [dim]float32
	for i := range dim {
		var s float32
		for j := range dim {
			s += m[i][j] * x[j]
		}
		out[i] = s
	}
	return out
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// attender computes an attention layer's output for the token being fed:
// over the cached rows of layer l and the token's own key and value.
type attender interface {
	attend(l int, q, k, v *[dim]float32) ([dim]float32, error)
}

// context is what a token attends over, on the host: the keys and values
// of the tokens before it, kvw floats per token (attention layer l at
// [l*dim, (l+1)*dim)).
type context struct {
	keys, values []float32
}

func (c context) attend(l int, q, k, v *[dim]float32) ([dim]float32, error) {
	return attend(q, k, v, len(c.keys)/kvw,
		func(j int) []float32 { return c.keys[j*kvw+l*dim : j*kvw+(l+1)*dim] },
		func(j int) []float32 { return c.values[j*kvw+l*dim : j*kvw+(l+1)*dim] }), nil
}

// attend is one attention layer's arithmetic: softmax of the scaled dot
// products of q with the keys of the n cached rows (keyOf) and the token's
// own k, and the weighted sum of their values. The host path and the
// kernel (kernel.go) share it, so they agree to the bit.
func attend(q, k, v *[dim]float32, n int, keyOf, valueOf func(j int) []float32) [dim]float32 {
	scores := make([]float32, n+1)
	top := float32(math.Inf(-1))
	for j := range n + 1 {
		kj := k[:]
		if j < n {
			kj = keyOf(j)
		}
		var s float32
		for i, x := range kj {
			s += q[i] * x
		}
		scores[j] = s / float32(math.Sqrt(dim))
		top = max(top, scores[j])
	}
	var sum float32
	for j := range scores {
		scores[j] = float32(math.Exp(float64(scores[j] - top)))
		sum += scores[j]
	}
	var att [dim]float32
	for j := range n + 1 {
		vj := v[:]
		if j < n {
			vj = valueOf(j)
		}
		for i, x := range vj {
			att[i] += scores[j] / sum * x
		}
	}
	return att
}

// forward runs one token at position pos through the model, given what it
// attends over and the recurrent state h (decoder.RecLayers rows of dim
// floats, updated in place). It returns the token's KV cache row and the
// scores of the next token; when xs is not nil, it records there the input
// of each recurrent layer (decoder.RecLayers rows of dim floats), what
// recur needs to make the same update again.
func forward(ctx attender, h []float32, token int32, pos int, xs []float32) (decoder.KVCache, [vocab]float32, error) {
	x := model.embed[token]
	for i := range dim {
		x[i] += model.pos[pos%16][i]
	}
	row := decoder.KVCache{Keys: make([]float32, kvw), Values: make([]float32, kvw), Token: []int32{token}}
	for l := range decoder.AttnLayers {
		// A recurrent layer: the gated linear recurrence.
		hl := h[l*dim : (l+1)*dim]
		if xs != nil {
			copy(xs[l*dim:], x[:])
		}
		recur(hl, l, x[:])
		r := matvec(&model.out[l], hl)
		for i := range dim {
			x[i] += r[i]
		}
		// An attention layer over the cached rows and this token's own.
		q, k, v := matvec(&model.q[l], x[:]), matvec(&model.k[l], x[:]), matvec(&model.v[l], x[:])
		copy(row.Keys[l*dim:], k[:])
		copy(row.Values[l*dim:], v[:])
		att, err := ctx.attend(l, &q, &k, &v)
		if err != nil {
			return row, [vocab]float32{}, err
		}
		o := matvec(&model.aout[l], att[:])
		for i := range dim {
			x[i] += o[i]
		}
	}
	var logits [vocab]float32
	for t := range vocab {
		var s float32
		for i := range dim {
			s += model.logit[t][i] * x[i]
		}
		logits[t] = s
	}
	return row, logits, nil
}

// recur is recurrent layer l's step: its gated linear recurrence updates
// the layer's state h (dim floats) in place from the layer's input x.
func recur(h []float32, l int, x []float32) {
	a, u := matvec(&model.gate[l], x), matvec(&model.in[l], x)
	for i := range dim {
		g := sigmoid(a[i])
		h[i] = g*h[i] + (1-g)*u[i]
	}
}

// plainForward is forward over a host context, which cannot fail.
func plainForward(ctx context, h []float32, token int32, pos int) (decoder.KVCache, [vocab]float32) {
	row, logits, _ := forward(ctx, h, token, pos, nil)
	return row, logits
}

// argmax returns the best-scoring token, the lowest on a tie.
func argmax(s [vocab]float32) int32 {
	best := 0
	for t := 1; t < vocab; t++ {
		if s[t] > s[best] {
			best = t
		}
	}
	return int32(best)
}

// draftNext is the draft model's guess of the token after the last of
// history: prompt lookup, the token that followed the last earlier
// occurrence of the same token, else the model run over that token alone
// (no context, no recurrent state). It is cheap, needs no state of its
// own, and is often right about what the target model says.
func draftNext(history []int32) int32 {
	n := len(history)
	t := history[n-1]
	for i := n - 2; i >= 0; i-- {
		if history[i] == t {
			return history[i+1]
		}
	}
	h := make([]float32, decoder.RecLayers*dim)
	_, logits := plainForward(context{}, h, t, n-1)
	return argmax(logits)
}

// logSoftmax turns scores into log-probabilities.
func logSoftmax(s [vocab]float32) [vocab]float64 {
	top := float64(s[argmax(s)])
	var sum float64
	for _, x := range s {
		sum += math.Exp(float64(x) - top)
	}
	var out [vocab]float64
	for t, x := range s {
		out[t] = float64(x) - top - math.Log(sum)
	}
	return out
}
