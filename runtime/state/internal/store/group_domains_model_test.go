package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A model of shared groups: a KV member keyed by tokens and a
// recurrent member whose state is a function of every token, across
// owners and domains, with snapshots (cuts), rollbacks, branches, merges,
// releases, ForgetPrefixes, AppendAsync of the key member on streams held
// by gates, and a cap with or without a host tier.

func domRec(toks []uint32) []byte {
	h := make([]byte, 32)
	for _, tok := range toks {
		for i := range h {
			h[i] = h[i]*31 + byte(tok) + byte(i) + byte(tok>>8)
		}
	}
	return h
}

func domKV(salt uint32, toks []uint32, from, to int) [][]byte {
	k, v := []byte{}, []byte{}
	for _, t := range toks[from:to] {
		k = binary.LittleEndian.AppendUint32(k, t)
		v = binary.LittleEndian.AppendUint64(v, uint64(t)*0x9e3779b97f4a7c15^uint64(salt))
	}
	return [][]byte{k, v}
}

type domGroup struct {
	g     *Group     // nil for a cut
	cut   *GroupSnap // nil for a group
	refs  [2]*RefHandle
	toks  []uint32
	dom   Domain
	owner Owner
}

func TestSharedGroupDomainsModel(t *testing.T) {
	for _, c := range []domConf{
		{name: "free"},
		{name: "capped", capped: true},
		{name: "tier", capped: true, tier: true},
		{name: "free-invalidate", invalid: true},
		{name: "tier-invalidate", capped: true, tier: true, invalid: true},
	} {
		lo, hi := domSeeds(1, 5)
		for seed := lo; seed <= hi; seed++ {
			t.Run(fmt.Sprintf("%s/%d", c.name, seed), func(t *testing.T) { runGroupDomainsModel(t, c, seed, 800) })
		}
	}
}

func runGroupDomainsModel(t *testing.T, c domConf, seed uint64, steps int) {
	r, p, streams, stop := domRig(t, c, seed, 12, 4)
	defer stop()
	rng := rand.New(rand.NewPCG(seed, seed*131+3))
	desc := Keep
	if c.invalid {
		desc = Invalidate
	}
	kvl := &Layout{
		Type:        "ZTok",
		Columns:     []Column{{Name: "Tok", ElemSize: 4, Width: 1}, {Name: "Val", ElemSize: 8, Width: 1}},
		Growth:      Append,
		Bound:       256,
		BlockRows:   16,
		ShareKey:    "Tok",
		Descendants: desc,
	}
	recl := rec(desc)
	salts := map[Domain]uint32{"t1": 5, "t2": 9}
	owners := map[Domain][]Owner{"t1": {"a", "b"}, "t2": {"c"}}
	registered := map[Domain]map[string]bool{"t1": {}, "t2": {}}
	keyStr := func(toks []uint32) string { return string(keysOf(toks)) }
	templates := [][]uint32{}
	for k := range 3 {
		tpl := make([]uint32, 80)
		for i := range tpl {
			tpl[i] = uint32(1000*(k+1) + i)
		}
		templates = append(templates, tpl)
	}
	var gs []*domGroup
	step := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("group %s seed %d step %d: %s", c.name, seed, step, fmt.Sprintf(format, args...))
	}
	evictState := func() [4]int64 {
		s := p.Stats()
		return [4]int64{s.Evictions, s.EvictedBytes, s.TierOut, s.TierDropped}
	}
	noMems := 0
	noMem := func(what string, err error, before [4]int64) bool {
		if !errors.Is(err, ErrNoMemory) {
			return false
		}
		noMems++
		if !c.capped {
			fail("%s: %v without a cap", what, err)
		}
		if after := evictState(); after != before {
			t.Errorf("group %s seed %d step %d: %s failed with ErrNoMemory yet evicted: %v -> %v", c.name, seed, step, what, before, after)
		}
		return true
	}
	// feed feeds toks to x one by one (rec write, then KV append); it
	// stops at the first ErrNoMemory and returns false.
	feed := func(x *domGroup, more []uint32) bool {
		for _, tok := range more {
			next := append(x.toks[:len(x.toks):len(x.toks)], tok)
			before := evictState()
			err := x.g.Head(1).Write(0, [][]byte{domRec(next)})
			if noMem("rec write", err, before) {
				return false
			}
			if err != nil {
				fail("rec write: %v", err)
			}
			x.refs[1].Write(0, [][]byte{domRec(next)})
			row := domKV(salts[x.dom], next, len(next)-1, len(next))
			before = evictState()
			mode := rng.IntN(4)
			if mode == 0 {
				st := streams[rng.IntN(len(streams))]
				if rng.IntN(2) == 0 {
					open := r.hold(t, st)
					openAfter(open, time.Duration(rng.IntN(domHoldMs()))*time.Millisecond)
				}
				err = x.g.Head(0).AppendAsync(st, row)
			} else {
				err = x.g.Head(0).Append(row)
			}
			if noMem("kv append", err, before) {
				// The rec member moved alone: put it back to keep the model
				// a function of the tokens.
				err := x.g.Head(1).Write(0, [][]byte{domRec(x.toks)})
				if err != nil {
					fail("rec restore: %v", err)
				}
				x.refs[1].Write(0, [][]byte{domRec(x.toks)})
				return false
			}
			if err != nil {
				fail("kv append mode %d: %v", mode, err)
			}
			x.refs[0].Append(row)
			x.toks = next
			if len(next)%16 == 0 {
				registered[x.dom][keyStr(next)] = true
			}
		}
		return true
	}
	live := func() []*domGroup {
		var out []*domGroup
		for _, x := range gs {
			if x.g != nil && !x.refs[0].Invalid && !x.refs[1].Invalid {
				out = append(out, x)
			}
		}
		return out
	}
	remove := func(x *domGroup) { gs = slices.DeleteFunc(gs, func(y *domGroup) bool { return y == x }) }
	release := func(x *domGroup) {
		var err error
		if x.g != nil {
			err = x.g.Release()
		} else {
			err = x.cut.Release()
		}
		if err != nil {
			fail("release: %v", err)
		}
		x.refs[0].Release()
		x.refs[1].Release()
		remove(x)
	}
	adopted := 0
	for step = 0; step < steps; step++ {
		op := rng.IntN(20)
		lv := live()
		switch {
		case len(lv) == 0 || op < 4:
			if len(gs) > 12 {
				continue
			}
			d := Domain("t1")
			if rng.IntN(3) == 0 {
				d = "t2"
			}
			o := owners[d][rng.IntN(len(owners[d]))]
			tpl := templates[rng.IntN(len(templates))]
			prompt := append([]uint32(nil), tpl[:rng.IntN(len(tpl)+1)]...)
			for range rng.IntN(6) {
				prompt = append(prompt, 50+uint32(rng.IntN(3)))
			}
			before := evictState()
			g, err := NewSharedGroup(p, o, d, kvl, recl)
			if noMem("NewSharedGroup", err, before) {
				continue
			}
			if err != nil {
				fail("NewSharedGroup: %v", err)
			}
			x := &domGroup{g: g, dom: d, owner: o}
			x.refs[0] = NewRefLineage(o, kvl).NewHead(g.Head(0))
			x.refs[1] = NewRefLineage(o, recl).NewHead(g.Head(1))
			before = evictState()
			n, err := g.AdoptPrefix(keysOf(prompt))
			if noMem("group adopt", err, before) {
				check(t, g.Release())
				continue
			}
			if err != nil {
				fail("group adopt: %v", err)
			}
			gs = append(gs, x)
			if n > 0 {
				if n%16 != 0 || n > len(prompt) {
					fail("adopt gave %d rows of %d", n, len(prompt))
				}
				if !registered[d][keyStr(prompt[:n])] {
					fail("adopted %d rows in domain %s that no group of the domain registered (since its last forget)", n, d)
				}
				x.refs[0].Append(domKV(salts[d], prompt, 0, n))
				x.refs[1].Write(0, [][]byte{domRec(prompt[:n])})
				x.toks = append([]uint32(nil), prompt[:n]...)
				adopted += n
			}
			feed(x, prompt[n:])
		case op < 8:
			x := lv[rng.IntN(len(lv))]
			more := make([]uint32, 1+rng.IntN(20))
			for i := range more {
				more[i] = 50 + uint32(rng.IntN(3))
			}
			if len(x.toks)+len(more) > kvl.Bound {
				continue
			}
			feed(x, more)
		case op < 10:
			if len(gs) > 12 {
				continue
			}
			x := lv[rng.IntN(len(lv))]
			before := evictState()
			cut, err := x.g.Snapshot()
			if noMem("group snapshot", err, before) {
				continue
			}
			if err != nil {
				fail("group snapshot: %v", err)
			}
			y := &domGroup{cut: cut, toks: x.toks, dom: x.dom, owner: x.owner}
			y.refs[0] = x.refs[0].Snapshot(cut.Snap(0))
			y.refs[1] = x.refs[1].Snapshot(cut.Snap(1))
			gs = append(gs, y)
		case op < 12:
			if len(gs) > 12 {
				continue
			}
			x := lv[rng.IntN(len(lv))]
			before := evictState()
			b, err := x.g.Branch()
			if noMem("group branch", err, before) {
				continue
			}
			if err != nil {
				fail("group branch: %v", err)
			}
			y := &domGroup{g: b, toks: x.toks, dom: x.dom, owner: x.owner}
			y.refs[0] = x.refs[0].Branch(b.Head(0))
			y.refs[1] = x.refs[1].Branch(b.Head(1))
			gs = append(gs, y)
		case op < 14:
			x := lv[rng.IntN(len(lv))]
			var cuts []*domGroup
			for _, y := range gs {
				if y.cut != nil && y.refs[0].Lin == x.refs[0].Lin && !y.refs[0].Invalid && !y.refs[1].Invalid {
					cuts = append(cuts, y)
				}
			}
			if len(cuts) == 0 {
				continue
			}
			to := cuts[rng.IntN(len(cuts))]
			can := x.refs[0].CanRollback(to.refs[0]) && x.refs[1].CanRollback(to.refs[1])
			before := evictState()
			err := x.g.Rollback(to.cut)
			if noMem("group rollback", err, before) {
				continue
			}
			if can != (err == nil) {
				fail("group rollback: reference %v, store %v", can, err)
			}
			if err == nil {
				x.refs[0].Rollback(to.refs[0])
				x.refs[1].Rollback(to.refs[1])
				x.toks = to.toks
			}
		case op < 16:
			x := lv[rng.IntN(len(lv))]
			var kids []*domGroup
			for _, y := range lv {
				if y != x && y.refs[0].Lin == x.refs[0].Lin {
					kids = append(kids, y)
				}
			}
			if len(kids) == 0 {
				continue
			}
			k := kids[rng.IntN(len(kids))]
			can := x.refs[0].CanMerge(k.refs[0]) && x.refs[1].CanMerge(k.refs[1])
			before := evictState()
			err := x.g.Merge(k.g)
			if noMem("group merge", err, before) {
				continue
			}
			if can != (err == nil) {
				fail("group merge: reference %v, store %v", can, err)
			}
			if err == nil {
				x.refs[0].Merge(k.refs[0])
				x.refs[1].Merge(k.refs[1])
				x.toks = k.toks
			}
		case op < 19:
			release(gs[rng.IntN(len(gs))])
		default:
			d := Domain("t1")
			if rng.IntN(2) == 0 {
				d = "t2"
			}
			p.ForgetPrefixes(d)
			registered[d] = map[string]bool{}
		}
		for i, x := range gs {
			if x.refs[0].Invalid || x.refs[1].Invalid {
				continue
			}
			var r0, r1 reader
			if x.g != nil {
				r0, r1 = x.g.Head(0), x.g.Head(1)
			} else {
				r0, r1 = x.cut.Snap(0), x.cut.Snap(1)
			}
			if r0.Len() != len(x.toks) {
				fail("group %d (%s/%s): KV Len %d, model %d", i, x.dom, x.owner, r0.Len(), len(x.toks))
			}
			n := len(x.toks)
			dst := [][]byte{make([]byte, n*4), make([]byte, n*8)}
			if err := r0.Read(0, n, dst); err != nil {
				fail("group %d: read KV: %v", i, err)
			}
			want := domKV(salts[x.dom], x.toks, 0, n)
			if !bytes.Equal(dst[0], want[0]) || !bytes.Equal(dst[1], want[1]) || !bytes.Equal(want[1], x.refs[0].Cols[1]) {
				for row := range n {
					if !bytes.Equal(dst[1][row*8:row*8+8], want[1][row*8:row*8+8]) || !bytes.Equal(dst[0][row*4:row*4+4], want[0][row*4:row*4+4]) {
						fail("group %d (cut %v, %s/%s, %d rows): KV row %d reads %x/%x, want %x/%x", i, x.cut != nil, x.dom, x.owner, n, row, dst[0][row*4:row*4+4], dst[1][row*8:row*8+8], want[0][row*4:row*4+4], want[1][row*8:row*8+8])
					}
				}
				fail("group %d: the reference differs from the tokens", i)
			}
			got := readRec(t, r1)
			if !bytes.Equal(got, domRec(x.toks)) {
				fail("group %d (cut %v, %s/%s, %d rows): recurrent state %x, want %x", i, x.cut != nil, x.dom, x.owner, n, got[:8], domRec(x.toks)[:8])
			}
		}
		if step%50 == 0 {
			if err := checkInvariants(p); err != nil {
				fail("invariants: %v", err)
			}
		}
	}
	for len(gs) > 0 {
		release(gs[len(gs)-1])
	}
	s := domFinish(p, fail, "t1", "t2")
	t.Logf("nomem %d adopted %d; evictions %d tier out %d in %d dropped %d", noMems, adopted, s.Evictions, s.TierOut, s.TierIn, s.TierDropped)
}
