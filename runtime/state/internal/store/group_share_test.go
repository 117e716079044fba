package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// tokLayout is a shared append layout: a token column (the key) and a
// value per token, 16 rows to a block.
var tokLayout = &Layout{
	Type:      "Tok",
	Columns:   []Column{{Name: "Tok", ElemSize: 4, Width: 1}, {Name: "Val", ElemSize: 8, Width: 1}},
	Growth:    Append,
	Bound:     1024,
	BlockRows: 16,
	ShareKey:  "Tok",
}

var groupRecLayout = rec(Invalidate)

// tokRow is the row of token t: the recurrent state is a function of
// every token so far, so a restored one shows whether it is the state at
// the adopted prefix.
func tokRow(t uint32) [][]byte {
	k, v := make([]byte, 4), make([]byte, 8)
	binary.LittleEndian.PutUint32(k, t)
	binary.LittleEndian.PutUint64(v, uint64(t)*0x9e3779b97f4a7c15)
	return [][]byte{k, v}
}

func keysOf(tokens []uint32) []byte {
	out := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(out[4*i:], t)
	}
	return out
}

// feedTok feeds a token the way a hybrid decoder does: the recurrent
// state first, then the KV row, whose append registers the group's state
// when it fills a block. It returns the recurrent state after it.
func feedTok(t *testing.T, g *Group, tok uint32) []byte {
	t.Helper()
	h := readRec(t, g.Head(1))
	for i := range h {
		h[i] = h[i]*31 + byte(tok) + byte(i)
	}
	check(t, g.Head(1).Write(0, [][]byte{h}))
	check(t, g.Head(0).Append(tokRow(tok)))
	return h
}

func TestGroupPrefixSharing(t *testing.T) {
	p := newPool(t, PoolOptions{})
	prompt := make([]uint32, 40)
	for i := range prompt {
		prompt[i] = uint32(i*7 + 1)
	}
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
	recAt := map[int][]byte{}
	for i, tok := range prompt {
		recAt[i+1] = feedTok(t, a, tok)
	}
	kvA := readGroupCols(t, a.Head(0), 2)
	check(t, a.Release())
	if st := p.Stats(); st.Live != 0 || st.CachedBytes == 0 {
		t.Fatalf("after the first session: %d live, %d cached bytes; want 0 live and the registered states cached", st.Live, st.CachedBytes)
	}

	// Another owner of the tenant adopts the longest registered prefix:
	// 32 of the 40 rows, and the recurrent state after 32 tokens.
	b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, groupRecLayout))
	defer b.Release()
	n, err := b.AdoptPrefix(keysOf(prompt))
	if err != nil || n != 32 {
		t.Fatalf("AdoptPrefix = %d, %v; want 32", n, err)
	}
	if got := readGroupCols(t, b.Head(0), 2); !bytes.Equal(got[0], kvA[0][:32*4]) || !bytes.Equal(got[1], kvA[1][:32*8]) {
		t.Fatal("the adopted KV rows differ from the first session's")
	}
	if !bytes.Equal(readRec(t, b.Head(1)), recAt[32]) {
		t.Fatal("the recurrent state was not restored to its state at the adopted prefix")
	}
	// The rest is computed on top, and the shared blocks stay the first
	// session's: a write to the restored recurrent state copies its block.
	for _, tok := range prompt[32:] {
		feedTok(t, b, tok)
	}
	if !bytes.Equal(readRec(t, b.Head(1)), recAt[40]) {
		t.Fatal("after the rest of the prompt the recurrent state differs")
	}

	// A prompt that leaves the registered one at token 20 adopts 16 rows.
	c := must[*Group](t)(NewSharedGroup(p, "c", "tenant", tokLayout, groupRecLayout))
	defer c.Release()
	other := append([]uint32(nil), prompt...)
	other[20] = 999
	if n, err := c.AdoptPrefix(keysOf(other)); err != nil || n != 16 || !bytes.Equal(readRec(t, c.Head(1)), recAt[16]) {
		t.Fatalf("a prompt that differs at 20: AdoptPrefix = %d, %v; want 16 and the state at 16", n, err)
	}
	// A group that is not empty answers ErrRange and changes nothing.
	before := [2]Version{c.Head(0).Version(), c.Head(1).Version()}
	if _, err := c.AdoptPrefix(keysOf(prompt)); !errors.Is(err, ErrRange) || before != [2]Version{c.Head(0).Version(), c.Head(1).Version()} {
		t.Fatalf("AdoptPrefix on a group with rows: %v", err)
	}
	// Another domain, and a group made by NewGroup, adopt nothing.
	d := must[*Group](t)(NewSharedGroup(p, "d", "other", tokLayout, groupRecLayout))
	defer d.Release()
	e := must[*Group](t)(NewGroup(p, "e", tokLayout, groupRecLayout))
	defer e.Release()
	for _, x := range []*Group{d, e} {
		if n, err := x.AdoptPrefix(keysOf(prompt)); n != 0 || err != nil {
			t.Fatalf("AdoptPrefix outside the domain = %d, %v; want 0", n, err)
		}
	}
	// The member's own AdoptPrefix adopts nothing: it would leave the
	// recurrent state behind.
	f := must[*Group](t)(NewSharedGroup(p, "f", "tenant", tokLayout, groupRecLayout))
	defer f.Release()
	if n, err := f.Head(0).AdoptPrefix(keysOf(prompt)); n != 0 || err != nil {
		t.Fatalf("a member's own AdoptPrefix = %d, %v; want 0", n, err)
	}
	// Forgetting the tenant drops its registered states.
	if freed := p.ForgetPrefixes("tenant"); freed == 0 {
		t.Fatal("ForgetPrefixes freed nothing")
	}
	if n, _ := f.AdoptPrefix(keysOf(prompt)); n != 0 {
		t.Fatalf("adopted %d rows of a forgotten tenant", n)
	}
}

// readCols reads every row of a head of ncols columns, per column.
func readGroupCols(t *testing.T, h *Head, ncols int) [][]byte {
	t.Helper()
	n := h.Len()
	dst := make([][]byte, ncols)
	for c := range dst {
		dst[c] = make([]byte, n*h.l.Columns[c].ElemSize*h.l.Columns[c].Width)
	}
	check(t, h.Read(0, n, dst))
	return dst
}

// TestGroupPrefixEviction: registered states are optional retention: a
// mandatory allocation that needs their room evicts them.
func TestGroupPrefixEviction(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 64 << 10})
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
	for i := range 64 {
		feedTok(t, a, uint32(i))
	}
	check(t, a.Release())
	cached := p.Stats().CachedBytes
	if cached == 0 {
		t.Fatal("nothing cached")
	}
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 60}
	h, err := p.NewHead(big, "z")
	if err != nil {
		t.Fatalf("a mandatory head that needs the cache's room: %v (cached %d)", err, cached)
	}
	defer h.Release()
	if st := p.Stats(); st.EvictedBytes == 0 || st.CachedBytes >= cached {
		t.Fatalf("evicted %d bytes, cached %d of %d before", st.EvictedBytes, st.CachedBytes, cached)
	}
}

// recAfter is the recurrent state feedTok leaves after tokens, from zero.
func recAfter(tokens []uint32) []byte {
	h := make([]byte, 4*8)
	for _, tok := range tokens {
		for i := range h {
			h[i] = h[i]*31 + byte(tok) + byte(i)
		}
	}
	return h
}

// TestGroupPrefixModel runs sessions whose prompts share prefixes at
// random against a reference that knows every prefix registered: each
// adoption takes the longest registered whole-block prefix, restores both
// members to their state there, and the session then reads as if it had
// computed every row; ForgetPrefixes forgets. -model.seed runs another
// seed than 5.
func TestGroupPrefixModel(t *testing.T) {
	seed := statetest.Seeds(5)[0]
	statetest.LogReplay(t, seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	p := newPool(t, PoolOptions{})
	bases := make([][]uint32, 3)
	for i := range bases {
		for range 80 {
			bases[i] = append(bases[i], uint32(rng.IntN(4)))
		}
	}
	registered := map[string]bool{}
	var live []*Group
	for step := range groupModelSteps(t, 60) {
		switch rng.IntN(8) {
		case 0:
			p.ForgetPrefixes("tenant")
			clear(registered)
			continue
		case 1, 2:
			if len(live) > 0 {
				i := rng.IntN(len(live))
				check(t, live[i].Release())
				live = slices.Delete(live, i, i+1)
			}
			continue
		}
		base := bases[rng.IntN(len(bases))]
		prompt := slices.Clone(base[:1+rng.IntN(len(base))])
		if rng.IntN(3) == 0 {
			prompt[rng.IntN(len(prompt))] = 7 // leaves the base somewhere
		}
		if len(live) > 16 {
			check(t, live[0].Release())
			live = live[1:]
		}
		g := must[*Group](t)(NewSharedGroup(p, Owner(fmt.Sprint("s", step)), "tenant", tokLayout, groupRecLayout))
		live = append(live, g)
		n := adoptChecked(t, g, prompt, registered, step)
		h := recAfter(prompt[:n])
		for i, tok := range prompt[n:] {
			for j := range h {
				h[j] = h[j]*31 + byte(tok) + byte(j)
			}
			check(t, g.Head(1).Write(0, [][]byte{slices.Clone(h)}))
			check(t, g.Head(0).Append(tokRow(tok)))
			if k := n + i + 1; k%16 == 0 {
				registered[string(keysOf(prompt[:k]))] = true
			}
		}
		checkSession(t, g, prompt, step)
	}
	for _, g := range live {
		check(t, g.Release())
	}
	if p.ForgetPrefixes("tenant"); p.Stats().CachedBytes != 0 {
		t.Fatalf("%d cached bytes after forgetting the tenant", p.Stats().CachedBytes)
	}
}

// adoptChecked adopts for g, empty, the longest registered prefix of
// prompt but its last token, and checks it against the reference: the
// prefixes of whole blocks registered holds, and the recurrent state at
// it. It returns the rows adopted.
func adoptChecked(t *testing.T, g *Group, prompt []uint32, registered map[string]bool, step int) int {
	t.Helper()
	want := 0
	for n := 16; n <= len(prompt)-1; n += 16 {
		if registered[string(keysOf(prompt[:n]))] {
			want = n
		}
	}
	n, err := g.AdoptPrefix(keysOf(prompt[:len(prompt)-1]))
	if err != nil || n != want {
		t.Fatalf("step %d: AdoptPrefix = %d, %v; the reference says %d", step, n, err, want)
	}
	if !bytes.Equal(readRec(t, g.Head(1)), recAfter(prompt[:n])) {
		t.Fatalf("step %d: recurrent state after adopting %d rows", step, n)
	}
	return n
}

// checkSession checks that g reads as if it had computed every row of
// prompt.
func checkSession(t *testing.T, g *Group, prompt []uint32, step int) {
	t.Helper()
	got := readGroupCols(t, g.Head(0), 2)
	var wantKeys, wantVals []byte
	for _, tok := range prompt {
		r := tokRow(tok)
		wantKeys, wantVals = append(wantKeys, r[0]...), append(wantVals, r[1]...)
	}
	if !bytes.Equal(got[0], wantKeys) || !bytes.Equal(got[1], wantVals) || !bytes.Equal(readRec(t, g.Head(1)), recAfter(prompt)) {
		t.Fatalf("step %d: the session does not read as its prompt computed", step)
	}
}

// TestGroupPrefixConcurrent: sessions of one tenant adopt, feed and
// release at once; each reads as its prompt computed, whatever it adopted.
func TestGroupPrefixConcurrent(t *testing.T) {
	p := newPool(t, PoolOptions{})
	prompt := make([]uint32, 64)
	for i := range prompt {
		prompt[i] = uint32(i % 5)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				g, err := NewSharedGroup(p, Owner(fmt.Sprint(w, "-", i)), "tenant", tokLayout, groupRecLayout)
				if err != nil {
					t.Error(err)
					return
				}
				n, err := g.AdoptPrefix(keysOf(prompt[:len(prompt)-1]))
				if err == nil {
					h := recAfter(prompt[:n])
					for _, tok := range prompt[n:] {
						for j := range h {
							h[j] = h[j]*31 + byte(tok) + byte(j)
						}
						if err = g.Head(1).Write(0, [][]byte{slices.Clone(h)}); err == nil {
							err = g.Head(0).Append(tokRow(tok))
						}
						if err != nil {
							break
						}
					}
				}
				if err != nil {
					t.Error(err)
				} else if dst := [][]byte{make([]byte, 32)}; g.Head(1).Read(0, 4, dst) != nil || !bytes.Equal(dst[0], recAfter(prompt)) || g.Head(0).Len() != len(prompt) {
					t.Errorf("session %d-%d after adopting %d rows does not read as its prompt", w, i, n)
				}
				if err := g.Release(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

// TestGroupPrefixChainModel runs hybrid sessions that feed their prompts
// in chunks of any size, draft tokens and roll them back, branch, and
// lose registered states to eviction, against a reference of every prefix
// whose state a group registered: an adoption takes the longest, restored
// to its state there. Prompts run past 32 blocks, where the shared
// member's tree grows a level. -model.seed runs one seed.
func TestGroupPrefixChainModel(t *testing.T) {
	seeds := statetest.Seeds(7)
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runGroupPrefixChainModel(t, seed, false) })
	}
	// Every chain hash the same: a match is never trusted on its hash.
	t.Run("collisions", func(t *testing.T) { runGroupPrefixChainModel(t, seeds[0], true) })
}

func runGroupPrefixChainModel(t *testing.T, seed uint64, collide bool) {
	statetest.LogReplay(t, seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	p := newPool(t, PoolOptions{})
	if collide {
		p.groups.hash = func(uint64, []byte) uint64 { return 1 }
	}
	bases := make([][]uint32, 3)
	for i := range bases {
		for range 700 {
			bases[i] = append(bases[i], uint32(rng.IntN(3)))
		}
	}
	registered := map[string]bool{}
	// feed writes the recurrent state after toks, then appends their KV
	// rows in one call, as a chunk of prefill; seq is what g has fed.
	feed := func(g *Group, seq *[]uint32, toks []uint32) {
		t.Helper()
		*seq = append(*seq, toks...)
		check(t, g.Head(1).Write(0, [][]byte{recAfter(*seq)}))
		var keys, vals []byte
		for _, tok := range toks {
			r := tokRow(tok)
			keys, vals = append(keys, r[0]...), append(vals, r[1]...)
		}
		check(t, g.Head(0).Append([][]byte{keys, vals}))
		if len(*seq)%16 == 0 {
			registered[string(keysOf(*seq))] = true
		}
	}
	random := func(n int) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			out[i] = uint32(rng.IntN(3))
		}
		return out
	}
	var evictions int
	for step := range groupModelSteps(t, 40) {
		if rng.IntN(10) == 0 {
			p.ForgetPrefixes("tenant")
			clear(registered)
		}
		base := bases[rng.IntN(len(bases))]
		prompt := slices.Clone(base[:1+rng.IntN(len(base))])
		if rng.IntN(3) == 0 {
			prompt[rng.IntN(len(prompt))] = 7 // leaves the base somewhere
		}
		g := must[*Group](t)(NewSharedGroup(p, Owner(fmt.Sprint("s", step)), "tenant", tokLayout, groupRecLayout))
		n := adoptChecked(t, g, prompt, registered, step)
		seq := slices.Clone(prompt[:n])
		for len(seq) < len(prompt) {
			switch rng.IntN(8) {
			case 0: // a rejected draft
				cut := must[*GroupSnap](t)(g.Snapshot())
				draft := slices.Clone(seq)
				for range 1 + rng.IntN(3) {
					feed(g, &draft, random(1+rng.IntN(20)))
				}
				check(t, g.Rollback(cut))
				check(t, cut.Release())
			case 1: // a branch that explores and goes
				b := must[*Group](t)(g.Branch())
				other := slices.Clone(seq)
				feed(b, &other, random(1+rng.IntN(40)))
				check(t, b.Release())
			case 2: // the evictor takes a registered state
				vs := p.groups.victims(p)
				if len(vs) == 0 {
					break
				}
				v := vs[rng.IntN(len(vs))].(groupVictim)
				var keys []byte
				for x := v.e; x != nil; x = x.parent {
					keys = append(slices.Clone(x.keys), keys...)
				}
				if _, ok := v.evict(); !ok || v.e.roots != nil {
					t.Fatalf("step %d: evicting the state at %d rows freed nothing", step, v.e.rows)
				}
				evictions++
				delete(registered, string(keys))
			}
			k := min(len(prompt)-len(seq), 1+rng.IntN(40))
			feed(g, &seq, prompt[len(seq):len(seq)+k])
		}
		checkSession(t, g, prompt, step)
		check(t, g.Release())
		checkGroupTables(t, p)
	}
	if evictions == 0 {
		t.Fatal("no registered state was evicted: the model did not reach eviction")
	}
	if p.ForgetPrefixes("tenant"); p.Stats().CachedBytes != 0 {
		t.Fatalf("%d cached bytes after forgetting the tenant", p.Stats().CachedBytes)
	}
}

// checkGroupTables checks the group cache's tables: every entry in its
// bucket by the hash of its chain, its parent in the table, its kids
// counted, a block's keys each, and none that neither holds a state nor
// leads to one.
func checkGroupTables(t *testing.T, p *Pool) {
	t.Helper()
	c := &p.groups
	c.mu.Lock()
	defer c.mu.Unlock()
	listed := 0
	var used uint64
	for e := c.states.front; e != nil; e = e.next {
		if e.gone || e.roots == nil || e.used < used {
			t.Fatalf("the list of states holds an entry at %d rows: gone %v, with a state %v, used at %d after %d", e.rows, e.gone, e.roots != nil, e.used, used)
		}
		listed, used = listed+1, e.used
	}
	if listed != c.states.n {
		t.Fatalf("the list of states counts %d, holds %d", c.states.n, listed)
	}
	for _, tab := range c.tables {
		kids := map[*groupEntry]int{}
		n := 0
		for h, b := range tab.buckets {
			for _, e := range b {
				n++
				if e.gone || e.tab != tab || c.chainHash(e.parent, e.keys) != h {
					t.Fatalf("entry at %d rows: gone %v, in its table %v, in its bucket %v", e.rows, e.gone, e.tab == tab, c.chainHash(e.parent, e.keys) == h)
				}
				if e.parent != nil {
					if e.parent.gone || e.parent.rows+len(e.keys)/4 != e.rows {
						t.Fatalf("entry at %d rows: parent gone %v at %d rows", e.rows, e.parent.gone, e.parent.rows)
					}
					kids[e.parent]++
				} else if len(e.keys)/4 != e.rows {
					t.Fatalf("first entry at %d rows holds %d keys", e.rows, len(e.keys)/4)
				}
			}
		}
		if n != tab.n {
			t.Fatalf("table counts %d entries, holds %d", tab.n, n)
		}
		for _, b := range tab.buckets {
			for _, e := range b {
				if e.listed != (e.roots != nil) {
					t.Fatalf("entry at %d rows: holds a state %v, in the list of states %v", e.rows, e.roots != nil, e.listed)
				}
				if e.kids != kids[e] {
					t.Fatalf("entry at %d rows counts %d kids, has %d", e.rows, e.kids, kids[e])
				}
				if e.kids == 0 && e.roots == nil {
					t.Fatalf("entry at %d rows holds no state and leads to none", e.rows)
				}
			}
		}
	}
}

// TestGroupPrefixStepCostsNoLength: a hybrid decode step in a sharing
// domain allocates as much at 8192 tokens as at 1024 (a registration
// reads back the keys of its own block, not of the whole prefix), and the
// table keeps each block's keys once. Both lengths give the shared
// member's trees the same height: the paths a registration makes the next
// append copy are as long.
func TestGroupPrefixStepCostsNoLength(t *testing.T) {
	p := newPool(t, PoolOptions{})
	long := *tokLayout
	long.Bound = 16384
	const steps = 512
	type perStepCost struct {
		allocs float64
		bytes  uint64
	}
	perStep := func(ctx int) perStepCost {
		g := must[*Group](t)(NewSharedGroup(p, "s", "tenant", &long, groupRecLayout))
		defer g.Release()
		// The token list is made at its full length, so that its growth
		// is not counted as the step's.
		seq := make([]uint32, 0, ctx+64+steps)
		step := func(toks []uint32) {
			seq = append(seq, toks...)
			check(t, g.Head(1).Write(0, [][]byte{recAfter(seq[len(seq)-1:])}))
			var keys, vals []byte
			for _, tok := range toks {
				r := tokRow(tok)
				keys, vals = append(keys, r[0]...), append(vals, r[1]...)
			}
			check(t, g.Head(0).Append([][]byte{keys, vals}))
		}
		for len(seq) < ctx {
			toks := make([]uint32, 64)
			for i := range toks {
				toks[i] = uint32(ctx + len(seq) + i)
			}
			step(toks)
		}
		one := []uint32{0}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range steps {
			one[0] = uint32(ctx + len(seq))
			step(one)
		}
		runtime.ReadMemStats(&after)
		return perStepCost{
			allocs: float64(after.Mallocs-before.Mallocs) / steps,
			bytes:  (after.TotalAlloc - before.TotalAlloc) / steps,
		}
	}
	// Allocations are counted closely; bytes loosely, as the table's map
	// and the allocator's slabs grow now and then by large amounts, at a
	// step that depends on the context: a registration that read back the
	// whole prefix would cost kilobytes a step at 8192 tokens.
	short, far := perStep(1024), perStep(8192)
	if far.allocs > short.allocs*1.5+0.25 || far.bytes > 2*short.bytes+256 {
		t.Errorf("a decode step makes %.2f allocations of %d bytes at 8192 tokens, %.2f of %d at 1024: it grows with the context",
			far.allocs, far.bytes, short.allocs, short.bytes)
	}
	// 1024+512 and 8192+512 tokens, 16 to a block, in chains that share
	// nothing: an entry per block, each with its own block's keys.
	c := &p.groups
	c.mu.Lock()
	defer c.mu.Unlock()
	entries, keys := 0, 0
	for _, tab := range c.tables {
		for _, b := range tab.buckets {
			for _, e := range b {
				entries++
				keys += len(e.keys)
			}
		}
	}
	if want := (1024 + 512 + 8192 + 512) / 16; entries != want || keys != want*16*4 {
		t.Errorf("the table holds %d entries and %d bytes of keys; want %d and %d", entries, keys, want, want*16*4)
	}
}

// TestGroupPrefixEvictionMany: an allocation that needs the room of
// hundreds of registered states gets it, though a reclaim round ranks a
// few of them at a time, and one that no eviction could serve fails
// having evicted nothing.
func TestGroupPrefixEvictionMany(t *testing.T) {
	const states = 512
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 2 * states * 256})
	var tok uint32
	registerChains(t, p, states/16, &tok)
	if st := p.Stats(); st.Blocks != 2*states || st.Evictions != 0 {
		t.Fatalf("filled with %d blocks, %d evictions; want %d and none", st.Blocks, st.Evictions, 2*states)
	}
	huge := &Layout{Type: "Huge", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}, Growth: Mutable, Bound: 4 * states}
	if _, err := p.NewHead(huge, "z"); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("a head larger than the pool: %v; want ErrNoMemory", err)
	}
	if st := p.Stats(); st.Evictions != 0 {
		t.Fatalf("a call that failed anyway evicted %d states", st.Evictions)
	}
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}, Growth: Mutable, Bound: states - 12}
	b := must[*Head](t)(p.NewHead(big, "z"))
	defer b.Release()
	if st := p.Stats(); st.EvictedBytes < (states-12)*256 || st.Evictions <= maxGroupVictims {
		t.Fatalf("%d evictions of %d bytes made the room of %d blocks; want more than a round's %d", st.Evictions, st.EvictedBytes, states-12, maxGroupVictims)
	}
	checkGroupTables(t, p)
}
