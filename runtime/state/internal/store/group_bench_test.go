package store

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// Group calls against the same calls on the members one by one
// (docs/BENCHMARKS.md, "Groups"): a KV cache of 256 rows and a recurrent
// state of 4 rows.

func benchGroup(b *testing.B) (*Pool, *Group) {
	p := newPool(b, PoolOptions{})
	g, err := NewGroup(p, "s", kv(Append, 4096, Invalidate), rec(Invalidate))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Release() })
	check(b, g.Head(0).Append(kvRows(256, 1)))
	check(b, g.Head(1).Write(0, recRow(1)))
	return p, g
}

func BenchmarkGroupSnapshot(b *testing.B) {
	_, g := benchGroup(b)
	for b.Loop() {
		cut, err := g.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		cut.Release()
	}
}

func BenchmarkGroupSnapshotMembers(b *testing.B) {
	_, g := benchGroup(b)
	for b.Loop() {
		s0, err := g.Head(0).Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		s1, err := g.Head(1).Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		s0.Release()
		s1.Release()
	}
}

// A speculative round: a cut, one write to each member, a rollback to
// the cut.
func BenchmarkGroupRollback(b *testing.B) {
	_, g := benchGroup(b)
	row, h := kvRows(1, 2), recRow(2)
	for b.Loop() {
		cut, err := g.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		check(b, g.Head(0).Append(row))
		check(b, g.Head(1).Write(0, h))
		check(b, g.Rollback(cut))
		cut.Release()
	}
}

// The same round on two heads outside any group.
func BenchmarkGroupRollbackMembers(b *testing.B) {
	p := newPool(b, PoolOptions{})
	k := must[*Head](b)(p.NewHead(kv(Append, 4096, Invalidate), "s"))
	r := must[*Head](b)(p.NewHead(rec(Invalidate), "s"))
	defer k.Release()
	defer r.Release()
	check(b, k.Append(kvRows(256, 1)))
	check(b, r.Write(0, recRow(1)))
	row, h := kvRows(1, 2), recRow(2)
	for b.Loop() {
		s0 := must[*Snap](b)(k.Snapshot())
		s1 := must[*Snap](b)(r.Snapshot())
		check(b, k.Append(row))
		check(b, r.Write(0, h))
		check(b, k.Rollback(s0))
		check(b, r.Rollback(s1))
		s0.Release()
		s1.Release()
	}
}

// hybridKV is the shared member of a hybrid decoder's group: a token (the
// key) and a 256-wide half-precision key and value per row.
var hybridKV = &Layout{Type: "HybridKV", Growth: Append, ShareKey: "Tok", Columns: []Column{
	{Name: "Tok", ElemSize: 4, Width: 1}, {Name: "K", ElemSize: 2, Width: 128}, {Name: "V", ElemSize: 2, Width: 128},
}}

// hybridRec is its recurrent member: 4 KiB of state, rewritten each token.
var hybridRec = &Layout{Type: "HybridRec", Growth: Mutable, Bound: 1, Descendants: Invalidate,
	Columns: []Column{{Name: "H", ElemSize: 4, Width: 1024}}}

// BenchmarkServingSharedGroupStep is a hybrid decoder's step, on a group
// of a shared KV member and a recurrent one: the recurrent state written,
// then the token's KV row appended, at a context of 256, 4096 and 16384
// tokens, in a sharing domain (NewSharedGroup: every 16th append registers
// the members' states) against the same group made by NewGroup. Each round
// decodes 256 tokens on fresh groups of either kind, whose prompts differ
// from every other round's; the domain is forgotten after it.
func BenchmarkServingSharedGroupStep(b *testing.B) {
	kv := zeroRows(hybridKV, 1)
	h := zeroRows(hybridRec, 1)
	for _, ctx := range []int{256, 4096, 16384} {
		b.Run(fmt.Sprint(ctx), func(b *testing.B) {
			p := benchPool(b, benchBackend(b), PoolOptions{})
			step := func(g *Group, tok uint32) {
				binary.LittleEndian.PutUint32(kv[0], tok)
				binary.LittleEndian.PutUint32(h[0], tok)
				if err := g.Head(1).Write(0, h); err != nil {
					b.Fatal(err)
				}
				if err := g.Head(0).Append(kv); err != nil {
					b.Fatal(err)
				}
			}
			group := func(shared bool, round int) *Group {
				var g *Group
				var err error
				if shared {
					g, err = NewSharedGroup(p, "s", "tenant", hybridKV, hybridRec)
				} else {
					g, err = NewGroup(p, "s", hybridKV, hybridRec)
				}
				if err != nil {
					b.Fatal(err)
				}
				for i := range ctx {
					step(g, uint32(round<<20+i))
				}
				return g
			}
			decode := func(g *Group, round int) time.Duration {
				start := time.Now()
				for i := range 256 {
					step(g, uint32(round<<20+ctx+i))
				}
				return time.Since(start)
			}
			var ts, tp time.Duration
			var ratios []float64
			for i := 0; b.Loop(); i++ {
				gs, gp := group(true, i), group(false, i)
				var ds, dp time.Duration
				if i%2 == 0 {
					ds, dp = decode(gs, i), decode(gp, i)
				} else {
					dp, ds = decode(gp, i), decode(gs, i)
				}
				check(b, gs.Release())
				check(b, gp.Release())
				p.ForgetPrefixes("tenant")
				ts, tp = ts+ds, tp+dp
				ratios = append(ratios, float64(ds)/float64(dp))
			}
			n := float64(len(ratios) * 256)
			b.ReportMetric(float64(ts.Nanoseconds())/n, "shared-ns/token")
			b.ReportMetric(float64(tp.Nanoseconds())/n, "plain-ns/token")
			b.ReportMetric(median(ratios), "ratio")
		})
	}
}

// Group states under memory pressure: BenchmarkEvictGroupStates is
// BenchmarkEvictCached for the states shared groups register. A pool of
// 256-byte blocks is filled with registered states, each holding two
// blocks it alone holds until the next registration of its chain shares
// one (its recurrent state, and the KV block it filled), in chains of 16
// by groups released at once; then each append of one block by another
// head evicts one state. 64k states against 1k: the cost of finding a
// victim must not grow with the states.
func BenchmarkEvictGroupStates(b *testing.B) {
	large, small := newGroupEvictRun(b, 64<<10), newGroupEvictRun(b, 1<<10)
	evictSideBySide(b, large, "ns/evict-64k-states", small, "ns/evict-1k-states")
}

// evictKV and evictRec are a shared group's members on a pool of 256-byte
// blocks: 64 tokens fill a KV block, and the recurrent state is a block.
var (
	evictKV  = &Layout{Type: "EvictKV", Growth: Append, ShareKey: "Tok", Columns: []Column{{Name: "Tok", ElemSize: 4, Width: 1}}}
	evictRec = &Layout{Type: "EvictRec", Growth: Mutable, Bound: 1, Descendants: Invalidate, Columns: []Column{{Name: "H", ElemSize: 8, Width: 1}}}
	evictRow = &Layout{Type: "EvictRow", Growth: Append, Columns: []Column{{Name: "X", ElemSize: 64, Width: 1}}}
)

type groupEvictRun struct {
	b      *testing.B
	p      *Pool
	m      *Head // the head whose appends evict
	tokens uint32
	row    [][]byte
}

func newGroupEvictRun(b *testing.B, states int) *groupEvictRun {
	// Two blocks a state: the cap is what the states take.
	p := benchPool(b, device.Host(), PoolOptions{BlockBytes: 256, MaxBytes: int64(2*states) * 256})
	r := &groupEvictRun{b: b, p: p, row: zeroRows(evictRow, 4)}
	r.cache(states / 16)
	if st := p.Stats(); st.Evictions != 0 || st.Blocks != int64(2*states) {
		b.Fatalf("filling the pool with %d states took %d blocks and evicted %d", states, st.Blocks, st.Evictions)
	}
	b.Cleanup(func() {
		if r.m != nil {
			r.m.Release()
		}
	})
	return r
}

// cache registers n chains of 16 states of new tokens.
func (r *groupEvictRun) cache(n int) { registerChains(r.b, r.p, n, &r.tokens) }

// registerChains registers in p n chains of 16 states of the evictKV and
// evictRec group, each by a group released at once, the tokens from *tok
// on, 64 a state.
func registerChains(t testing.TB, p *Pool, n int, tok *uint32) {
	keys := make([]byte, 4*64)
	h := [][]byte{make([]byte, 8)}
	for range n {
		g := must[*Group](t)(NewSharedGroup(p, "w", "d", evictKV, evictRec))
		for range 16 {
			for i := range 64 {
				binary.LittleEndian.PutUint32(keys[4*i:], *tok)
				*tok++
			}
			binary.LittleEndian.PutUint32(h[0], *tok)
			check(t, g.Head(1).Write(0, h))
			check(t, g.Head(0).Append([][]byte{keys}))
		}
		check(t, g.Release())
	}
}

// step appends one block of rows to the evicting head: timed.
func (r *groupEvictRun) step() {
	if r.m == nil {
		r.m = must[*Head](r.b)(r.p.NewHead(evictRow, "m"))
	}
	check(r.b, r.m.Append(r.row))
}

// refill gives back what n steps took, as states registered anew: untimed.
func (r *groupEvictRun) refill(n int) {
	check(r.b, r.m.Release())
	r.m = nil
	r.cache((n + 15) / 16)
}
