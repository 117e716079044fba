package decoder_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/examples/hybrid/decoder"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

var (
	modelSteps = flag.Int("model.steps", 500, "steps of TestDecoderModel per seed")
	modelSeed  = flag.Uint64("model.seed", 0, "the one seed TestDecoderModel runs; 0 runs seeds 1 to 4")
)

// TestDecoderModel drives the generated Decoder group handles the way a
// server does, and the way a careless caller does, against a reference of
// every session's tokens and recurrent rows. Sessions of three owners in
// two domains adopt shared prompt prefixes, feed tokens (a recurrent Step,
// then a KV Append), take group snapshots, roll back to them, branch,
// feed the branch and merge it back or drop it, and go. Between them come
// the calls a careless caller makes: every method of a nil group handle,
// of a nil group snapshot and of a released group; Step with a nil
// function, with an input whose length is no multiple of its row, with a
// function that fails after writing and one that panics. After every step
// it checks:
//
//   - no panic: a misused handle answers an error (state.ErrReleased, or
//     state.ErrShape for a nil function or a malformed input), and the
//     step function of a malformed input never runs;
//   - rows: each live session reads as its reference (its KV rows its
//     tokens', its recurrent rows the state after them), a misuse or a
//     failed step changing nothing; a branch's writes do not reach its
//     parent; each kept snapshot reads as it was taken;
//   - rollback: snapshots taken after the cut a group rolled back to
//     answer state.ErrInvalidated;
//   - at the end, every byte goes back to the pool.
//
// The deeper interactions of groups with sharing, eviction and faults
// are runtime/state's TestSharedGroupModel; this one is the generated
// code's.
func TestDecoderModel(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4}
	if *modelSeed != 0 {
		seeds = []uint64{*modelSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runDecoderModel(t, seed, *modelSteps) })
	}
}

const rowsPerBlock = 16 // the KV rows of a block, on the model's pool

// dModel is the model's reference and the pool it drives.
type dModel struct {
	t      *testing.T
	seed   uint64
	step   int
	op     string
	rng    *rand.Rand
	p      *state.Pool
	b      device.Backend
	live   []*dSession
	gone   []*decoder.DecoderState // released groups, for misuse
	bases  [2][]int32
	counts map[string]int
}

// dSession is a live group and its reference.
type dSession struct {
	g      *decoder.DecoderState
	owner  int
	d      state.Domain
	tokens []int32 // fed so far
	rest   []int32 // the prompt still to feed
	snaps  []dSnap // oldest first: a chain, as a rollback drops those after its cut
}

// dSnap is a group snapshot and the tokens its session had.
type dSnap struct {
	v      *decoder.DecoderSnapshot
	tokens []int32
}

func runDecoderModel(t *testing.T, seed uint64, steps int) {
	b := device.Host()
	defer b.Close()
	// Blocks of 16 KV rows: 2 KiB hold 16 rows of the widest column.
	p, err := state.NewPool(b, state.PoolOptions{BlockBytes: rowsPerBlock * 32 * 4})
	if err != nil {
		t.Fatal(err)
	}
	m := &dModel{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 5)), p: p, b: b, counts: map[string]int{}}
	for i := range m.bases {
		for range 48 {
			m.bases[i] = append(m.bases[i], int32(m.rng.IntN(3)))
		}
	}
	for m.step = range steps {
		m.doGuarded()
		m.verify()
	}
	for len(m.live) > 0 {
		m.release(m.live[0])
	}
	for _, d := range []state.Domain{"d0", "d1"} {
		p.ForgetPrefixes(d)
	}
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
		t.Errorf("seed %d: after every release: %d live, %d physical bytes", seed, st.Live, st.PhysicalBytes)
	}
	if err := p.Close(); err != nil {
		t.Errorf("seed %d: Close: %v", seed, err)
	}
	for _, c := range []string{"adopted", "rollback", "merge", "nil handle", "released handle", "nil function", "malformed input", "failing step"} {
		if m.counts[c] == 0 {
			t.Errorf("seed %d: no %q in %d steps: the model no longer reaches it (%v)", seed, c, steps, m.counts)
		}
	}
	t.Logf("seed %d: %v", seed, m.counts)
}

func (m *dModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d step %d (%s): %s\nreplay: go test ./examples/hybrid/decoder -run '^TestDecoderModel$' -args -model.seed=%d -model.steps=%d",
		m.seed, m.step, m.op, fmt.Sprintf(format, args...), m.seed, m.step+1)
}

func (m *dModel) check(err error) {
	m.t.Helper()
	if err != nil {
		m.fatalf("%v", err)
	}
}

// doGuarded takes one step; a panic that reaches it is a defect (the
// panicking step function's is recovered where it is made).
func (m *dModel) doGuarded() {
	defer func() {
		if r := recover(); r != nil {
			m.fatalf("defect class: no panic: %v", r)
		}
	}()
	m.do()
}

func (m *dModel) do() {
	m.op = "none"
	pick := func() *dSession { return m.live[m.rng.IntN(len(m.live))] }
	switch op := m.rng.IntN(40); {
	case op < 5 && len(m.live) < 6:
		m.op = "new session"
		m.newSession()
	case op < 20 && len(m.live) > 0:
		if s := pick(); len(s.rest) > 0 {
			m.op = "feed"
			for range 1 + m.rng.IntN(8) {
				if len(s.rest) > 0 {
					m.feed(s)
				}
			}
		}
	case op < 23 && len(m.live) > 0:
		m.op = "snapshot"
		s := pick()
		if len(s.snaps) < 4 {
			v, err := s.g.Snapshot()
			m.check(err)
			s.snaps = append(s.snaps, dSnap{v, slices.Clone(s.tokens)})
		}
	case op < 25 && len(m.live) > 0:
		m.op = "rollback"
		m.rollback(pick())
	case op < 27 && len(m.live) > 0:
		m.op = "branch"
		m.branch(pick())
	case op < 29 && len(m.live) > 0:
		m.op = "release"
		m.release(pick())
	case op < 31:
		m.op = "nil handle"
		m.misuse(nil, nil)
	case op < 33 && len(m.gone) > 0:
		m.op = "released handle"
		m.misuse(m.gone[m.rng.IntN(len(m.gone))], nil)
	case op < 35 && len(m.live) > 0:
		m.op = "nil function"
		m.badStep(pick(), "nil function")
	case op < 37 && len(m.live) > 0:
		m.op = "malformed input"
		m.badStep(pick(), "malformed input")
	case op < 40 && len(m.live) > 0:
		m.op = "failing step"
		m.badStep(pick(), []string{"fail", "panic"}[m.rng.IntN(2)])
	}
	if m.op != "none" {
		m.counts[m.op]++
	}
}

// newSession makes a shared group of a random owner and domain and adopts
// what it can of a prompt: a base prefix, parted somewhere, then tokens
// of the owner's own.
func (m *dModel) newSession() {
	s := &dSession{owner: m.rng.IntN(3), d: state.Domain(fmt.Sprint("d", m.rng.IntN(2)))}
	prompt := slices.Clone(m.bases[m.rng.IntN(2)][:16+m.rng.IntN(33)])
	prompt[len(prompt)-1-m.rng.IntN(8)] += 10
	for range m.rng.IntN(24) {
		prompt = append(prompt, int32(32+16*s.owner+m.rng.IntN(16)))
	}
	g, err := decoder.NewDecoderStateShared(m.p, state.Owner(fmt.Sprint("o", s.owner)), s.d)
	m.check(err)
	s.g = g
	n, err := g.AdoptPrefix(prompt)
	m.check(err)
	if n%rowsPerBlock != 0 || n > len(prompt) {
		m.fatalf("adopted %d rows of a %d-token prompt", n, len(prompt))
	}
	if n > 0 {
		m.counts["adopted"]++
	}
	s.tokens, s.rest = prompt[:n], prompt[n:]
	m.live = append(m.live, s)
}

// feed feeds s its next token.
func (m *dModel) feed(s *dSession) {
	tok := s.rest[0]
	m.check(m.feedTo(s.g, tok))
	s.tokens, s.rest = append(s.tokens, tok), s.rest[1:]
}

// feedTo feeds g one token: its recurrent step, then its KV row. Tokens
// of one parity step through StepHost (on the host backend, in place),
// the others through Step, so that histories mix both and replays run
// both; the token picks, not rng, so that the seeds' steps stay as they
// were.
func (m *dModel) feedTo(g *decoder.DecoderState, tok int32) error {
	var err error
	if tok%2 == 0 {
		err = g.Rec().StepHost(input(tok), stepHost(""))
	} else {
		err = g.Rec().Step(input(tok), stepOn(m.b, ""))
	}
	if err != nil {
		return err
	}
	return g.KV().Append(kvRow(tok))
}

// rollback rolls s back to one of its snapshots: those taken after it
// are invalidated, and dropped from the chain.
func (m *dModel) rollback(s *dSession) {
	if len(s.snaps) == 0 {
		return
	}
	k := m.rng.IntN(len(s.snaps))
	m.check(s.g.Rollback(s.snaps[k].v))
	s.tokens, s.rest = slices.Clone(s.snaps[k].tokens), nil
	for _, later := range s.snaps[k+1:] {
		// One taken with no write since the cut is the cut's version, no
		// descendant of it.
		descends := !slices.Equal(later.tokens, s.tokens)
		if _, err := later.v.KV().Read(0, len(later.tokens)); descends && !errors.Is(err, state.ErrInvalidated) {
			m.fatalf("defect class: rollback: a snapshot after the cut reads: %v; want state.ErrInvalidated", err)
		}
		m.check(later.v.Release())
	}
	s.snaps = s.snaps[:k+1]
	s.rest = []int32{int32(80 + s.owner), int32(81 + s.owner)} // it goes on another way
}

// branch branches s, feeds the branch (its writes must not reach s), and
// merges it back or drops it.
func (m *dModel) branch(s *dSession) {
	br, err := s.g.Branch()
	m.check(err)
	defer func() { m.check(br.Release()) }()
	more := []int32{int32(90 + m.rng.IntN(4))}
	for _, tok := range more {
		m.check(m.feedTo(br, tok))
	}
	m.verifySession(s) // the branch's writes are its own
	if m.rng.IntN(2) == 0 {
		m.check(s.g.Merge(br))
		m.counts["merge"]++
		s.tokens = append(s.tokens, more...)
	}
}

func (m *dModel) release(s *dSession) {
	for _, v := range s.snaps {
		m.check(v.v.Release())
	}
	m.check(s.g.Release())
	m.live = slices.DeleteFunc(m.live, func(x *dSession) bool { return x == s })
	m.gone = append(m.gone, s.g)
	if len(m.gone) > 4 {
		m.gone = m.gone[1:]
	}
}

// misuse calls a method of g (nil, or released) or of a nil snapshot, and
// expects state.ErrReleased, or nothing from the calls that answer no
// error.
func (m *dModel) misuse(g *decoder.DecoderState, v *decoder.DecoderSnapshot) {
	calls := []func() error{
		func() error {
			s, err := g.Snapshot()
			if err == nil {
				s.Release()
			}
			return err
		},
		func() error {
			b, err := g.Branch()
			if err == nil {
				b.Release()
			}
			return err
		},
		func() error { return g.Merge(nil) },
		func() error { return g.Rollback(v) },
		func() error { _, err := g.AdoptPrefix([]int32{1}); return err },
		func() error { return g.KV().Append(kvRow(1)) },
		func() error { _, err := g.KV().Read(0, 1); return err },
		func() error { return g.Rec().Write(0, decoder.Recurrent{H: make([]float32, decoder.Dim)}) },
		func() error { return g.Rec().Step(input(1), stepOn(m.b, "")) },
		func() error { return g.Rec().StepHost(input(1), stepHost("")) },
		func() error { _, err := g.Rec().Read(0, 1); return err },
		func() error { _, err := v.KV().Read(0, 1); return err },
		func() error { _, err := v.Rec().Read(0, 1); return err },
	}
	i := m.rng.IntN(len(calls) + 3)
	switch {
	case i < len(calls):
		if err := calls[i](); !errors.Is(err, state.ErrReleased) {
			m.fatalf("defect class: no panic: call %d on a nil or released handle: %v; want state.ErrReleased", i, err)
		}
	case i == len(calls):
		if err := errors.Join(g.Release(), v.Release()); err != nil {
			m.fatalf("defect class: no panic: Release of a nil or released handle: %v", err)
		}
	default:
		if st := g.Stats(); st != (state.Stats{}) {
			m.fatalf("defect class: no panic: Stats of a nil or released handle: %+v", st)
		}
	}
}

// badStep runs a step that must change nothing: its function nil, its
// input malformed, or its function failing or panicking after writing.
func (m *dModel) badStep(s *dSession, how string) {
	in, f := input(7), stepOn(m.b, how)
	ran := false
	switch how {
	case "nil function":
		f = nil
	case "malformed input":
		in.X = in.X[:len(in.X)-1-m.rng.IntN(decoder.Dim-1)]
		f = func(decoder.RecurrentSpans, decoder.RecInput) error { ran = true; return nil }
	}
	defer func() {
		if r := recover(); r != nil && how != "panic" {
			panic(r)
		}
	}()
	// Every other bad step goes through StepHost, whose function writes
	// the rows in place on the host backend before it fails.
	var err error
	if host := len(s.tokens)%2 == 0; host && how == "malformed input" {
		err = s.g.Rec().StepHost(in, func(*decoder.Recurrent, decoder.RecInput) error { ran = true; return nil })
	} else if host && how == "nil function" {
		err = s.g.Rec().StepHost(in, nil)
	} else if host && how == "fail" && len(s.tokens)%4 == 0 {
		// A field left shorter: state.ErrShape after the rows were written.
		if err = s.g.Rec().StepHost(in, stepHost("shape")); !errors.Is(err, state.ErrShape) {
			m.fatalf("defect class: no panic: StepHost leaving a field short: %v; want state.ErrShape", err)
		}
	} else if host {
		err = s.g.Rec().StepHost(in, stepHost(how))
	} else {
		err = s.g.Rec().Step(in, f)
	}
	switch {
	case ran:
		m.fatalf("defect class: no panic: the step function of a malformed input ran")
	case (how == "nil function" || how == "malformed input") && !errors.Is(err, state.ErrShape):
		m.fatalf("defect class: no panic: Step with a %s: %v; want state.ErrShape", how, err)
	case err == nil:
		m.fatalf("a %s step succeeded", how)
	}
}

// verify checks every live session and one snapshot of each against the
// reference.
func (m *dModel) verify() {
	for _, s := range m.live {
		m.verifySession(s)
		if len(s.snaps) > 0 {
			v := s.snaps[m.rng.IntN(len(s.snaps))]
			kv, err := v.v.KV().Read(0, len(v.tokens))
			m.check(err)
			rec, err := v.v.Rec().Read(0, decoder.RecLayers)
			m.check(err)
			m.compare("a snapshot", kv, rec, v.tokens)
		}
	}
}

func (m *dModel) verifySession(s *dSession) {
	m.t.Helper()
	kv, err := s.g.KV().Read(0, len(s.tokens))
	m.check(err)
	rec, err := s.g.Rec().Read(0, decoder.RecLayers)
	m.check(err)
	m.compare("a session", kv, rec, s.tokens)
}

func (m *dModel) compare(what string, kv decoder.KVCache, rec decoder.Recurrent, tokens []int32) {
	m.t.Helper()
	var want decoder.KVCache
	for _, tok := range tokens {
		r := kvRow(tok)
		want.Keys, want.Values, want.Token = append(want.Keys, r.Keys...), append(want.Values, r.Values...), append(want.Token, r.Token...)
	}
	if !slices.Equal(kv.Keys, want.Keys) || !slices.Equal(kv.Values, want.Values) || !slices.Equal(kv.Token, want.Token) {
		m.fatalf("defect class: rows: %s's KV rows are not its %d tokens'", what, len(tokens))
	}
	if !slices.Equal(rec.H, recState(tokens)) {
		m.fatalf("defect class: rows: %s's recurrent rows are not the state after its %d tokens", what, len(tokens))
	}
}

// kvRow is token tok's KV row.
func kvRow(tok int32) decoder.KVCache {
	r := decoder.KVCache{Keys: make([]float32, 32), Values: make([]float32, 32), Token: []int32{tok}}
	for j := range r.Keys {
		r.Keys[j] = float32(tok) + float32(j)/64
		r.Values[j] = -float32(tok) - float32(j)
	}
	return r
}

// input is the recurrent step's input for token tok, one row per layer.
func input(tok int32) decoder.RecInput {
	x := make([]float32, decoder.RecLayers*decoder.Dim)
	for i := range x {
		x[i] = float32(tok%11)/4 + float32(i)/32
	}
	return decoder.RecInput{X: x}
}

// recur is the recurrence, one function for the step and the reference
// so that both round alike.
func recur(h, x []float32) {
	for i := range h {
		h[i] = h[i]/2 + x[i]
	}
}

// recState is the recurrent rows after tokens, from zero.
func recState(tokens []int32) []float32 {
	h := make([]float32, decoder.RecLayers*decoder.Dim)
	for _, tok := range tokens {
		recur(h, input(tok).X)
	}
	return h
}

// stepHost is stepOn for StepHost: recur on the rows; fail ("fail",
// "panic" or "shape") writes junk into them first and fails, panics, or
// leaves a field of another length.
func stepHost(fail string) func(*decoder.Recurrent, decoder.RecInput) error {
	return func(rows *decoder.Recurrent, in decoder.RecInput) error {
		recur(rows.H, in.X)
		if fail != "" {
			clear(rows.H)
			rows.H[0] = 0xee
		}
		switch fail {
		case "fail":
			return errors.New("the step fails on purpose")
		case "panic":
			panic("the step panics on purpose")
		case "shape":
			rows.H = rows.H[:len(rows.H)-1]
		}
		return nil
	}
}

// stepOn returns the recurrent step on backend b: it copies the rows to
// the host, applies recur and copies them back; fail ("fail" or
// "panic") writes junk first and fails, or panics.
func stepOn(b device.Backend, fail string) func(decoder.RecurrentSpans, decoder.RecInput) error {
	return func(dst decoder.RecurrentSpans, in decoder.RecInput) error {
		row := 0
		for _, sp := range dst.H {
			buf := make([]byte, sp.Rows*4*decoder.Dim)
			if err := b.CopyDtoH(buf, sp.Ptr); err != nil {
				return err
			}
			h := state.Rows[float32](buf)
			recur(h, in.X[row*decoder.Dim:(row+sp.Rows)*decoder.Dim])
			if fail != "" {
				clear(buf)
				buf[0] = 0xee
			}
			if err := b.CopyHtoD(sp.Ptr, buf); err != nil {
				return err
			}
			row += sp.Rows
		}
		switch fail {
		case "fail":
			return errors.New("the step fails on purpose")
		case "panic":
			panic("the step panics on purpose")
		}
		return nil
	}
}
