package peerbench

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gpustate/gpustate/runtime/state"
)

// A workload is run by two sides: the store, through the generated
// handles, and the peer, hand-written Go as a good engineer writes it
// (per-session slices kept from round to round, a snapshot as a length to
// truncate to, a branch as a copy whose last child takes its parent's
// buffer over, a shared prompt counted by references, a ring of past
// recurrent states). Both do the same work from the same random draws and
// return a checksum of what they read, so that a test can check they
// agree (TestPeersAgree).

// sizes shape a workload: the benchmarks' full sizes, or a test's small
// ones. tag tells apart the owners (and prefix domains) of sides that
// share a pool from goroutines of their own (BenchmarkPeerParallel).
type sizes struct {
	sessions, prompt, steps int
	tag                     string
}

// side runs rounds of one workload on one side: round does one round,
// returning the steps it took and its checksum.
type side interface {
	round(seed uint64) (steps int, sum uint64)
	close() error
}

// workload makes its two sides.
type workload struct {
	name string
	doc  string
	full sizes
	// store and peer make the sides; store's pool is the caller's.
	store func(p *state.Pool, sz sizes) side
	peer  func(sz sizes) side
}

var workloads = []workload{
	{"a", "sessions adopt a shared prompt, then decode, reading two rows a token",
		sizes{sessions: 64, prompt: 1024, steps: 256}, newStoreA, newPeerA},
	{"b", "beam search, beams branched and pruned every step",
		sizes{sessions: 16, prompt: 64, steps: 128}, newStoreB, newPeerB},
	{"c", "speculative decoding: 4 drafts a step, about half rolled back",
		sizes{sessions: 16, prompt: 256, steps: 64}, func(p *state.Pool, sz sizes) side { return newStoreC(p, sz, false) }, newPeerC},
	{"cc", "(c) with a snapshot after every draft",
		sizes{sessions: 16, prompt: 256, steps: 64}, func(p *state.Pool, sz sizes) side { return newStoreC(p, sz, true) }, newPeerC},
	{"d", "(c) with a 16 KiB recurrent state beside the KV cache, as a group",
		sizes{sessions: 16, prompt: 256, steps: 64}, func(p *state.Pool, sz sizes) side { return newStoreD(p, sz, false) }, newPeerD},
	{"dr", "(d) with the recurrent state replayed through Step",
		sizes{sessions: 16, prompt: 256, steps: 64}, func(p *state.Pool, sz sizes) side { return newStoreD(p, sz, true) }, newPeerD},
	{"e", "windowed KV caches beside checkpointed recurrent states, read at past versions",
		sizes{sessions: 8, steps: Tokens}, func(p *state.Pool, sz sizes) side { return newStoreE(p, sz, false) }, newPeerE},
	{"er", "(e) with the recurrent state replayed through Step",
		sizes{sessions: 8, steps: Tokens}, func(p *state.Pool, sz sizes) side { return newStoreE(p, sz, true) }, newPeerE},
}

// ---- rows, shared by both sides ----
//
// The workload's own arithmetic (a row's values, a step's input, the
// recurrent step) is kept out of line (go:noinline), so that both sides
// run the same machine code for it: inlined, each side had its own copy
// at an address of its own, and the two copies' speeds differed by a
// fifth from build to build (profiles of (e) in two binaries whose code
// is the same gave the store's and the peer's copies 23% and 28% of the
// time in one, 27% and 23% in the other), which moved the ratios with
// them (docs/BENCHMARKS.md, "Calls from several goroutines").

// fillKV fills keys and values with token tok's.
//
//go:noinline
func fillKV(keys, values []float32, tok int32) {
	for j := range keys {
		keys[j] = float32(tok) + float32(j)/256
		values[j] = -float32(tok) - float32(j)
	}
}

// rowOf returns a one-row Ctx of token tok in r's storage.
func rowOf(r *Ctx, tok int32) Ctx {
	r.Keys, r.Values, r.Token = r.Keys[:Dim], r.Values[:Dim], r.Token[:1]
	fillKV(r.Keys, r.Values, tok)
	r.Token[0] = tok
	return *r
}

func newRow() *Ctx {
	return &Ctx{Keys: make([]float32, Dim), Values: make([]float32, Dim), Token: make([]int32, 1)}
}

// sumRow folds a row into a checksum.
func sumRow(sum uint64, keys, values []float32, tok int32) uint64 {
	sum = sum*31 + uint64(uint32(tok))
	sum = sum*31 + uint64(math.Float32bits(keys[len(keys)-1]))
	return sum*31 + uint64(math.Float32bits(values[0]))
}

// tokenAt is the prompt's token i.
func tokenAt(i int) int32 { return int32(i%97 + 1) }

// recur is the recurrent step on one row of h, with input row x: one
// function for both sides, so that both round alike.
//
//go:noinline
func recur(h, x []float32) {
	for i := range h {
		h[i] = h[i]/2 + x[i%InDim]
	}
}

// recurStep is the recurrent state's step as the replayed workloads (dr,
// er) run it: Go code, so StepHost, which hands it the state's rows in
// place on the host backend, as docs/GUIDE.md has a step written in Go
// do.
func recurStep(rows *RecR, in RecIn) error {
	for k := range RecRows {
		recur(rows.H[k*RecDim:(k+1)*RecDim], in.X[k*InDim:(k+1)*InDim])
	}
	return nil
}

// inputOf fills x, one step's input (RecRows rows of InDim), for token tok.
//
//go:noinline
func inputOf(x []float32, tok int32) {
	for i := range x {
		x[i] = float32(tok%13)/8 + float32(i%InDim)/64
	}
}

// draws are a speculative round's random choices: the draft tokens and
// how many are accepted (all four about half the time).
func draws(rng *rand.Rand) (drafts [4]int32, accepted int) {
	for i := range drafts {
		drafts[i] = int32(rng.IntN(1000))
	}
	if rng.IntN(2) == 0 {
		return drafts, 4
	}
	return drafts, rng.IntN(4)
}

// owners names the sessions of a side of sz.
func owners(sz sizes) []state.Owner {
	o := make([]state.Owner, sz.sessions)
	for i := range o {
		o[i] = state.Owner(fmt.Sprint(sz.tag, "s", i))
	}
	return o
}

// ---- a: a shared prompt, then decoding ----

type storeA struct {
	p      *state.Pool
	sz     sizes
	owners []state.Owner
	prompt Ctx
	row    *Ctx
	dst    Ctx
	ss     []*CtxState
}

func newStoreA(p *state.Pool, sz sizes) side {
	s := &storeA{p: p, sz: sz, owners: owners(sz), row: newRow(), ss: make([]*CtxState, sz.sessions)}
	for i := range sz.prompt {
		tok := tokenAt(i)
		r := rowOf(s.row, tok)
		s.prompt.Keys, s.prompt.Values, s.prompt.Token = append(s.prompt.Keys, r.Keys...), append(s.prompt.Values, r.Values...), append(s.prompt.Token, tok)
	}
	s.dst = *newRow()
	return s
}

func (s *storeA) round(seed uint64) (int, uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	pre, err := NewCtxStateShared(s.p, state.Owner(s.sz.tag+"prefill"), state.Domain(s.sz.tag+"tenant"))
	must(err)
	must(pre.Append(s.prompt))
	for i := range s.ss {
		s.ss[i], err = NewCtxStateShared(s.p, s.owners[i], state.Domain(s.sz.tag+"tenant"))
		must(err)
		n, err := s.ss[i].AdoptPrefix(s.prompt.Token)
		must(err)
		if n < s.sz.prompt {
			must(s.ss[i].Append(Ctx{Keys: s.prompt.Keys[n*Dim:], Values: s.prompt.Values[n*Dim:], Token: s.prompt.Token[n:]}))
		}
	}
	must(pre.Release())
	var sum uint64
	for t := range s.sz.steps {
		for _, c := range s.ss {
			must(c.Append(rowOf(s.row, int32(1000+t))))
			for _, r := range [2]int{rng.IntN(c.Len()), c.Len() - 1} {
				must(c.ReadInto(&s.dst, r, r+1))
				sum = sumRow(sum, s.dst.Keys, s.dst.Values, s.dst.Token[0])
			}
		}
	}
	for _, c := range s.ss {
		must(c.Release())
	}
	s.p.ForgetPrefixes(state.Domain(s.sz.tag + "tenant"))
	return s.sz.sessions * s.sz.steps, sum
}

func (s *storeA) close() error { return nil }

// peerA: the prompt's rows once, counted by references, and each
// session's own rows in columns kept from round to round.
type peerA struct {
	sz     sizes
	prompt *sharedRows
	own    []rows
	row    *Ctx
	dst    Ctx
}

// rows are columns of rows, as a hand-written cache keeps them.
type rows struct {
	keys, values []float32
	tokens       []int32
}

func (r *rows) len() int { return len(r.tokens) }

func (r *rows) push(keys, values []float32, tok int32) {
	r.keys, r.values, r.tokens = append(r.keys, keys...), append(r.values, values...), append(r.tokens, tok)
}

func (r *rows) truncate(n int) {
	r.keys, r.values, r.tokens = r.keys[:n*Dim], r.values[:n*Dim], r.tokens[:n]
}

// readInto copies row i into dst's one-row storage.
func (r *rows) readInto(dst *Ctx, i int) {
	copy(dst.Keys, r.keys[i*Dim:(i+1)*Dim])
	copy(dst.Values, r.values[i*Dim:(i+1)*Dim])
	dst.Token[0] = r.tokens[i]
}

func (r *rows) copyFrom(o *rows) {
	r.keys, r.values, r.tokens = append(r.keys[:0], o.keys...), append(r.values[:0], o.values...), append(r.tokens[:0], o.tokens...)
}

type sharedRows struct {
	rows
	refs int
}

func newPeerA(sz sizes) side {
	return &peerA{sz: sz, own: make([]rows, sz.sessions), row: newRow(), dst: *newRow(), prompt: &sharedRows{}}
}

func (s *peerA) round(seed uint64) (int, uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	pr := s.prompt
	pr.truncate(0)
	for i := range s.sz.prompt {
		r := rowOf(s.row, tokenAt(i))
		pr.push(r.Keys, r.Values, r.Token[0])
	}
	for i := range s.own {
		s.own[i].truncate(0)
		pr.refs++
	}
	var sum uint64
	n := s.sz.prompt
	for t := range s.sz.steps {
		for i := range s.own {
			c := &s.own[i]
			r := rowOf(s.row, int32(1000+t))
			c.push(r.Keys, r.Values, r.Token[0])
			l := n + c.len()
			for _, r := range [2]int{rng.IntN(l), l - 1} {
				if r < n {
					pr.readInto(&s.dst, r)
				} else {
					c.readInto(&s.dst, r-n)
				}
				sum = sumRow(sum, s.dst.Keys, s.dst.Values, s.dst.Token[0])
			}
		}
	}
	pr.refs -= len(s.own)
	return s.sz.sessions * s.sz.steps, sum
}

func (s *peerA) close() error { return nil }

// ---- b: beam search ----

type storeB struct {
	p           *state.Pool
	sz          sizes
	row         *Ctx
	dst         Ctx
	beams, next []*CtxState
	parentOf    []int
	prompt      Ctx
}

func newStoreB(p *state.Pool, sz sizes) side {
	s := &storeB{p: p, sz: sz, row: newRow(), beams: make([]*CtxState, 0, sz.sessions), next: make([]*CtxState, sz.sessions), parentOf: make([]int, sz.sessions)}
	for i := range sz.prompt {
		r := rowOf(s.row, tokenAt(i))
		s.prompt.Keys, s.prompt.Values, s.prompt.Token = append(s.prompt.Keys, r.Keys...), append(s.prompt.Values, r.Values...), append(s.prompt.Token, r.Token[0])
	}
	return s
}

// survivors draws each survivor's parent among n beams.
func survivors(rng *rand.Rand, parentOf []int, n int) {
	for k := range parentOf {
		parentOf[k] = rng.IntN(n)
	}
}

func (s *storeB) round(seed uint64) (int, uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	root, err := NewCtxState(s.p, state.Owner(s.sz.tag+"beam"))
	must(err)
	must(root.Append(s.prompt))
	s.beams = append(s.beams[:0], root)
	for t := range s.sz.steps {
		survivors(rng, s.parentOf, len(s.beams))
		for k, pi := range s.parentOf {
			s.next[k], err = s.beams[pi].Branch()
			must(err)
			must(s.next[k].Append(rowOf(s.row, int32(100*t+k))))
		}
		for _, b := range s.beams {
			must(b.Release())
		}
		s.beams = append(s.beams[:0], s.next...)
	}
	var sum uint64
	for _, b := range s.beams {
		must(b.ReadInto(&s.dst, 0, b.Len()))
		for i := range b.Len() {
			sum = sumRow(sum, s.dst.Keys[i*Dim:(i+1)*Dim], s.dst.Values[i*Dim:(i+1)*Dim], s.dst.Token[i])
		}
		must(b.Release())
	}
	s.beams = s.beams[:0]
	return s.sz.sessions * s.sz.steps, sum
}

func (s *storeB) close() error { return nil }

// peerB: a beam's rows in columns of its own; a branch copies its
// parent's, but the last child of a parent takes the parent's over.
type peerB struct {
	sz          sizes
	row         *Ctx
	beams, next []*rows
	free        []*rows
	parentOf    []int
	children    []int
}

func newPeerB(sz sizes) side {
	return &peerB{sz: sz, row: newRow(), parentOf: make([]int, sz.sessions), children: make([]int, sz.sessions), next: make([]*rows, sz.sessions)}
}

func (s *peerB) take() *rows {
	if n := len(s.free); n > 0 {
		r := s.free[n-1]
		s.free = s.free[:n-1]
		return r
	}
	return &rows{}
}

func (s *peerB) round(seed uint64) (int, uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	root := s.take()
	root.truncate(0)
	for i := range s.sz.prompt {
		r := rowOf(s.row, tokenAt(i))
		root.push(r.Keys, r.Values, r.Token[0])
	}
	s.beams = append(s.beams[:0], root)
	for t := range s.sz.steps {
		survivors(rng, s.parentOf, len(s.beams))
		clear(s.children)
		for _, pi := range s.parentOf {
			s.children[pi]++
		}
		// Copies first, while every parent is as it was; then each
		// parent's last child takes its buffer over.
		for k, pi := range s.parentOf {
			if s.children[pi] > 1 {
				s.children[pi]--
				c := s.take()
				c.copyFrom(s.beams[pi])
				s.next[k] = c
			} else {
				s.next[k] = nil
			}
		}
		for k, pi := range s.parentOf {
			if s.next[k] == nil {
				s.next[k] = s.beams[pi]
				s.beams[pi] = nil
			}
		}
		for _, b := range s.beams[:len(s.beams)] {
			if b != nil {
				s.free = append(s.free, b) // pruned
			}
		}
		for k := range s.next {
			r := rowOf(s.row, int32(100*t+k))
			s.next[k].push(r.Keys, r.Values, r.Token[0])
		}
		s.beams = append(s.beams[:0], s.next...)
	}
	var sum uint64
	dst := newRow()
	for _, b := range s.beams {
		for i := range b.len() {
			b.readInto(dst, i)
			sum = sumRow(sum, dst.Keys, dst.Values, dst.Token[0])
		}
		s.free = append(s.free, b)
	}
	s.beams = s.beams[:0]
	return s.sz.sessions * s.sz.steps, sum
}

func (s *peerB) close() error { return nil }

// ---- c and cc: speculative decoding ----

type storeC struct {
	p       *state.Pool
	sz      sizes
	each    bool // a snapshot after every draft (cc)
	owners  []state.Owner
	row     *Ctx
	dst     Ctx
	ss      []*CtxState
	prompts []Ctx
	snaps   [5]*CtxSnapshot
}

func newStoreC(p *state.Pool, sz sizes, each bool) side {
	s := &storeC{p: p, sz: sz, each: each, owners: owners(sz), row: newRow(), dst: *newRow(), ss: make([]*CtxState, sz.sessions)}
	for i := range sz.sessions {
		var c Ctx
		for j := range sz.prompt {
			r := rowOf(s.row, int32(i*1000+j))
			c.Keys, c.Values, c.Token = append(c.Keys, r.Keys...), append(c.Values, r.Values...), append(c.Token, r.Token[0])
		}
		s.prompts = append(s.prompts, c)
	}
	return s
}

func (s *storeC) round(seed uint64) (int, uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	var err error
	for i := range s.ss {
		s.ss[i], err = NewCtxState(s.p, s.owners[i])
		must(err)
		must(s.ss[i].Append(s.prompts[i]))
	}
	var sum uint64
	for t := range s.sz.steps {
		for _, c := range s.ss {
			drafts, k := draws(rng)
			s.snaps[0], err = c.Snapshot()
			must(err)
			for i, d := range drafts {
				must(c.Append(rowOf(s.row, d)))
				if s.each && i < 3 {
					s.snaps[i+1], err = c.Snapshot()
					must(err)
				}
			}
			if k < 4 {
				if s.each {
					must(c.Rollback(s.snaps[k]))
				} else {
					must(c.Rollback(s.snaps[0]))
					for _, d := range drafts[:k] {
						must(c.Append(rowOf(s.row, d)))
					}
				}
				must(c.Append(rowOf(s.row, int32(5000+t)))) // the target's token
			}
			for i, v := range s.snaps {
				if v != nil {
					must(v.Release())
					s.snaps[i] = nil
				}
			}
			must(c.ReadInto(&s.dst, c.Len()-1, c.Len()))
			sum = sumRow(sum, s.dst.Keys, s.dst.Values, s.dst.Token[0])
		}
	}
	for _, c := range s.ss {
		must(c.Release())
	}
	return s.sz.sessions * s.sz.steps, sum
}

func (s *storeC) close() error { return nil }

// peerC: a snapshot is a length; a rollback truncates to it.
type peerC struct {
	sz  sizes
	row *Ctx
	dst *Ctx
	ss  []rows
}

func newPeerC(sz sizes) side {
	return &peerC{sz: sz, row: newRow(), dst: newRow(), ss: make([]rows, sz.sessions)}
}

// prefill gives every session its prompt, as the store's sides append it.
func (s *peerC) prefill() {
	for i := range s.ss {
		c := &s.ss[i]
		c.truncate(0)
		for j := range s.sz.prompt {
			r := rowOf(s.row, int32(i*1000+j))
			c.push(r.Keys, r.Values, r.Token[0])
		}
	}
}

func (s *peerC) round(seed uint64) (int, uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	s.prefill()
	var sum uint64
	for t := range s.sz.steps {
		for i := range s.ss {
			c := &s.ss[i]
			drafts, k := draws(rng)
			n := c.len()
			for _, d := range drafts {
				r := rowOf(s.row, d)
				c.push(r.Keys, r.Values, r.Token[0])
			}
			if k < 4 {
				c.truncate(n + k)
				r := rowOf(s.row, int32(5000+t))
				c.push(r.Keys, r.Values, r.Token[0])
			}
			c.readInto(s.dst, c.len()-1)
			sum = sumRow(sum, s.dst.Keys, s.dst.Values, s.dst.Token[0])
		}
	}
	return s.sz.sessions * s.sz.steps, sum
}

func (s *peerC) close() error { return nil }

// ---- d and dr: speculative decoding of a hybrid model ----

// storeD runs (d) on HybridState groups, or (dr) on HybridRState groups
// whose recurrent state steps through Step.
type storeD struct {
	p       *state.Pool
	sz      sizes
	replay  bool
	owners  []state.Owner
	row     *Ctx
	dst     Ctx
	rec     Rec
	in      RecIn
	gs      []*HybridState
	gr      []*HybridRState
	prompts []Ctx
}

func newStoreD(p *state.Pool, sz sizes, replay bool) side {
	s := &storeD{p: p, sz: sz, replay: replay, owners: owners(sz), row: newRow(), dst: *newRow(),
		rec: Rec{H: make([]float32, RecRows*RecDim)}, in: RecIn{X: make([]float32, RecRows*InDim)}}
	s.prompts = newStoreC(p, sz, false).(*storeC).prompts
	return s
}

// token feeds session i one token: the recurrent step, then its KV row.
func (s *storeD) token(i int, tok int32) {
	inputOf(s.in.X, tok)
	if s.replay {
		g := s.gr[i]
		must(g.Rec().StepHost(s.in, recurStep))
		must(g.KV().Append(rowOf(s.row, tok)))
		return
	}
	g := s.gs[i]
	must(g.Rec().ReadInto(&s.rec, 0, RecRows))
	for k := range RecRows {
		recur(s.rec.H[k*RecDim:(k+1)*RecDim], s.in.X[k*InDim:(k+1)*InDim])
	}
	must(g.Rec().Write(0, s.rec))
	must(g.KV().Append(rowOf(s.row, tok)))
}

func (s *storeD) round(seed uint64) (int, uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	n := s.sz.sessions
	s.gs, s.gr = s.gs[:0], s.gr[:0]
	for i := range n {
		if s.replay {
			g, err := NewHybridRState(s.p, s.owners[i])
			must(err)
			must(g.KV().Append(s.prompts[i]))
			s.gr = append(s.gr, g)
		} else {
			g, err := NewHybridState(s.p, s.owners[i])
			must(err)
			must(g.KV().Append(s.prompts[i]))
			s.gs = append(s.gs, g)
		}
	}
	var sum uint64
	for t := range s.sz.steps {
		for i := range n {
			drafts, k := draws(rng)
			var snapD *HybridSnapshot
			var snapR *HybridRSnapshot
			var err error
			if s.replay {
				snapR, err = s.gr[i].Snapshot()
			} else {
				snapD, err = s.gs[i].Snapshot()
			}
			must(err)
			for _, d := range drafts {
				s.token(i, d)
			}
			if k < 4 {
				if s.replay {
					must(s.gr[i].Rollback(snapR))
				} else {
					must(s.gs[i].Rollback(snapD))
				}
				for _, d := range drafts[:k] {
					s.token(i, d)
				}
				s.token(i, int32(5000+t))
			}
			// Each cut released where it is not nil, as statevet follows
			// a null test (it does not correlate the two tests of replay).
			if snapR != nil {
				must(snapR.Release())
			}
			if snapD != nil {
				must(snapD.Release())
			}
			var kv *CtxState
			if s.replay {
				kv = s.gr[i].KV()
				must(s.gr[i].Rec().ReadInto((*RecR)(&s.rec), 0, 1))
			} else {
				kv = s.gs[i].KV()
				must(s.gs[i].Rec().ReadInto(&s.rec, 0, 1))
			}
			must(kv.ReadInto(&s.dst, kv.Len()-1, kv.Len()))
			sum = sumRow(sum, s.dst.Keys, s.dst.Values, s.dst.Token[0])
			sum = sum*31 + uint64(math.Float32bits(s.rec.H[RecDim-1]))
		}
	}
	for _, g := range s.gs {
		must(g.Release())
	}
	for _, g := range s.gr {
		must(g.Release())
	}
	return n * s.sz.steps, sum
}

func (s *storeD) close() error { return nil }

// peerD: peerC, and each session's recurrent state in a ring of the
// states after each draft: a rollback picks the accepted one.
type peerD struct {
	peerC
	ring [][5][]float32
	cur  []int
	in   []float32
}

func newPeerD(sz sizes) side {
	s := &peerD{peerC: *newPeerC(sz).(*peerC), ring: make([][5][]float32, sz.sessions), cur: make([]int, sz.sessions), in: make([]float32, RecRows*InDim)}
	for i := range s.ring {
		for j := range s.ring[i] {
			s.ring[i][j] = make([]float32, RecRows*RecDim)
		}
	}
	return s
}

// token feeds session i one token: the state after it goes to the ring's
// next slot.
func (s *peerD) token(i int, tok int32) {
	inputOf(s.in, tok)
	from, to := s.ring[i][s.cur[i]], s.ring[i][(s.cur[i]+1)%5]
	copy(to, from)
	for k := range RecRows {
		recur(to[k*RecDim:(k+1)*RecDim], s.in[k*InDim:(k+1)*InDim])
	}
	s.cur[i] = (s.cur[i] + 1) % 5
	r := rowOf(s.row, tok)
	s.ss[i].push(r.Keys, r.Values, r.Token[0])
}

func (s *peerD) round(seed uint64) (int, uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	s.prefill()
	for i := range s.ss {
		s.cur[i] = 0
		clear(s.ring[i][0])
	}
	var sum uint64
	for t := range s.sz.steps {
		for i := range s.ss {
			c := &s.ss[i]
			drafts, k := draws(rng)
			n, at := c.len(), s.cur[i]
			for _, d := range drafts {
				s.token(i, d)
			}
			if k < 4 {
				c.truncate(n + k)
				s.cur[i] = (at + k) % 5
				s.token(i, int32(5000+t))
			}
			c.readInto(s.dst, c.len()-1)
			sum = sumRow(sum, s.dst.Keys, s.dst.Values, s.dst.Token[0])
			sum = sum*31 + uint64(math.Float32bits(s.ring[i][s.cur[i]][RecDim-1]))
		}
	}
	return s.sz.sessions * s.sz.steps, sum
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
