package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestSharedGroupModel drives shared groups of a KV member (the key) and a
// replayed recurrent member where they meet the other features: prompts
// that share prefixes across owners and two domains, tokens fed by Append
// and by AppendDevice (registered once written), steps that fail or panic
// after writing in place, ForgetPrefixes, mandatory and optional groups
// under a pool cap that makes the Evictor take groups. After every step
// each live session reads as its reference (its KV rows are its own
// tokens, its recurrent state the state after them), an optional group's
// members are evicted together or not at all, and the pool's invariants
// hold; at the end every byte goes back.
//
// Which checks catch which defect, found by reverting each fix: the
// together check an optional group's member evicted alone; the rows check
// a failed step that lost the head's rows (no rebuild after writing in
// place); the invariants check a panicking step's leaked blocks. In-place
// writes of another owner's blocks, a widened layout's table, the joint
// count of shared registered states and registrations of kernel-written
// rows have tests of their own (group_isolation_test.go,
// group_pending_test.go): this model's owners never read rows they did
// not write, and it asserts no adoption it cannot predict.
func TestSharedGroupModel(t *testing.T) {
	steps := modelSteps(t, 600)
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runSharedGroupModel(t, seed, steps) })
	}
}

// sgLayouts are one retention's member layouts: the shared KV and a
// replayed recurrent state.
type sgLayouts struct{ kv, rec *Layout }

func newSGLayouts(r Retention) sgLayouts {
	kv := *tokLayout
	kv.Retention = r
	recL := rec(Invalidate)
	recL.Retention = r
	recL.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 2}
	recL.Input = []Column{{Name: "Tok", ElemSize: 4, Width: 1}}
	return sgLayouts{&kv, recL}
}

type sgSession struct {
	g        *Group
	optional bool
	tokens   []uint32 // fed so far: the KV's keys, and what the recurrent state is after
	rest     []uint32 // the prompt still to feed
	device   bool     // the last token's KV row went in by AppendDevice
}

// sgStep is the recurrent step feedTok applies, as a step function: it
// reads the rows, updates them with the token, and writes them back;
// fail writes junk and fails, or panics.
func sgStep(b device.Backend, fail string) StepFunc {
	return func(spans [][]device.Span, in [][]byte) error {
		sp := spans[0][0]
		h := make([]byte, sp.Rows*8)
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

func runSharedGroupModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 11))
	p := newPool(t, PoolOptions{BlockBytes: 1024, MaxBytes: 48 << 10})
	b := p.Backend()
	lay := [2]sgLayouts{newSGLayouts(Mandatory), newSGLayouts(Optional)}
	domains := []Domain{"d0", "d1"}
	bases := make([][]uint32, 2)
	for i := range bases {
		for range 64 {
			bases[i] = append(bases[i], uint32(rng.IntN(3)))
		}
	}
	var live []*sgSession
	defer func() {
		for _, s := range live {
			s.g.Release()
		}
	}()
	owners := 0
	for step := range steps {
		switch op := rng.IntN(20); {
		case op < 3 && len(live) < 8: // a new session adopts what it can
			opt := rng.IntN(2) == 1
			l := lay[0]
			if opt {
				l = lay[1]
			}
			owners++
			g, err := NewSharedGroup(p, Owner(fmt.Sprint("o", owners)), domains[rng.IntN(2)], l.kv, l.rec)
			if errors.Is(err, ErrNoMemory) {
				continue
			}
			check(t, err)
			prompt := slices.Clone(bases[rng.IntN(len(bases))])
			prompt = prompt[:16+rng.IntN(48)]
			prompt[len(prompt)-1-rng.IntN(8)] += 10 // prompts part somewhere
			n, err := g.AdoptPrefix(keysOf(prompt))
			if err != nil && !errors.Is(err, ErrNoMemory) && !errors.Is(err, ErrEvicted) {
				t.Fatalf("seed %d step %d: AdoptPrefix: %v", seed, step, err)
			}
			if n%16 != 0 || n > len(prompt) {
				t.Fatalf("seed %d step %d: adopted %d rows of a %d-token prompt", seed, step, n, len(prompt))
			}
			live = append(live, &sgSession{g: g, optional: opt, tokens: prompt[:n], rest: prompt[n:]})
		case op < 12 && len(live) > 0: // feed a token
			s := live[rng.IntN(len(live))]
			if len(s.rest) == 0 {
				continue
			}
			tok := s.rest[0]
			in := [][]byte{keysOf([]uint32{tok})}
			if err := s.g.Head(1).Step(in, false, sgStep(b, "")); err != nil {
				if errors.Is(err, ErrNoMemory) || errors.Is(err, ErrEvicted) {
					continue
				}
				t.Fatalf("seed %d step %d: Step: %v", seed, step, err)
			}
			var err error
			if s.device = rng.IntN(2) == 0; s.device {
				var spans [][]device.Span
				if spans, err = s.g.Head(0).AppendDevice(1); err == nil {
					for c, col := range tokRow(tok) {
						check(t, b.CopyHtoD(spans[c][0].Ptr, col))
					}
				}
			} else {
				err = s.g.Head(0).Append(tokRow(tok))
			}
			if err != nil {
				// The members part: drop the session (a real decoder
				// would roll both back), as Release gives both back.
				if !errors.Is(err, ErrNoMemory) && !errors.Is(err, ErrEvicted) {
					t.Fatalf("seed %d step %d: append: %v", seed, step, err)
				}
				check(t, s.g.Release())
				live = slices.DeleteFunc(live, func(x *sgSession) bool { return x == s })
				continue
			}
			s.tokens, s.rest = append(s.tokens, tok), s.rest[1:]
		case op < 13 && len(live) > 0: // a step that fails, or panics, after writing in place
			s := live[rng.IntN(len(live))]
			mode := []string{"fail", "panic"}[rng.IntN(2)]
			func() {
				defer func() {
					if r := recover(); r != nil && mode != "panic" {
						panic(r)
					}
				}()
				err := s.g.Head(1).Step([][]byte{keysOf([]uint32{7})}, false, sgStep(b, mode))
				if err == nil {
					t.Fatalf("seed %d step %d: a failing step succeeded", seed, step)
				}
			}()
		case op < 14:
			p.ForgetPrefixes(domains[rng.IntN(2)])
		case op < 15 && len(live) > 0:
			i := rng.IntN(len(live))
			check(t, live[i].g.Release())
			live = slices.Delete(live, i, i+1)
		default: // pressure: a mandatory state of another owner comes and goes
			l := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 16 + rng.IntN(32)}
			if h, err := p.NewHead(l, "z"); err == nil {
				check(t, h.Release())
			}
		}
		live = sgVerify(t, seed, step, live)
		if err := checkInvariants(p); err != nil {
			t.Fatalf("seed %d step %d: %v", seed, step, err)
		}
	}
	for _, s := range live {
		check(t, s.g.Release())
	}
	live = nil
	for _, d := range domains {
		p.ForgetPrefixes(d)
	}
	p.WaitPending()
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 || st.CachedBytes != 0 {
		t.Fatalf("seed %d: after every release and forget: %d live, %d physical, %d cached bytes", seed, st.Live, st.PhysicalBytes, st.CachedBytes)
	}
}

// sgVerify checks every live session against its reference and drops
// those evicted (both members, never one).
func sgVerify(t *testing.T, seed uint64, step int, live []*sgSession) []*sgSession {
	t.Helper()
	keep := live[:0]
	for _, s := range live {
		n := len(s.tokens)
		kv := [][]byte{make([]byte, 4*n), make([]byte, 8*n)}
		kvErr := s.g.Head(0).Read(0, n, kv)
		recGot := [][]byte{make([]byte, 32)}
		recErr := s.g.Head(1).Read(0, 4, recGot)
		if errors.Is(kvErr, ErrEvicted) || errors.Is(recErr, ErrEvicted) {
			if !s.optional || !errors.Is(kvErr, ErrEvicted) || !errors.Is(recErr, ErrEvicted) {
				t.Fatalf("seed %d step %d: eviction: KV %v, Rec %v (optional %v); a group goes whole, and only optional",
					seed, step, kvErr, recErr, s.optional)
			}
			check(t, s.g.Release())
			continue
		}
		if kvErr != nil || recErr != nil {
			t.Fatalf("seed %d step %d: reads: %v, %v", seed, step, kvErr, recErr)
		}
		want := [][]byte{{}, {}}
		for _, tok := range s.tokens {
			r := tokRow(tok)
			want[0], want[1] = append(want[0], r[0]...), append(want[1], r[1]...)
		}
		if !bytes.Equal(kv[0], want[0]) || !bytes.Equal(kv[1], want[1]) {
			t.Fatalf("seed %d step %d: a session's KV rows are not its tokens' (%d tokens)", seed, step, n)
		}
		if !bytes.Equal(recGot[0], recAfter(s.tokens)) {
			t.Fatalf("seed %d step %d: a session's recurrent state is not the state after its %d tokens", seed, step, n)
		}
		keep = append(keep, s)
	}
	clear(live[len(keep):])
	return keep
}
