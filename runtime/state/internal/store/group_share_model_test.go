package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestSharedGroupModel drives shared groups of a KV member (the key) and a
// replayed recurrent member where they meet the other features: prompts
// that share prefixes across owners and two domains, tokens fed by Append
// and by AppendDevice (registered once written), prefills a kernel writes
// on a recorded stream before its writer goes idle, steps that fail or
// panic after writing in place, ForgetPrefixes, hand-offs (a prefix one
// owner filled, adopted by another who writes it in place once its domain
// is forgotten), a Layout value widened in place between sessions,
// mandatory and optional groups under a pool cap that makes the Evictor
// take groups, owners that come back for fresh state, and the group's At
// of a past version (an adoption's among them), then a Rollback to it.
// Against its reference it checks, after every step:
//
//   - rows: each live session reads as its reference (its KV rows are its
//     own tokens, its recurrent state the state after them), and so does
//     each cut At rebuilds;
//   - together: an optional group's members are evicted together, and
//     only optional groups are;
//   - adoption: a new session adopts at least the longest prefix of its
//     prompt that a group of its layouts and domain registered (fed by
//     Append, by AppendDevice once its writer called again, or by a kernel
//     on a recorded stream that has completed), unless the pool evicted
//     or forgot since;
//   - isolation: an owner's fresh state (a new head, rows a kernel has not
//     written yet) holds no word that owner did not write or adopt;
//   - accounting: with every session released, every physical byte is
//     cached, and a mandatory state as large as the cap takes all of it;
//   - counts: each adoption counts one call, a hit when it adopted rows,
//     and the rows;
//   - the pool's invariants, and at the end that every byte goes back.
//
// Which check catches which defect, found by reverting each fix: rows a
// failed step that lost the head's rows, a widened layout that found the
// narrower table, and an adoption whose members' versions had two places
// in the commit order (At's cut took the recurrent member before it); together an optional group's member evicted alone;
// the invariants a panicking step's leaked blocks; isolation a step
// written in place into another owner's adopted blocks; accounting the
// joint count of shared registered states (freeable and cached bytes);
// adoption a kernel-written prefix registered never, or only at its
// writer's next call.
func TestSharedGroupModel(t *testing.T) {
	steps := modelSteps(t, 600)
	for _, seed := range statetest.Seeds(1, 2, 3, 4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runSharedGroupModel(t, seed, steps) })
	}
}

// sgLayouts are one retention's member layouts: the shared KV and a
// replayed recurrent state, whose width the model widens in place.
type sgLayouts struct{ kv, rec *Layout }

func newSGLayouts(r Retention) sgLayouts {
	kv := *tokLayout
	kv.Retention = r
	kv.Checkpoint = &CheckpointPolicy{Every: 8, Keep: 4} // for the group's At
	recL := rec(Invalidate)
	recL.Retention = r
	recL.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 2}
	recL.Input = []Column{{Name: "Tok", ElemSize: 4, Width: 1}}
	return sgLayouts{&kv, recL}
}

// sgSession is a live shared group: its members' reference heads
// (ref_model_test.go: the KV rows of its tokens, the recurrent state after
// them) and what the sharing adds: its owner, table and tokens, which
// key the prefixes it registers and adopts.
type sgSession struct {
	g        *Group
	mem      [2]*RefHandle
	owner    int
	lay      int // index of its layouts: 0 mandatory, 1 optional
	width    int // its recurrent rows' width, in words
	d        Domain
	tokens   []uint32 // fed so far: the KV's keys, and what the recurrent state is after
	rest     []uint32 // the prompt still to feed
	streamed bool     // its KV member recorded the model's stream
	// unwritten: its KV rows end at a block boundary, the last of them
	// appended by AppendDevice: its state registers once they are written
	// (at the writer's next call).
	unwritten bool
	cuts      []sgCut // the group's versions, oldest first, for At
}

// sgCut is a session's group as it was at version v of its KV member:
// its tokens and its members' reference versions and rows.
type sgCut struct {
	v      Version
	tokens int
	refV   [2]Version
	cols   [2][][]byte
}

// cut records s's group as it is now, a version of its KV member's.
func (s *sgSession) cut() {
	c := sgCut{v: s.g.Head(0).Version(), tokens: len(s.tokens)}
	for i, x := range s.mem {
		c.refV[i], c.cols[i] = x.V, cloneCols(x.Cols)
	}
	s.cuts = append(s.cuts, c)
}

func (s *sgSession) optional() bool { return s.lay == 1 }

// refLayout returns a copy of l: the layout a reference lineage keeps, as
// the store keeps the layout a head was made with when the caller's Layout
// value is widened in place.
func refLayout(l *Layout) *Layout {
	c := *l
	c.Columns = slices.Clone(l.Columns)
	return &c
}

// fed records in s's reference heads that the members took tokens: the
// KV member's rows, the recurrent member's state after them.
func (s *sgSession) fed(toks []uint32) {
	s.mem[1].Commit([][]byte{recState(append(slices.Clone(s.tokens), toks...), s.width)})
	s.mem[0].Append(tailWant(toks))
}

// recState is the recurrent state after tokens, from zero, of rows of
// width words: the state sgStep leaves.
func recState(tokens []uint32, width int) []byte {
	h := make([]byte, 4*8*width)
	for _, tok := range tokens {
		for i := range h {
			h[i] = h[i]*31 + byte(tok) + byte(i)
		}
	}
	return h
}

// sgStep is the recurrent step of rows of width words, as a step
// function: it reads the rows, updates them with the token, and writes
// them back; fail writes junk and fails, or panics.
func sgStep(b device.Backend, width int, fail string) StepFunc {
	return func(spans [][]device.Span, in [][]byte) error {
		sp := spans[0][0]
		h := make([]byte, sp.Rows*8*width)
		if err := b.CopyDtoH(h, sp.Ptr); err != nil {
			return err
		}
		tok := binary.LittleEndian.Uint32(in[0])
		for i := range h {
			h[i] = h[i]*31 + byte(tok) + byte(i)
		}
		if fail != "" {
			if err := b.Memset(sp.Ptr, 0xee, len(h)); err != nil {
				return err
			}
			if fail == "panic" {
				panic("step panics on purpose")
			}
			return errStep
		}
		return b.CopyHtoD(sp.Ptr, h)
	}
}

// sgRegKey names a group prefix table: the layouts, their width, the
// domain.
type sgRegKey struct {
	lay, width int
	d          Domain
}

// sgModel is the model's state and reference.
type sgModel struct {
	t      *testing.T
	seed   uint64
	step   int
	op     string // what the step did, for messages
	rng    *rand.Rand
	p      *Pool
	b      device.Backend
	st     device.Stream
	lay    [2]sgLayouts
	width  int // the width the layouts have now
	live   []*sgSession
	bases  [][]uint32
	counts map[string]int
	// reg is the reference of the registered prefixes, as key bytes, by
	// table: cleared for a domain by ForgetPrefixes, and whole when the
	// pool evicted anything (evictions: the count it was cleared at).
	reg       map[sgRegKey]map[string]bool
	evictions int64
	// seen holds, by owner, every word that owner's states held: what a
	// fresh state of it may read besides zeros and a failed step's junk.
	seen [sgOwners]map[[8]byte]bool
}

const sgOwners = 3

var sgDomains = []Domain{"d0", "d1"}

func (m *sgModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d step %d (%s): %s\nreplay: %s",
		m.seed, m.step, m.op, fmt.Sprintf(format, args...), statetest.Replay(m.t, m.seed, m.step+1))
}

// sees adds the words of rows to what owner o has held.
func (m *sgModel) sees(o int, rows []byte) {
	for i := 0; i+8 <= len(rows); i += 8 {
		m.seen[o][[8]byte(rows[i:])] = true
	}
}

func runSharedGroupModel(t *testing.T, seed uint64, steps int) {
	p := newPool(t, PoolOptions{BlockBytes: 1024, MaxBytes: 48 << 10})
	m := &sgModel{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 11)), p: p, b: p.Backend(),
		lay: [2]sgLayouts{newSGLayouts(Mandatory), newSGLayouts(Optional)}, width: 1,
		counts: map[string]int{}, reg: map[sgRegKey]map[string]bool{}}
	m.st = must[device.Stream](t)(m.b.(device.Streams).NewStream())
	defer m.st.Close()
	for o := range m.seen {
		m.seen[o] = map[[8]byte]bool{}
	}
	m.bases = make([][]uint32, 2)
	for i := range m.bases {
		for range 64 {
			m.bases[i] = append(m.bases[i], uint32(m.rng.IntN(3)))
		}
	}
	defer func() {
		for _, s := range m.live {
			s.g.Release()
		}
	}()
	for m.step = range steps {
		m.do()
		m.verify()
		if err := checkInvariants(p); err != nil {
			m.fatalf("%v", err)
		}
	}
	for _, s := range m.live {
		check(t, s.g.Release())
	}
	m.live = nil
	for _, d := range sgDomains {
		p.ForgetPrefixes(d)
	}
	p.WaitPending()
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 || st.CachedBytes != 0 {
		t.Fatalf("seed %d: after every release and forget: %d live, %d physical, %d cached bytes\nreplay: %s",
			seed, st.Live, st.PhysicalBytes, st.CachedBytes, statetest.Replay(t, seed, steps))
	}
	for _, c := range []string{"adoption checked", "isolation checked", "drain", "kernel prefill", "hand-off", "at checked", "rollback to a cut"} {
		if m.counts[c] == 0 {
			t.Errorf("seed %d: no %q in %d steps: the model no longer reaches it (%v)\nreplay: %s",
				seed, c, steps, m.counts, statetest.Replay(t, seed, steps))
		}
	}
	t.Logf("seed %d: %v", seed, m.counts)
}

// do takes one random step.
func (m *sgModel) do() {
	m.op = "none"
	switch op := m.rng.IntN(40); {
	case op < 6 && len(m.live) < 8:
		m.op = "new session"
		m.newSession()
	case op < 24 && len(m.live) > 0:
		s := m.live[m.rng.IntN(len(m.live))]
		if len(s.rest) > 0 {
			m.op = "feed"
			m.feed(s, m.rng.IntN(2) == 0)
		}
	case op < 26 && len(m.live) > 0:
		m.op = "failing step"
		m.failStep(m.live[m.rng.IntN(len(m.live))])
	case op < 28 && len(m.live) > 0:
		m.op = "kernel prefill"
		m.kernelPrefill(m.live[m.rng.IntN(len(m.live))])
	case op < 30:
		m.op = "forget"
		m.forget(sgDomains[m.rng.IntN(2)])
	case op < 32 && len(m.live) > 0:
		i := m.rng.IntN(len(m.live))
		m.op = "release"
		m.release(m.live[i])
	case op < 34:
		m.op = "fresh state"
		m.freshState(m.rng.IntN(sgOwners))
	case op < 35:
		// The caller's Layout values, reused for later sessions with
		// another width (live sessions keep the layouts they were made
		// with).
		m.op = "widen"
		m.width = 3 - m.width
		for _, l := range m.lay {
			l.rec.Columns[0].Width = m.width
		}
	case op < 36:
		m.op = "drain"
		m.drain()
	case op < 37 && len(m.live) < 8:
		m.op = "adopt, forget, write"
		m.adoptForgetWrite()
	case op < 39 && len(m.live) > 0:
		m.op = "at"
		m.at(m.live[m.rng.IntN(len(m.live))], m.rng.IntN(2) == 0)
	default: // pressure: a mandatory state of another owner comes and goes
		m.op = "pressure"
		l := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 16 + m.rng.IntN(32)}
		if h, err := m.p.NewHead(l, "z"); err == nil {
			check(m.t, h.Release())
		}
	}
}

// forget forgets domain d's prefixes, in the pool and the reference.
func (m *sgModel) forget(d Domain) {
	m.p.ForgetPrefixes(d)
	for k := range m.reg {
		if k.d == d {
			delete(m.reg, k)
		}
	}
}

func (m *sgModel) release(s *sgSession) {
	check(m.t, s.g.Release())
	s.mem[0].Release()
	s.mem[1].Release()
	m.live = slices.DeleteFunc(m.live, func(x *sgSession) bool { return x == s })
}

// registered returns the rows of the longest prefix of prompt the
// reference knows registered in s's table.
func (m *sgModel) registered(s *sgSession, prompt []uint32) int {
	m.forgetIfEvicted()
	tab := m.reg[sgRegKey{s.lay, s.width, s.d}]
	for n := len(prompt) / 16 * 16; n > 0; n -= 16 {
		if tab[string(keysOf(prompt[:n]))] {
			return n
		}
	}
	return 0
}

// register notes that s's table holds s's state at its tokens.
func (m *sgModel) register(s *sgSession) {
	m.forgetIfEvicted()
	k := sgRegKey{s.lay, s.width, s.d}
	if m.reg[k] == nil {
		m.reg[k] = map[string]bool{}
	}
	m.reg[k][string(keysOf(s.tokens))] = true
}

// forgetIfEvicted clears the reference of registrations once the pool
// evicted anything: the reference does not know what went.
func (m *sgModel) forgetIfEvicted() {
	if ev := m.p.Stats().Evictions; ev != m.evictions {
		m.evictions = ev
		clear(m.reg)
	}
}

// newSession makes a session that adopts what it can of a prompt: a base
// prefix parted somewhere, then tokens of its owner's own.
func (m *sgModel) newSession() {
	lay := m.rng.IntN(2)
	s := &sgSession{owner: m.rng.IntN(sgOwners), lay: lay, width: m.width, d: sgDomains[m.rng.IntN(2)]}
	prompt := slices.Clone(m.bases[m.rng.IntN(len(m.bases))])
	prompt = prompt[:16+m.rng.IntN(48)]
	prompt[len(prompt)-1-m.rng.IntN(8)] += 10 // prompts part somewhere
	for range m.rng.IntN(24) {
		prompt = append(prompt, uint32(32+16*s.owner+m.rng.IntN(16)))
	}
	m.adoptInto(s, prompt)
}

// adoptInto makes s's group, adopts a prefix of prompt and checks it
// against the reference.
func (m *sgModel) adoptInto(s *sgSession, prompt []uint32) {
	l := m.lay[s.lay]
	g, err := NewSharedGroup(m.p, Owner(fmt.Sprint("o", s.owner)), s.d, l.kv, l.rec)
	if errors.Is(err, ErrNoMemory) {
		return
	}
	check(m.t, err)
	s.g = g
	check(m.t, m.st.Sync()) // the kernels queued so far have run
	want := m.registered(s, prompt)
	before := m.p.Stats()
	n, err := g.AdoptPrefix(keysOf(prompt))
	if err == nil {
		hit := int64(min(n, 1))
		if st := m.p.Stats(); st.AdoptCalls != before.AdoptCalls+1 || st.AdoptHits != before.AdoptHits+hit || st.AdoptedRows != before.AdoptedRows+int64(n) {
			m.fatalf("defect class: counts: an adoption of %d rows moved the counts from %d calls, %d hits, %d rows to %d, %d, %d",
				n, before.AdoptCalls, before.AdoptHits, before.AdoptedRows, st.AdoptCalls, st.AdoptHits, st.AdoptedRows)
		}
	}
	if err != nil && !errors.Is(err, ErrNoMemory) && !errors.Is(err, ErrEvicted) {
		m.fatalf("AdoptPrefix: %v", err)
	}
	if n%16 != 0 || n > len(prompt) {
		m.fatalf("adopted %d rows of a %d-token prompt", n, len(prompt))
	}
	if err == nil && m.registered(s, prompt) == want && want > 0 {
		m.counts["adoption checked"]++
		if n < want {
			m.fatalf("defect class: adoption: adopted %d rows of a %d-token prompt whose first %d were registered in its table", n, len(prompt), want)
		}
	}
	owner := Owner(fmt.Sprint("o", s.owner))
	for i, ml := range []*Layout{l.kv, l.rec} {
		s.mem[i] = NewRefLineage(owner, refLayout(ml)).NewHead(g.Head(i))
	}
	if n > 0 {
		s.fed(prompt[:n]) // adopted
	}
	s.tokens, s.rest = prompt[:n], prompt[n:]
	s.cut() // with an adoption, one version of both members at once
	for i := range n + 1 {
		m.sees(s.owner, recState(prompt[:i], s.width))
	}
	m.live = append(m.live, s)
}

// feed feeds s's next token: its recurrent state by Step, then its KV row
// by Append, or by AppendDevice written through its spans as a kernel
// would.
func (m *sgModel) feed(s *sgSession, byKernel bool) bool {
	tok := s.rest[0]
	if err := s.g.Head(1).Step([][]byte{keysOf([]uint32{tok})}, false, sgStep(m.b, s.width, "")); err != nil {
		if errors.Is(err, ErrNoMemory) || errors.Is(err, ErrEvicted) {
			return false
		}
		m.fatalf("Step: %v", err)
	}
	m.sees(s.owner, recState(append(s.tokens, tok), s.width))
	var err error
	if byKernel {
		var spans [][]device.Span
		if spans, err = s.g.Head(0).AppendDevice(1); err == nil {
			for c, col := range tokRow(tok) {
				check(m.t, m.b.CopyHtoD(spans[c][0].Ptr, col))
			}
		}
	} else {
		err = s.g.Head(0).Append(tokRow(tok))
	}
	if err != nil {
		// The members part: drop the session (a real decoder would roll
		// both back), as Release gives both back.
		if !errors.Is(err, ErrNoMemory) && !errors.Is(err, ErrEvicted) {
			m.fatalf("append: %v", err)
		}
		m.release(s)
		return false
	}
	s.fed([]uint32{tok})
	s.tokens, s.rest = append(s.tokens, tok), s.rest[1:]
	s.cut()
	if len(s.tokens)%16 == 0 {
		if s.unwritten = byKernel; !byKernel {
			m.register(s) // at once; a device append's once written
		}
	}
	return true
}

// failStep runs a step that fails, or panics, after writing in place.
func (m *sgModel) failStep(s *sgSession) {
	mode := []string{"fail", "panic"}[m.rng.IntN(2)]
	defer func() {
		if r := recover(); r != nil && mode != "panic" {
			panic(r)
		}
	}()
	if err := s.g.Head(1).Step([][]byte{keysOf([]uint32{7})}, false, sgStep(m.b, s.width, mode)); err == nil {
		m.fatalf("a failing step succeeded")
	}
}

// at rebuilds a past cut of s's group by At and checks both members'
// rows against the reference; with rollback the group then rolls back to
// it, and s goes on from the cut's tokens.
func (m *sgModel) at(s *sgSession, rollback bool) {
	if len(s.cuts) == 0 {
		return
	}
	i := m.rng.IntN(len(s.cuts))
	c := s.cuts[i]
	cut, err := s.g.At(c.v)
	switch {
	case errors.Is(err, ErrNotRetained) || errors.Is(err, ErrNoMemory) || errors.Is(err, ErrEvicted):
		m.counts["at refused"]++
		return
	case err != nil:
		m.fatalf("At(%d): %v", c.v, err)
	}
	defer func() { check(m.t, cut.Release()) }()
	kv := [][]byte{make([]byte, 4*c.tokens), make([]byte, 8*c.tokens)}
	rc := [][]byte{make([]byte, 32*s.width)}
	kvErr, rcErr := cut.Snap(0).Read(0, c.tokens, kv), cut.Snap(1).Read(0, 4, rc)
	if s.optional() && (errors.Is(kvErr, ErrEvicted) || errors.Is(rcErr, ErrEvicted)) {
		// An optional group's cut is the Evictor's, as one victim.
		m.counts["at evicted"]++
		return
	}
	if kvErr != nil || rcErr != nil {
		m.fatalf("reading At(%d): %v, %v", c.v, kvErr, rcErr)
	}
	if !bytes.Equal(kv[0], c.cols[0][0]) || !bytes.Equal(kv[1], c.cols[0][1]) {
		m.fatalf("defect class: rows: At(%d): the KV member's %d rows are not those of the cut", c.v, c.tokens)
	}
	if !bytes.Equal(rc[0], c.cols[1][0]) {
		m.fatalf("defect class: rows: At(%d): the recurrent member is not the state after the cut's %d tokens", c.v, c.tokens)
	}
	m.counts["at checked"]++
	if !rollback || s.unwritten || i == len(s.cuts)-1 {
		return
	}
	if err := s.g.Rollback(cut); err != nil {
		if errors.Is(err, ErrNoMemory) || errors.Is(err, ErrEvicted) {
			return
		}
		m.fatalf("Rollback to At(%d): %v", c.v, err)
	}
	m.counts["rollback to a cut"]++
	for k, x := range s.mem {
		to := x.Lin.Snap(nil, c.refV[k], cloneCols(c.cols[k]))
		x.Rollback(to)
		to.Release()
	}
	s.rest = append(slices.Clone(s.tokens[c.tokens:]), s.rest...)
	s.tokens = s.tokens[:c.tokens:c.tokens]
	s.cuts = s.cuts[:i+1] // the versions past it are off the group's line
}

// kernelPrefill feeds s up to its next block boundary by AppendDevice on
// the model's stream, recorded before and after as a prefill kernel's
// writer does, and goes idle: once the stream's work has run, a session
// of another owner that comes next adopts the prefix.
func (m *sgModel) kernelPrefill(s *sgSession) {
	if !s.streamed {
		if err := s.g.Head(0).RecordStream(m.st); err != nil {
			m.fatalf("RecordStream: %v", err)
		}
		s.streamed = true
	}
	fed := 0
	for len(s.rest) > 0 && (fed == 0 || len(s.tokens)%16 != 0) {
		if !m.feed(s, true) {
			return
		}
		fed++
	}
	if fed == 0 || len(s.tokens)%16 != 0 {
		return // no block filled: nothing registers
	}
	if err := s.g.Head(0).RecordStream(m.st); err != nil {
		m.fatalf("RecordStream: %v", err)
	}
	check(m.t, m.st.Sync()) // the prefill's work has run; its writer calls no more
	m.counts["kernel prefill"]++
	m.register(s)
	s.unwritten = false
	o := (s.owner + 1) % sgOwners
	next := &sgSession{owner: o, lay: s.lay, width: s.width, d: s.d}
	if s.width != m.width || len(m.live) >= 8 {
		return // another table now, or no room for a session
	}
	prompt := slices.Clone(s.tokens)
	prompt = append(prompt, uint32(32+16*o))
	m.adoptInto(next, prompt)
}

// adoptForgetWrite is the path where a write in place would reach another
// owner's blocks: a session of one owner fills a prompt to a block
// boundary (registered) and goes; a session of another owner adopts it,
// its domain is forgotten (it holds the adopted blocks alone), it steps
// and goes; and every owner then makes fresh state.
func (m *sgModel) adoptForgetWrite() {
	a := m.rng.IntN(sgOwners)
	lay, d := m.rng.IntN(2), sgDomains[m.rng.IntN(2)]
	prompt := slices.Clone(m.bases[m.rng.IntN(len(m.bases))][:16*m.rng.IntN(3)])
	for len(prompt)%16 != 0 || len(prompt) == 0 {
		prompt = append(prompt, uint32(32+16*a+m.rng.IntN(16)))
	}
	n := len(m.live)
	m.adoptInto(&sgSession{owner: a, lay: lay, width: m.width, d: d}, prompt)
	if len(m.live) == n {
		return
	}
	for s := m.live[n]; len(s.rest) > 0; {
		if !m.feed(s, false) {
			return // released
		}
	}
	m.release(m.live[n])
	b := (a + 1 + m.rng.IntN(sgOwners-1)) % sgOwners
	m.adoptInto(&sgSession{owner: b, lay: lay, width: m.width, d: d}, prompt)
	if len(m.live) == n {
		return
	}
	s := m.live[n]
	if len(s.tokens) == 0 {
		return
	}
	m.counts["hand-off"]++
	m.forget(d)
	s.rest = append([]uint32{uint32(32 + 16*b)}, s.rest...)
	if m.feed(s, false) {
		m.release(s)
	}
	for o := range sgOwners {
		m.freshState(o)
	}
}

// freshState checks that owner o's fresh state reads nothing o did not
// hold: a new head's rows, and rows of a device append no kernel wrote.
func (m *sgModel) freshState(o int) {
	owner := Owner(fmt.Sprint("o", o))
	probeL := rec(Invalidate)
	appL := &Layout{Type: "App", Columns: probeL.Columns, Growth: Append, Bound: 8 * 128, BlockRows: 128}
	for _, l := range []*Layout{probeL, appL} {
		h, err := m.p.NewHead(l, owner)
		if errors.Is(err, ErrNoMemory) {
			continue
		}
		check(m.t, err)
		rows := 4
		if l.Growth == Append {
			// As many blocks as there is room for, up to 8: the owner's
			// free blocks, whichever it was given back last.
			for rows = l.Bound; rows > 0; rows -= l.BlockRows {
				if _, err = h.AppendDevice(rows); err == nil {
					break
				}
			}
			if err != nil {
				check(m.t, h.Release())
				continue
			}
		}
		got := [][]byte{make([]byte, rows*8)}
		check(m.t, h.Read(0, rows, got))
		check(m.t, h.Release())
		m.counts["isolation checked"]++
		for i := 0; i < len(got[0]); i += 8 {
			w := [8]byte(got[0][i:])
			if w != [8]byte{} && w != [8]byte(bytes.Repeat([]byte{0xee}, 8)) && !m.seen[o][w] {
				m.fatalf("defect class: isolation: a fresh %s state of owner %s reads %x, a word it never held", l.Type, owner, w)
			}
		}
	}
}

// drain releases every session: every physical byte left is then cached,
// and a mandatory state as large as the cap takes all of it.
func (m *sgModel) drain() {
	for len(m.live) > 0 {
		m.release(m.live[0])
	}
	m.p.WaitPending()
	m.counts["drain"]++
	if st := m.p.Stats(); st.Live != 0 || st.CachedBytes != st.PhysicalBytes {
		m.fatalf("defect class: accounting: with no session, %d live, %d physical bytes, %d cached", st.Live, st.PhysicalBytes, st.CachedBytes)
	}
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 48}
	h, err := m.p.NewHead(big, "z")
	if err != nil {
		st := m.p.Stats()
		m.fatalf("defect class: accounting: a state as large as the cap, with only cached state in the pool: %v (%d cached of %d physical; %+v)", err, st.CachedBytes, st.PhysicalBytes, st)
	}
	check(m.t, h.Release())
	m.forgetIfEvicted()
}

// verify checks every live session against its reference and drops
// those evicted (both members, never one). Its reads are each KV
// writer's next call, which registers a device append's state.
func (m *sgModel) verify() {
	keep := m.live[:0]
	for _, s := range m.live {
		n := s.mem[0].Rows()
		kv := [][]byte{make([]byte, 4*n), make([]byte, 8*n)}
		kvErr := s.g.Head(0).Read(0, n, kv)
		recGot := [][]byte{make([]byte, 32*s.width)}
		recErr := s.g.Head(1).Read(0, 4, recGot)
		if errors.Is(kvErr, ErrEvicted) || errors.Is(recErr, ErrEvicted) {
			if !s.optional() || !errors.Is(kvErr, ErrEvicted) || !errors.Is(recErr, ErrEvicted) {
				m.fatalf("defect class: together: eviction: KV %v, Rec %v (optional %v); a group goes whole, and only optional",
					kvErr, recErr, s.optional())
			}
			check(m.t, s.g.Release())
			s.mem[0].Release()
			s.mem[1].Release()
			continue
		}
		if kvErr != nil || recErr != nil {
			m.fatalf("reads: %v, %v", kvErr, recErr)
		}
		if !s.mem[0].Same(0, n, kv) {
			m.fatalf("defect class: rows: a session's KV rows are not its tokens' (%d tokens)", n)
		}
		if !bytes.Equal(recGot[0], s.mem[1].Cols[0]) {
			m.fatalf("defect class: rows: a session's recurrent state is not the state after its %d tokens", n)
		}
		if s.unwritten {
			m.register(s) // this read is the writer's next call
			s.unwritten = false
		}
		keep = append(keep, s)
	}
	clear(m.live[len(keep):])
	m.live = keep
}
