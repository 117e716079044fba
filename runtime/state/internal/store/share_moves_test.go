package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestShareMovesUnderPressure: sessions that adopt cached prefixes,
// snapshot, roll back, branch and merge, in a pool whose memory the
// prefix cache, optional sessions and mandatory ones compete for (with a
// host tier or without), while domains are forgotten: every live
// session reads its own tokens' rows or answers ErrEvicted, and once all
// are released, the domains forgotten and the pool trimmed, nothing is
// left.
func TestShareMovesUnderPressure(t *testing.T) {
	for _, tier := range []int64{0, 4 << 10} {
		for _, seed := range []uint64{0, 1, 31} {
			t.Run(fmt.Sprint(tier, "/", seed), func(t *testing.T) { shareMoves(t, seed, tier) })
		}
	}
}

type movedSession struct {
	h    *Head
	toks []int32
	snap *Snap
	at   int // rows of snap
}

func shareMoves(t *testing.T, seed uint64, tier int64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	p, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256, MaxBytes: 16 << 10, HostTier: tier})
	check(t, err)
	defer p.Close()
	l := prompt(4, 64)
	l.Retention = Optional
	domains := []Domain{"d0", "d1"}
	var live []*movedSession
	var pressure []*Head
	ok := func(what string, err error) bool {
		if err == nil {
			return true
		}
		if errors.Is(err, ErrEvicted) || errors.Is(err, ErrNoMemory) || errors.Is(err, ErrInvalidated) {
			return false
		}
		t.Fatalf("%s: %v", what, err)
		return false
	}
	drop := func(i int) {
		s := live[i]
		if s.snap != nil {
			check(t, s.snap.Release())
		}
		check(t, s.h.Release())
		live = append(live[:i], live[i+1:]...)
	}
	for step := range 700 {
		switch op := rng.IntN(9); {
		case op < 2 || len(live) == 0: // a new session over a common prefix
			toks := append(tokens(int32(1+rng.IntN(3)), 4*rng.IntN(5)), tokens(int32(100+step), 1+rng.IntN(9))...)
			h, err := p.NewSharedHead(l, Owner(fmt.Sprint("o", rng.IntN(2))), domains[rng.IntN(2)])
			if !ok("new", err) {
				continue
			}
			s := &movedSession{h: h}
			n, err := h.AdoptPrefix(keyBytes(toks))
			if ok("adopt", err) && ok("append", h.Append(promptRows(toks, n, len(toks)))) {
				s.toks = toks
			} else {
				s.toks = toks[:h.Len()]
			}
			live = append(live, s)
		case op == 2: // snapshot
			s := live[rng.IntN(len(live))]
			if s.snap != nil {
				check(t, s.snap.Release())
				s.snap = nil
			}
			if x, err := s.h.Snapshot(); ok("snapshot", err) {
				s.snap, s.at = x, x.Len()
			}
		case op == 3: // roll back
			s := live[rng.IntN(len(live))]
			if s.snap != nil && ok("rollback", s.h.Rollback(s.snap)) {
				s.toks = s.toks[:s.at]
			}
		case op == 4: // branch, append, merge
			s := live[rng.IntN(len(live))]
			b, err := s.h.Branch()
			if !ok("branch", err) {
				continue
			}
			more := append(append([]int32(nil), s.toks...), tokens(int32(500+step), 1+rng.IntN(6))...)
			if len(more) <= 64 && ok("append branch", b.Append(promptRows(more, len(s.toks), len(more)))) && ok("merge", s.h.Merge(b)) {
				s.toks = more
			}
			check(t, b.Release())
		case op == 5: // pressure
			h, err := p.NewHead(wide("Session", Mandatory), "m")
			check(t, err)
			for range 1 + rng.IntN(20) {
				if h.Append(wideRow(byte(step))) != nil {
					break
				}
			}
			pressure = append(pressure, h)
			if len(pressure) > 2 {
				check(t, pressure[0].Release())
				pressure = pressure[1:]
			}
		case op == 6:
			p.ForgetPrefixes(domains[rng.IntN(2)])
		case op == 7:
			drop(rng.IntN(len(live)))
		default: // read
			s := live[rng.IntN(len(live))]
			dst := [][]byte{make([]byte, len(s.toks)*32), make([]byte, len(s.toks)*4)}
			err := s.h.Read(0, len(s.toks), dst)
			if ok("read", err) {
				samePrompt(t, fmt.Sprint("step ", step), dst, promptRows(s.toks, 0, len(s.toks)))
			}
		}
		if err := checkInvariants(p); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	st := p.Stats()
	t.Logf("adopted %d rows in %d hits, %d evictions, tier in %d", st.AdoptedRows, st.AdoptHits, st.Evictions, st.TierIn)
	for len(live) > 0 {
		drop(0)
	}
	for _, h := range pressure {
		check(t, h.Release())
	}
	for _, d := range domains {
		p.ForgetPrefixes(d)
	}
	if st := p.Stats(); st.PhysicalBytes != 0 || st.LogicalBytes != 0 || st.Live != 0 || st.TierBytes != 0 || st.CachedBytes != 0 {
		t.Fatalf("after releasing everything: %+v", st)
	}
	_, err = p.Trim()
	check(t, err)
	if st := p.Stats(); st.ReservedBytes != 0 || st.Slabs != 0 || st.FreeBlocks != 0 {
		t.Fatalf("after releasing everything and Trim: %+v", st)
	}
}
