package peerbench

import (
	"math"
	"math/rand/v2"

	"github.com/gpustate/gpustate/runtime/state"
)

// ---- e and er: windowed sessions that rewind their recurrent state ----

// The sessions of (e) decode in turn, one token each, from an empty
// context (sizes.prompt is unused). A session's token is, in order:
//   - its recurrent step: the 16 KiB state rewritten from the state before
//     and the token's input (e: read, computed in Go, written back with
//     Write; er: Step);
//   - its KV row, appended to a window of the last Window rows;
//   - two reads of one KV row: one drawn at random among the window's rows,
//     and the last;
//   - after every rewindEvery-th token, a read of the whole recurrent state
//     as it was after a token drawn at random among the last rewindBack
//     (At, ReadInto, Release), as an engine that rewinds a session reads it.
//
// Once a session's tokens are done, its current recurrent state is read.
// The checksum folds every row read and the last element of every
// recurrent row read.
const (
	rewindEvery = 64
	rewindBack  = 48
	// keptEvery and keptStates are the peer's ring of past recurrent
	// states, as RecC and RecR keep checkpoints (every=16 keep=4): the
	// state after every keptEvery-th token, the last keptStates of them.
	keptEvery  = 16
	keptStates = 4
)

// storeE runs (e) on WindowedState groups, or (er) on WindowedRState
// groups whose recurrent state steps through Step.
type storeE struct {
	p      *state.Pool
	sz     sizes
	replay bool
	owners []state.Owner
	row    *Ctx
	dst    CtxW
	rec    Rec // the state a token computes (e), or a read of one
	in     RecIn
	gs     []*WindowedState
	gr     []*WindowedRState
	// vers holds, per session, the recurrent state's version after each of
	// its last rewindEvery tokens (vers[i][n%rewindEvery]: after n tokens).
	vers [][rewindEvery]state.Version
}

func newStoreE(p *state.Pool, sz sizes, replay bool) side {
	s := &storeE{p: p, sz: sz, replay: replay, owners: owners(sz), row: newRow(), dst: CtxW(*newRow()),
		rec: Rec{H: make([]float32, RecRows*RecDim)}, in: RecIn{X: make([]float32, RecRows*InDim)},
		vers: make([][rewindEvery]state.Version, sz.sessions)}
	return s
}

// kv returns session i's KV cache.
func (s *storeE) kv(i int) *CtxWState {
	if s.replay {
		return s.gr[i].KV()
	}
	return s.gs[i].KV()
}

// token feeds session i its n-th token (n from 1): the recurrent step,
// then its KV row.
func (s *storeE) token(i, n int, tok int32) {
	inputOf(s.in.X, tok)
	if s.replay {
		rec := s.gr[i].Rec()
		must(rec.StepHost(s.in, recurStep))
		s.vers[i][n%rewindEvery] = rec.Version()
	} else {
		rec := s.gs[i].Rec()
		must(rec.ReadInto((*RecC)(&s.rec), 0, RecRows))
		for k := range RecRows {
			recur(s.rec.H[k*RecDim:(k+1)*RecDim], s.in.X[k*InDim:(k+1)*InDim])
		}
		must(rec.Write(0, RecC(s.rec)))
		s.vers[i][n%rewindEvery] = rec.Version()
	}
	must(s.kv(i).Append(CtxW(rowOf(s.row, tok))))
}

// past reads session i's recurrent state as it was after n tokens into
// s.rec.
func (s *storeE) past(i, n int) {
	v := s.vers[i][n%rewindEvery]
	if s.replay {
		at, err := s.gr[i].Rec().At(v)
		must(err)
		must(at.ReadInto((*RecR)(&s.rec), 0, RecRows))
		must(at.Release())
		return
	}
	at, err := s.gs[i].Rec().At(v)
	must(err)
	must(at.ReadInto((*RecC)(&s.rec), 0, RecRows))
	must(at.Release())
}

// current reads session i's recurrent state into s.rec.
func (s *storeE) current(i int) {
	if s.replay {
		must(s.gr[i].Rec().ReadInto((*RecR)(&s.rec), 0, RecRows))
		return
	}
	must(s.gs[i].Rec().ReadInto((*RecC)(&s.rec), 0, RecRows))
}

func (s *storeE) round(seed uint64) (int, uint64) {
	rng := rand.New(rand.NewPCG(seed, 5))
	n := s.sz.sessions
	s.gs, s.gr = s.gs[:0], s.gr[:0]
	for i := range n {
		if s.replay {
			g, err := NewWindowedRState(s.p, s.owners[i])
			must(err)
			s.gr = append(s.gr, g)
		} else {
			g, err := NewWindowedState(s.p, s.owners[i])
			must(err)
			s.gs = append(s.gs, g)
		}
		s.vers[i][0] = s.recVersion(i)
	}
	var sum uint64
	for t := range s.sz.steps {
		for i := range n {
			s.token(i, t+1, int32(rng.IntN(1000)))
			c := s.kv(i)
			for _, r := range [2]int{c.Oldest() + rng.IntN(c.Len()-c.Oldest()), c.Len() - 1} {
				must(c.ReadInto(&s.dst, r, r+1))
				sum = sumRow(sum, s.dst.Keys, s.dst.Values, s.dst.Token[0])
			}
			if (t+1)%rewindEvery == 0 {
				s.past(i, t+1-1-rng.IntN(rewindBack))
				sum = sumRec(sum, s.rec.H)
			}
		}
	}
	for i := range n {
		s.current(i)
		sum = sumRec(sum, s.rec.H)
	}
	for _, g := range s.gs {
		must(g.Release())
	}
	for _, g := range s.gr {
		must(g.Release())
	}
	return n * s.sz.steps, sum
}

func (s *storeE) recVersion(i int) state.Version {
	if s.replay {
		return s.gr[i].Rec().Version()
	}
	return s.gs[i].Rec().Version()
}

func (s *storeE) close() error { return nil }

// sumRec folds the last element of every row of a recurrent state.
func sumRec(sum uint64, h []float32) uint64 {
	for k := range RecRows {
		sum = sum*31 + uint64(math.Float32bits(h[(k+1)*RecDim-1]))
	}
	return sum
}

// peerE: per session, a ring of the last Window KV rows, the recurrent
// state in a slice rewritten in place, and for rewinds a ring of the
// states after every keptEvery-th token and the tokens since the oldest
// of them: a past state is the kept one at or before it, run forward
// through the tokens after it. One peer serves (e) and (er): the engine
// that writes it by hand has the step function either way.
type peerE struct {
	sz  sizes
	row *Ctx
	dst *Ctx
	ss  []peerSession
	in  []float32
	// past is a rewind's scratch state.
	past []float32
}

type peerSession struct {
	keys, values []float32 // Window rows, row n at n%Window
	tokens       []int32
	n            int // tokens fed
	h            []float32
	kept         [keptStates][]float32 // after token m*keptEvery at m%keptStates
	fed          [keptEvery * keptStates]int32
}

func newPeerE(sz sizes) side {
	s := &peerE{sz: sz, row: newRow(), dst: newRow(), ss: make([]peerSession, sz.sessions),
		in: make([]float32, RecRows*InDim), past: make([]float32, RecRows*RecDim)}
	for i := range s.ss {
		c := &s.ss[i]
		c.keys, c.values, c.tokens = make([]float32, Window*Dim), make([]float32, Window*Dim), make([]int32, Window)
		c.h = make([]float32, RecRows*RecDim)
		for m := range c.kept {
			c.kept[m] = make([]float32, RecRows*RecDim)
		}
	}
	return s
}

// step runs the recurrent step of token tok on h.
func (s *peerE) step(h []float32, tok int32) {
	inputOf(s.in, tok)
	for k := range RecRows {
		recur(h[k*RecDim:(k+1)*RecDim], s.in[k*InDim:(k+1)*InDim])
	}
}

// token feeds session c one token: the recurrent step, the state kept
// every keptEvery tokens, and the KV row into the ring.
func (s *peerE) token(c *peerSession, tok int32) {
	s.step(c.h, tok)
	c.fed[c.n%len(c.fed)] = tok
	c.n++
	if c.n%keptEvery == 0 {
		copy(c.kept[c.n/keptEvery%keptStates], c.h)
	}
	at := (c.n - 1) % Window
	fillKV(c.keys[at*Dim:(at+1)*Dim], c.values[at*Dim:(at+1)*Dim], tok)
	c.tokens[at] = tok
}

// readRow reads row r (absolute) of c's window into s.dst.
func (s *peerE) readRow(c *peerSession, r int) {
	at := r % Window
	copy(s.dst.Keys, c.keys[at*Dim:(at+1)*Dim])
	copy(s.dst.Values, c.values[at*Dim:(at+1)*Dim])
	s.dst.Token[0] = c.tokens[at]
}

// rewind rebuilds c's recurrent state after n tokens into s.past.
func (s *peerE) rewind(c *peerSession, n int) {
	base := n - n%keptEvery
	copy(s.past, c.kept[base/keptEvery%keptStates])
	for m := base; m < n; m++ {
		s.step(s.past, c.fed[m%len(c.fed)])
	}
}

func (s *peerE) round(seed uint64) (int, uint64) {
	rng := rand.New(rand.NewPCG(seed, 5))
	for i := range s.ss {
		c := &s.ss[i]
		c.n = 0
		clear(c.h)
		clear(c.kept[0])
	}
	var sum uint64
	for range s.sz.steps {
		for i := range s.ss {
			c := &s.ss[i]
			s.token(c, int32(rng.IntN(1000)))
			oldest := max(0, c.n-Window)
			for _, r := range [2]int{oldest + rng.IntN(c.n-oldest), c.n - 1} {
				s.readRow(c, r)
				sum = sumRow(sum, s.dst.Keys, s.dst.Values, s.dst.Token[0])
			}
			if c.n%rewindEvery == 0 {
				s.rewind(c, c.n-1-rng.IntN(rewindBack))
				sum = sumRec(sum, s.past)
			}
		}
	}
	for i := range s.ss {
		sum = sumRec(sum, s.ss[i].h)
	}
	return len(s.ss) * s.sz.steps, sum
}

func (s *peerE) close() error { return nil }
