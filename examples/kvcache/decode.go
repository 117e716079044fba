package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// draftWindow is how many cached rows the draft model attends to.
const draftWindow = 32

// rowReader is what the model reads its context from: a live cache or a
// snapshot of one.
type rowReader interface {
	Read(from, to int) (cache.KVCache, error)
	Len() int
}

// next predicts the token after the rows of r. With window > 0 only the
// last window rows are read: the draft model.
func next(r rowReader, window int) (int32, error) {
	n := r.Len()
	from := 0
	if window > 0 {
		from = max(0, n-window)
	}
	ctx, err := r.Read(from, n)
	if err != nil {
		return 0, err
	}
	return argmax(logits(ctx, n)), nil
}

// prefill stands in for the prefill kernel: it writes rows of one column,
// rowBytes each, from src into device memory at dst, as a CUDA kernel
// would.
//
//state:writes dst
func prefill(b device.Backend, dst []device.Span, rowBytes int, src []byte) error {
	for _, sp := range dst {
		n := sp.Rows * rowBytes
		if n > len(src) {
			return fmt.Errorf("prefill: %d bytes left for a span of %d rows", len(src), sp.Rows)
		}
		if err := b.CopyHtoD(sp.Ptr, src[:n]); err != nil {
			return err
		}
		src = src[n:]
	}
	return b.Sync()
}

// prefillPrompt appends the prompt's rows to s on the device: AppendDevice
// reserves them and the prefill kernel fills them in place.
func prefillPrompt(b device.Backend, s *cache.KVCacheState, prompt []int32) error {
	spans, err := s.AppendDevice(len(prompt))
	if err != nil {
		return err
	}
	r := rows(prompt, 0)
	if err := prefill(b, spans.Keys, width*4, state.Bytes(r.Keys)); err != nil {
		return err
	}
	if err := prefill(b, spans.Values, width*4, state.Bytes(r.Values)); err != nil {
		return err
	}
	return prefill(b, spans.Token, 4, state.Bytes(r.Token))
}

// greedy decodes n tokens after prompt the plain way, one Append per token,
// in a cache of its own: the reference speculative decoding must match.
func greedy(p *state.Pool, prompt []int32, n int) ([]int32, error) {
	s, err := cache.NewKVCacheState(p, "reference")
	if err != nil {
		return nil, err
	}
	defer s.Release()
	if err := s.Append(rows(prompt, 0)); err != nil {
		return nil, err
	}
	out := make([]int32, 0, n)
	for range n {
		t, err := next(s, 0)
		if err != nil {
			return nil, err
		}
		if err := s.Append(row(t, s.Len())); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// specStats counts what speculative decoding did.
type specStats struct {
	rounds, drafted, accepted, merged, rolledBack, invalidated int
}

// speculative decodes n tokens after the rows of s by speculative decoding
// with up to k drafts a round, appending the accepted tokens to s.
func speculative(s *cache.KVCacheState, n, k int) ([]int32, specStats, error) {
	var st specStats
	out := make([]int32, 0, n)
	for len(out) < n {
		// A round yields its accepted drafts plus one token of the target
		// model, so it drafts at most what is still wanted, less one.
		toks, err := specRound(s, min(k, n-len(out)-1), &st)
		if err != nil {
			return nil, st, err
		}
		out = append(out, toks...)
	}
	return out, st, nil
}

// specRound drafts k tokens on a branch of s with the draft model, checks
// them with the target model, and keeps the longest correct prefix: Merge
// fast-forwards s to the branch, after a Rollback of the branch when a draft
// was rejected. It returns the tokens appended to s.
func specRound(s *cache.KVCacheState, k int, st *specStats) ([]int32, error) {
	n := s.Len()
	br, err := s.Branch()
	if err != nil {
		return nil, err
	}
	defer br.Release()

	// snaps[i] is the branch after i drafts.
	snaps := make([]*cache.KVCacheSnapshot, 0, k+1)
	defer func() {
		for _, v := range snaps {
			v.Release()
		}
	}()
	v, err := br.Snapshot()
	if err != nil {
		return nil, err
	}
	snaps = append(snaps, v)
	drafts := make([]int32, 0, k+1)
	for i := range k {
		d, err := next(br, draftWindow)
		if err != nil {
			return nil, err
		}
		if err := br.Append(row(d, n+i)); err != nil {
			return nil, err
		}
		v, err := br.Snapshot()
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, v)
		drafts = append(drafts, d)
	}

	// The target model checks every draft against the snapshot taken just
	// before it; the first disagreement ends the accepted prefix, and the
	// target's own token replaces the rejected draft.
	accepted := k
	var fix int32
	for i := 0; i <= k; i++ {
		t, err := next(snaps[i], 0)
		if err != nil {
			return nil, err
		}
		if i == k || t != drafts[i] {
			accepted, fix = i, t
			break
		}
	}
	st.rounds++
	st.drafted += k
	st.accepted += accepted

	if accepted > 0 {
		if accepted < k {
			if err := br.Rollback(snaps[accepted]); err != nil {
				return nil, err
			}
			st.rolledBack++
			for _, v := range snaps[accepted+1:] {
				if _, err := v.Read(0, 1); errors.Is(err, state.ErrInvalidated) {
					st.invalidated++
				}
			}
		}
		if err := s.Merge(br); err != nil {
			return nil, err
		}
		st.merged++
	}
	if err := s.Append(row(fix, n+accepted)); err != nil {
		return nil, err
	}
	return append(drafts[:accepted], fix), nil
}

// A beam is one hypothesis of beam search: a branch of the prompt's cache.
type beam struct {
	s      *cache.KVCacheState
	score  float64 // sum of log-probabilities
	tokens []int32
}

// beamStats describes the pool at the widest point of the search.
type beamStats struct {
	live              int // live heads and snapshots
	logical, physical int64
}

// beamSearch keeps the best width continuations of the prompt in s for
// steps tokens. Every beam is a branch: the prompt's rows are stored once,
// whatever the number of beams.
func beamSearch(p *state.Pool, s *cache.KVCacheState, width, steps int) (beam, beamStats, error) {
	var peak beamStats
	root, err := s.Branch()
	if err != nil {
		return beam{}, peak, err
	}
	beams := []beam{{s: root}}
	defer func() {
		for _, b := range beams {
			b.s.Release()
		}
	}()
	type cand struct {
		parent int
		token  int32
		score  float64
	}
	for range steps {
		var cands []cand
		for i, b := range beams {
			ctx, err := b.s.Read(0, b.s.Len())
			if err != nil {
				return beam{}, peak, err
			}
			lp := logSoftmax(logits(ctx, b.s.Len()))
			for t := range vocab {
				cands = append(cands, cand{i, int32(t), b.score + lp[t]})
			}
		}
		slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(b.score, a.score) })
		next := make([]beam, 0, width)
		for _, c := range cands[:width] {
			parent := beams[c.parent]
			child, err := parent.s.Branch()
			if err != nil {
				releaseBeams(next)
				return beam{}, peak, err
			}
			next = append(next, beam{s: child, score: c.score, tokens: append(slices.Clone(parent.tokens), c.token)})
			if err := child.Append(row(c.token, child.Len())); err != nil {
				releaseBeams(next)
				return beam{}, peak, err
			}
		}
		releaseBeams(beams)
		beams = next
		if ps := p.Stats(); ps.LogicalBytes > peak.logical {
			peak = beamStats{live: ps.Live, logical: ps.LogicalBytes, physical: ps.PhysicalBytes}
		}
	}
	best := beams[0]
	return beam{score: best.score, tokens: best.tokens}, peak, nil
}

// releaseBeams releases the cache of every beam.
func releaseBeams(bs []beam) {
	for _, b := range bs {
		b.s.Release()
	}
}
