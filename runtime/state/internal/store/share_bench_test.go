package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// The shape of a decoder's KV cache per token: keys and values of 4
// layers of 64 floats each, and the token, the key of sharing.
func kvPrompt() *Layout {
	return &Layout{
		Type: "KVCache",
		Columns: []Column{
			{Name: "Keys", ElemSize: 4, Width: 256},
			{Name: "Values", ElemSize: 4, Width: 256},
			{Name: "Token", ElemSize: 4, Width: 1},
		},
		Growth:   Append,
		Bound:    4096,
		ShareKey: "Token",
	}
}

// kvPromptRows returns the KVCache rows of toks[from:to].
func kvPromptRows(toks []int32, from, to int) [][]byte { return derivedRows(toks, from, to, 256, 256) }

// sharedRun is one run of sessions that each hold a common prefix and
// private rows of their own, with or without sharing.
type sharedRun struct {
	sessions, prefix, private int
}

func (r sharedRun) tokens(i int) []int32 {
	toks := tokens(1, r.prefix)
	return append(toks, tokens(int32(100+i), r.private)...)
}

// run makes the sessions in p (shared in domain "d", else by NewHead),
// and returns them with the rows they computed and the rows they adopted.
func (r sharedRun) run(t testing.TB, p *Pool, share bool) (hs []*Head, computed, adopted int) {
	t.Helper()
	l := kvPrompt()
	for i := range r.sessions {
		toks := r.tokens(i)
		var h *Head
		n := 0
		if share {
			h = must[*Head](t)(p.NewSharedHead(l, Owner(fmt.Sprint("session-", i)), "d"))
			n = must[int](t)(h.AdoptPrefix(keyBytes(toks)))
		} else {
			h = must[*Head](t)(p.NewHead(l, Owner(fmt.Sprint("session-", i))))
		}
		check(t, h.Append(kvPromptRows(toks, n, len(toks))))
		hs = append(hs, h)
		computed += len(toks) - n
		adopted += n
	}
	return hs, computed, adopted
}

func releaseAll(t testing.TB, hs []*Head) {
	for _, h := range hs {
		check(t, h.Release())
	}
}

// TestSharePhysicalBytes: 32 sessions that share a 1024-row prefix hold
// at most 1.1 times the bytes of one prefix plus their private rows.
func TestSharePhysicalBytes(t *testing.T) {
	for _, private := range []int{64, 100} {
		r := sharedRun{sessions: 32, prefix: 1024, private: private}
		p := newPool(t, PoolOptions{})
		hs, computed, adopted := r.run(t, p, true)
		ideal := int64(r.prefix+r.sessions*r.private) * int64(2*1024+4)
		got := p.Stats().PhysicalBytes
		t.Logf("%d private rows: physical %d bytes, %.3fx the logical bytes of one prefix and the private rows; %d rows computed, %d adopted",
			private, got, float64(got)/float64(ideal), computed, adopted)
		if float64(got) > 1.1*float64(ideal) {
			t.Errorf("%d private rows: physical %d bytes, %.3fx one prefix plus the private rows (%d); want at most 1.1x",
				private, got, float64(got)/float64(ideal), ideal)
		}
		if want := (r.sessions - 1) * r.prefix; adopted != want {
			t.Errorf("%d private rows: %d rows adopted, want %d (every session but the first adopts the prefix)", private, adopted, want)
		}
		releaseAll(t, hs)
	}
}

// BenchmarkSharedPrefix runs 32 sessions of a 1024-row prefix and 64
// private rows each, with sharing and without, side by side: the time to
// set the sessions up (adoption and the append of what was not adopted,
// against appending every row) and the physical bytes they hold.
func BenchmarkSharedPrefix(b *testing.B) {
	r := sharedRun{sessions: 32, prefix: 1024, private: 64}
	be := benchBackend(b)
	on := benchPool(b, be, PoolOptions{})
	off := benchPool(b, be, PoolOptions{})
	var onBytes, offBytes int64
	var computed, adopted, offComputed int
	session := func(p *Pool, share bool, phys *int64, c, a *int) func() {
		return func() {
			hs, cc, aa := r.run(b, p, share)
			*phys, *c = p.Stats().PhysicalBytes, cc
			if a != nil {
				*a = aa
			}
			releaseAll(b, hs)
			p.ForgetPrefixes("d") // each round starts from an empty cache
		}
	}
	sideBySide(b, 1, session(on, true, &onBytes, &computed, &adopted), "ns/shared-run", session(off, false, &offBytes, &offComputed, nil), "ns/unshared-run")
	b.ReportMetric(float64(onBytes)/float64(offBytes), "physical-ratio")
	b.ReportMetric(float64(computed)/float64(offComputed), "computed-ratio")
	b.ReportMetric(float64(adopted), "rows-adopted")
}

// BenchmarkAdoptPrefix takes a cached 1024-row prefix into a new head,
// against appending the same rows (computed beforehand) to a new head:
// the store's part of a session's setup, with and without sharing.
func BenchmarkAdoptPrefix(b *testing.B) {
	p := benchPool(b, benchBackend(b), PoolOptions{})
	l := kvPrompt()
	toks := tokens(1, 1024)
	keys := keyBytes(toks)
	rows := kvPromptRows(toks, 0, len(toks))
	first := must[*Head](b)(p.NewSharedHead(l, "first", "d"))
	check(b, first.Append(rows))
	defer first.Release()
	adopt := func() {
		h := must[*Head](b)(p.NewSharedHead(l, "s", "d"))
		if n := must[int](b)(h.AdoptPrefix(keys)); n != 1024 {
			b.Fatalf("adopted %d rows", n)
		}
		check(b, h.Release())
	}
	appendAll := func() {
		h := must[*Head](b)(p.NewHead(l, "s"))
		check(b, h.Append(rows))
		check(b, h.Release())
	}
	sideBySide(b, 4, adopt, "ns/adopt-1024", appendAll, "ns/append-1024")
}

// BenchmarkSharedAppendRow appends one KVCache row at a time (a decode
// step) to a shared head, which registers a block every 16 rows, against
// a head made by NewHead: what registration adds to an append.
func BenchmarkSharedAppendRow(b *testing.B) {
	p := benchPool(b, benchBackend(b), PoolOptions{})
	l := kvPrompt()
	toks := tokens(1, 1024)
	rows := make([][][]byte, len(toks))
	for i := range rows {
		rows[i] = kvPromptRows(toks, i, i+1)
	}
	step := func(share bool) func() {
		var h *Head
		i := 0
		return func() {
			if i == 0 {
				if h != nil {
					check(b, h.Release())
					p.ForgetPrefixes("d")
				}
				if share {
					h = must[*Head](b)(p.NewSharedHead(l, "s", "d"))
				} else {
					h = must[*Head](b)(p.NewHead(l, "s"))
				}
			}
			check(b, h.Append(rows[i]))
			i = (i + 1) % len(rows)
		}
	}
	sideBySide(b, 64, step(true), "ns/shared-append", step(false), "ns/append")
}

// BenchmarkEvictCached measures an append that must first evict one
// cached block, in a pool whose cache holds 64k entries no head holds
// against one whose cache holds 1k: chains of 16 blocks (4096 chains
// against 64) and chains of one block. The cost of finding a victim must
// not grow with the cache (ratio: the large cache's time over the small
// one's). Every append evicts; between batches, untimed, the evicting
// head goes and as many entries are cached anew, so the cache keeps its
// size and the victims are the least recently used, all over it.
func BenchmarkEvictCached(b *testing.B) {
	for _, depth := range []int{16, 1} {
		b.Run(fmt.Sprintf("chain-%d", depth), func(b *testing.B) {
			large, small := newEvictRun(b, 64<<10, depth), newEvictRun(b, 1<<10, depth)
			evictSideBySide(b, large, "ns/evict-64k-entries", small, "ns/evict-1k-entries")
		})
	}
}

// evictRun is a pool whose cache holds chains of depth blocks no head
// holds, filling it, and a head whose appends of one block per column
// each evict one cached entry.
type evictRun struct {
	b      *testing.B
	p      *Pool
	l      *Layout
	m      *Head
	depth  int
	chains int32 // chains cached so far: the next one's tokens
	rows   [][]byte
}

func newEvictRun(b *testing.B, entries, depth int) *evictRun {
	l := prompt(4, 1<<20)
	// Blocks of 256 bytes, two per entry (one per column): the cap is what
	// the entries take.
	p := benchPool(b, device.Host(), PoolOptions{BlockBytes: 256, MaxBytes: int64(entries*2) * 256})
	r := &evictRun{b: b, p: p, l: l, depth: depth, rows: promptRows(tokens(-1, 4), 0, 4)}
	r.cache(entries / depth)
	if st := p.Stats(); st.CachedBytes != int64(entries*2*256) {
		b.Fatalf("%d cached bytes, want %d entries", st.CachedBytes, entries)
	}
	b.Cleanup(func() {
		if r.m != nil {
			r.m.Release()
		}
	})
	return r
}

// cache registers n chains of new tokens, each by a head released at once.
func (r *evictRun) cache(n int) {
	for range n {
		h := must[*Head](r.b)(r.p.NewSharedHead(r.l, "w", "d"))
		check(r.b, h.Append(promptRows(tokens(r.chains, 4*r.depth), 0, 4*r.depth)))
		check(r.b, h.Release())
		r.chains++
	}
}

// step appends one block of rows to the evicting head: timed.
func (r *evictRun) step() {
	if r.m == nil {
		r.m = must[*Head](r.b)(r.p.NewHead(r.l, "m"))
	}
	check(r.b, r.m.Append(r.rows))
}

// refill gives back what n steps took, as n entries cached anew: untimed.
func (r *evictRun) refill(n int) {
	check(r.b, r.m.Release())
	r.m = nil
	r.cache(n / r.depth)
}

// evictStepper is a pool under memory pressure whose steps each evict,
// refilled after a batch: evictRun, groupEvictRun.
type evictStepper interface {
	step()
	refill(n int)
}

// evictSideBySide is sideBySide for two evictRuns, batches of 16 appends,
// each run refilled after its batch, out of the timing.
func evictSideBySide(b *testing.B, a evictStepper, unitA string, c evictStepper, unitC string) {
	const batch = 16
	run := func(r evictStepper) func() time.Duration {
		return func() time.Duration {
			start := time.Now()
			for range batch {
				r.step()
			}
			d := time.Since(start)
			r.refill(batch)
			return d
		}
	}
	alternate(b, batch, run(a), unitA, run(c), unitC)
}
