package peerbench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/state"
)

// pfxModel drives shared Ctx sessions with random appends, adoptions,
// snapshots, rollbacks, branches, merges, releases and forgets, in a pool
// of opt, and checks every handle it reads against its model: the tokens
// of its rows (a row's content is a function of its domain and every
// token up to it). Tokens follow per-family canonical sequences most of
// the time, so that heads build, register and adopt the same chains.
func pfxModel(t *testing.T, opt state.PoolOptions, seed uint64, steps int) state.PoolStats {
	p := pfxPool(t, opt)
	rng := rand.New(rand.NewPCG(seed, 11))
	doms := []state.Domain{"t1", "t2"}
	canon := func(fam, i int) int32 { return int32(fam*10000 + i + 1) }
	type snap struct {
		s    *CtxSnapshot
		d    state.Domain
		toks []int32
	}
	type head struct {
		id     int
		s      *CtxState
		d      state.Domain
		fam    int
		toks   []int32
		snaps  []snap
		parent *head
	}
	var heads []*head
	var loose []snap // snapshots whose head is gone
	nextID := 0
	var log []string
	logf := func(f string, a ...any) {
		log = append(log, fmt.Sprintf(f, a...))
		if len(log) > 40 {
			log = log[1:]
		}
	}
	fail := func(f string, a ...any) {
		t.Helper()
		for _, l := range log {
			t.Log(l)
		}
		t.Fatalf("seed %d: "+f, append([]any{seed}, a...)...)
	}
	noMem := func(err error) bool { return errors.Is(err, state.ErrNoMemory) }
	dropHead := func(i int) {
		h := heads[i]
		if err := h.s.Release(); err != nil {
			fail("release head %d: %v", h.id, err)
		}
		loose = append(loose, h.snaps...)
		heads = append(heads[:i], heads[i+1:]...)
		for _, o := range heads {
			if o.parent == h {
				o.parent = nil
			}
		}
	}
	checkHead := func(h *head, when string) {
		if err := pfxDiff(h.s, h.d, h.toks); err != nil {
			if errors.Is(err, state.ErrInvalidated) {
				return
			}
			fail("%s: head %d (%s, fam %d): %v", when, h.id, h.d, h.fam, err)
		}
	}
	more := func(h *head, k int) []int32 {
		out := append([]int32(nil), h.toks...)
		for range k {
			if rng.IntN(8) == 0 {
				out = append(out, int32(50000+rng.IntN(5)))
			} else {
				out = append(out, canon(h.fam, len(out)))
			}
		}
		return out
	}
	for step := range steps {
		op := rng.IntN(100)
		var h *head
		if len(heads) > 0 {
			h = heads[rng.IntN(len(heads))]
		}
		switch {
		case op < 15 || h == nil:
			fam := rng.IntN(3)
			d := doms[rng.IntN(2)]
			n := 1 + rng.IntN(70)
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = canon(fam, i)
			}
			if rng.IntN(5) == 0 {
				toks[rng.IntN(n)] = 50000
			}
			nextID++
			s, err := NewCtxStateShared(p, state.Owner(fmt.Sprint("h", nextID)), d)
			if err != nil {
				fail("new: %v", err)
			}
			a, err := s.AdoptPrefix(toks)
			if err == nil {
				err = s.Append(pfxRows(d, toks, a))
			}
			logf("step %d: open h%d %s fam %d, %d tokens, adopted %d: %v", step, nextID, d, fam, n, a, err)
			if err != nil {
				s.Release()
				if noMem(err) {
					continue
				}
				fail("open: %v", err)
			}
			nh := &head{id: nextID, s: s, d: d, fam: fam, toks: toks}
			heads = append(heads, nh)
			checkHead(nh, "after open")
		case op < 45:
			toks := more(h, 1+rng.IntN(20))
			err := h.s.Append(pfxRows(h.d, toks, len(h.toks)))
			logf("step %d: append h%d %d -> %d: %v", step, h.id, len(h.toks), len(toks), err)
			switch {
			case err == nil:
				h.toks = toks
			case errors.Is(err, state.ErrInvalidated):
				dropHead(slices.Index(heads, h))
				continue
			case noMem(err) || errors.Is(err, state.ErrBound):
			default:
				fail("append: %v", err)
			}
			checkHead(h, "after append")
		case op < 55:
			sn, err := h.s.Snapshot()
			logf("step %d: snapshot h%d at %d: %v", step, h.id, len(h.toks), err)
			if err != nil {
				if errors.Is(err, state.ErrInvalidated) {
					dropHead(slices.Index(heads, h))
					continue
				}
				fail("snapshot: %v", err)
			}
			h.snaps = append(h.snaps, snap{sn, h.d, h.toks})
		case op < 65:
			if len(h.snaps) == 0 {
				continue
			}
			k := rng.IntN(len(h.snaps))
			err := h.s.Rollback(h.snaps[k].s)
			logf("step %d: rollback h%d from %d to snap %d (%d rows): %v", step, h.id, len(h.toks), k, len(h.snaps[k].toks), err)
			switch {
			case err == nil:
				h.toks = h.snaps[k].toks
				// Later snapshots are on the abandoned line (or not):
				// they stay in loose, checked only if they still read.
				loose = append(loose, h.snaps[k+1:]...)
				h.snaps = h.snaps[:k+1]
			case errors.Is(err, state.ErrInvalidated), errors.Is(err, state.ErrNotAncestor):
				loose = append(loose, h.snaps[k])
				h.snaps = append(h.snaps[:k], h.snaps[k+1:]...)
			default:
				fail("rollback: %v", err)
			}
			checkHead(h, "after rollback")
		case op < 75:
			c, err := h.s.Branch()
			logf("step %d: branch h%d at %d -> h%d: %v", step, h.id, len(h.toks), nextID+1, err)
			if err != nil {
				if errors.Is(err, state.ErrInvalidated) {
					dropHead(slices.Index(heads, h))
					continue
				}
				fail("branch: %v", err)
			}
			nextID++
			heads = append(heads, &head{id: nextID, s: c, d: h.d, fam: h.fam, toks: h.toks, parent: h})
		case op < 80:
			var c *head
			for _, o := range heads {
				if o.parent == h {
					c = o
				}
			}
			if c == nil {
				continue
			}
			err := h.s.Merge(c.s)
			logf("step %d: merge h%d into h%d (%d -> %d rows): %v", step, c.id, h.id, len(h.toks), len(c.toks), err)
			switch {
			case err == nil:
				h.toks = c.toks
			case errors.Is(err, state.ErrDiverged), errors.Is(err, state.ErrInvalidated):
			default:
				fail("merge: %v", err)
			}
			checkHead(h, "after merge")
		case op < 90:
			logf("step %d: release h%d", step, h.id)
			dropHead(slices.Index(heads, h))
		case op < 93:
			d := doms[rng.IntN(2)]
			logf("step %d: forget %s", step, d)
			p.ForgetPrefixes(d)
		default:
			// Read a snapshot, live or loose.
			all := loose
			for _, o := range heads {
				all = append(all, o.snaps...)
			}
			if len(all) == 0 {
				continue
			}
			sn := all[rng.IntN(len(all))]
			d := sn.d
			if err := pfxDiff(sn.s, d, sn.toks); err != nil && !errors.Is(err, state.ErrInvalidated) {
				fail("snapshot read: %v", err)
			}
		}
		if step%10 == 9 {
			for _, o := range heads {
				checkHead(o, fmt.Sprint("sweep at step ", step))
			}
		}
	}
	st := p.Stats()
	for len(heads) > 0 {
		dropHead(0)
	}
	for _, sn := range loose {
		if err := sn.s.Release(); err != nil {
			t.Fatalf("release snapshot: %v", err)
		}
	}
	pfxNoLeak(t, p, doms...)
	return st
}

func TestPrefixModelEvict(t *testing.T) {
	var ev int64
	for seed := range pfxSeeds(8) {
		st := pfxModel(t, state.PoolOptions{MaxBytes: 2 << 20}, seed, 250)
		ev += st.Evictions
	}
	t.Logf("evictions %d", ev)
}

func TestPrefixModelTier(t *testing.T) {
	var in int64
	for seed := range pfxSeeds(8) {
		st := pfxModel(t, state.PoolOptions{MaxBytes: 1 << 20, HostTier: 1 << 20}, seed, 250)
		in += st.TierIn
	}
	t.Logf("tier in %d", in)
}

// TestPrefixModelBlockBytes: pools of fixed block sizes, whose blocks hold
// 1, 3 (a bound of 2048 is no multiple of it) or 4 rows.
func TestPrefixModelBlockBytes(t *testing.T) {
	for _, bb := range []int{1024, 3000, 4096} {
		for seed := range pfxSeeds(4) {
			pfxModel(t, state.PoolOptions{BlockBytes: bb}, seed, 200)
			pfxModel(t, state.PoolOptions{BlockBytes: bb, MaxBytes: 1 << 20, HostTier: 256 << 10}, seed, 200)
		}
	}
}
