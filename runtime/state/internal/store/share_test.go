package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// prompt is a shared layout: per token, a vector that stands for the
// token's keys and values (a function of the whole prefix up to it, as a
// decoder's KV rows are) and the token itself, the key.
func prompt(blockRows, bound int) *Layout {
	return &Layout{
		Type:      "Prompt",
		Columns:   []Column{{Name: "KV", ElemSize: 4, Width: 8}, {Name: "Token", ElemSize: 4, Width: 1}},
		Growth:    Append,
		Bound:     bound,
		BlockRows: blockRows,
		ShareKey:  "Token",
	}
}

// promptRows returns the rows of tokens toks[from:to]: each row's vector
// derives from every token up to it, so equal prefixes have equal rows.
func promptRows(toks []int32, from, to int) [][]byte { return derivedRows(toks, from, to, 8) }

// derivedRows returns rows [from, to) of a layout whose columns have the
// given widths of 4-byte elements, then the token: each row's elements
// derive from every token up to it, as a decoder's keys and values do.
func derivedRows(toks []int32, from, to int, widths ...int) [][]byte {
	cols := make([][]byte, len(widths)+1)
	h := uint32(2166136261)
	for i, t := range toks[:to] {
		h = (h ^ uint32(t)) * 16777619
		if i < from {
			continue
		}
		for c, w := range widths {
			for j := range w {
				cols[c] = binary.LittleEndian.AppendUint32(cols[c], h+uint32(c*7919+j))
			}
		}
		cols[len(widths)] = binary.LittleEndian.AppendUint32(cols[len(widths)], uint32(t))
	}
	return cols
}

func keyBytes(toks []int32) []byte {
	var b []byte
	for _, t := range toks {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return b
}

func tokens(seed int32, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = seed*1000 + int32(i)
	}
	return out
}

// session makes a shared head that adopts what it can of toks and
// appends the rest, and returns it with the rows it adopted.
func session(t testing.TB, p *Pool, l *Layout, owner Owner, d Domain, toks []int32) (*Head, int) {
	t.Helper()
	h := must[*Head](t)(p.NewSharedHead(l, owner, d))
	n := must[int](t)(h.AdoptPrefix(keyBytes(toks)))
	check(t, h.Append(promptRows(toks, n, len(toks))))
	return h, n
}

// readPrompt returns every row of x, per column.
func readPrompt(t testing.TB, x reader) [][]byte {
	t.Helper()
	n := x.Len()
	dst := [][]byte{make([]byte, n*32), make([]byte, n*4)}
	check(t, x.Read(0, n, dst))
	return dst
}

func samePrompt(t testing.TB, what string, got, want [][]byte) {
	t.Helper()
	for c := range want {
		if !bytes.Equal(got[c], want[c]) {
			t.Fatalf("%s: column %d differs", what, c)
		}
	}
}

func TestShareAdoptsPrefix(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := prompt(4, 64)
	common := tokens(1, 10)
	a, n := session(t, p, l, "alice", "tenant", common)
	defer a.Release()
	if n != 0 {
		t.Fatalf("first session adopted %d rows from an empty cache", n)
	}
	before := p.Stats().PhysicalBytes

	toks := append(append([]int32(nil), common...), tokens(2, 5)...)
	b := must[*Head](t)(p.NewSharedHead(l, "bob", "tenant"))
	defer b.Release()
	v0 := b.Version()
	n = must[int](t)(b.AdoptPrefix(keyBytes(toks)))
	if n != 8 {
		t.Fatalf("adopted %d rows, want 8 (the two full blocks of the 10 common tokens)", n)
	}
	if b.Len() != 8 || b.Version() <= v0 {
		t.Fatalf("after adoption: %d rows at version %d (was %d)", b.Len(), b.Version(), v0)
	}
	if got := p.Stats().PhysicalBytes; got != before {
		t.Fatalf("adoption took memory: physical %d, was %d", got, before)
	}
	check(t, b.Append(promptRows(toks, n, len(toks))))
	samePrompt(t, "adopting session", readPrompt(t, b), promptRows(toks, 0, len(toks)))
	samePrompt(t, "first session", readPrompt(t, a), promptRows(common, 0, len(common)))

	// Physically the two sessions store the common blocks once: bob's
	// rows past them take their own blocks.
	perBlock := int64(256 + 256) // a KV block of 4 rows and a Token block, each rounded up to 256 bytes
	if got, want := p.Stats().PhysicalBytes-before, 2*perBlock; got != want {
		t.Fatalf("bob's own rows took %d bytes, want %d (blocks 2 and 3)", got, want)
	}
	if st := b.Stats(); st.PhysicalBytes != 4*perBlock {
		t.Fatalf("bob's stats count %d physical bytes, want the %d of its 4 blocks", st.PhysicalBytes, 4*perBlock)
	}
}

func TestShareAdoptsAtMostTheBound(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := prompt(4, 10)
	toks := tokens(1, 10)
	a, _ := session(t, p, l, "a", "d", toks)
	defer a.Release()
	b := must[*Head](t)(p.NewSharedHead(l, "b", "d"))
	defer b.Release()
	long := append(append([]int32(nil), toks...), tokens(3, 20)...)
	if n := must[int](t)(b.AdoptPrefix(keyBytes(long))); n != 8 {
		t.Fatalf("adopted %d rows with a bound of 10 and blocks of 4, want 8", n)
	}
}

func TestShareBadInput(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := prompt(4, 64)
	for _, tc := range []struct {
		name string
		edit func(*Layout)
	}{
		{"no such column", func(l *Layout) { l.ShareKey = "Tokens" }},
		{"width 8", func(l *Layout) { l.ShareKey = "KV" }},
		{"3-byte key", func(l *Layout) { l.Columns[1].ElemSize = 3 }},
		{"mutable", func(l *Layout) { l.Growth = Mutable }},
		{"window", func(l *Layout) { l.Bound, l.Window = 0, 16 }},
	} {
		bad := prompt(4, 64)
		tc.edit(bad)
		if _, err := p.NewSharedHead(bad, "a", "d"); !errors.Is(err, ErrShape) {
			t.Errorf("%s: NewSharedHead: %v, want ErrShape", tc.name, err)
		}
		if _, err := p.NewHead(bad, "a"); !errors.Is(err, ErrShape) {
			t.Errorf("%s: NewHead: %v, want ErrShape", tc.name, err)
		}
	}
	if _, err := p.NewSharedHead(kv(Append, 8, Invalidate), "a", "d"); !errors.Is(err, ErrShape) {
		t.Errorf("NewSharedHead without a ShareKey: %v, want ErrShape", err)
	}
	plain := must[*Head](t)(p.NewHead(kv(Append, 8, Invalidate), "a"))
	defer plain.Release()
	if _, err := plain.AdoptPrefix(nil); !errors.Is(err, ErrShape) {
		t.Errorf("AdoptPrefix without a ShareKey: %v, want ErrShape", err)
	}
	h := must[*Head](t)(p.NewSharedHead(l, "a", "d"))
	if _, err := h.AdoptPrefix(make([]byte, 6)); !errors.Is(err, ErrShape) {
		t.Errorf("AdoptPrefix of 6 bytes of 4-byte keys: %v, want ErrShape", err)
	}
	check(t, h.Append(promptRows(tokens(1, 2), 0, 2)))
	v := h.Version()
	if _, err := h.AdoptPrefix(keyBytes(tokens(1, 8))); !errors.Is(err, ErrRange) {
		t.Errorf("AdoptPrefix on a head with rows: %v, want ErrRange", err)
	}
	if h.Version() != v || h.Len() != 2 {
		t.Errorf("a failed AdoptPrefix changed the head: version %d rows %d", h.Version(), h.Len())
	}
	check(t, h.Release())
	if _, err := h.AdoptPrefix(nil); !errors.Is(err, ErrReleased) {
		t.Errorf("AdoptPrefix after Release: %v, want ErrReleased", err)
	}
}

// TestShareIsolation tries every way a head could read rows of another
// domain, or of a state that shares with nobody, and fails each time.
func TestShareIsolation(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := prompt(4, 64)
	secret := tokens(7, 16)
	a, _ := session(t, p, l, "alice", "tenant-a", secret)
	keys := keyBytes(secret)

	adopts := func(what string, h *Head) {
		t.Helper()
		defer h.Release()
		if n := must[int](t)(h.AdoptPrefix(keys)); n != 0 {
			t.Errorf("%s adopted %d rows of tenant-a", what, n)
		}
	}
	adopts("another domain", must[*Head](t)(p.NewSharedHead(l, "bob", "tenant-b")))
	adopts("the same owner in another domain", must[*Head](t)(p.NewSharedHead(l, "alice", "tenant-b")))
	adopts("the empty domain", must[*Head](t)(p.NewSharedHead(l, "bob", "")))
	adopts("a head made by NewHead", must[*Head](t)(p.NewHead(l, "bob")))
	twin := prompt(4, 64) // the same type, shape and key, another Layout
	adopts("a look-alike layout", must[*Head](t)(p.NewSharedHead(twin, "bob", "tenant-a")))

	// Colliding hashes: a chain is matched by its parent and its keys,
	// never by its hash alone.
	cp := newPool(t, PoolOptions{})
	cp.cache.hash = func(uint64, []byte) uint64 { return 42 }
	w, _ := session(t, cp, l, "alice", "tenant-a", secret)
	forged := append([]int32(nil), secret...)
	forged[5]++
	h := must[*Head](t)(cp.NewSharedHead(l, "mallory", "tenant-a"))
	if n := must[int](t)(h.AdoptPrefix(keyBytes(forged))); n != 4 {
		t.Errorf("keys that differ at token 5 adopted %d rows under colliding hashes, want the 4 before it", n)
	}
	samePrompt(t, "adopted under colliding hashes", readPrompt(t, h), promptRows(secret, 0, 4))
	check(t, h.Release())
	check(t, w.Release())

	// A state of the empty domain registers nothing.
	quiet, _ := session(t, p, l, "carol", "", tokens(9, 16))
	check(t, quiet.Release())
	for _, d := range []Domain{"", "tenant-a"} {
		x := must[*Head](t)(p.NewSharedHead(l, "dave", d))
		if n := must[int](t)(x.AdoptPrefix(keyBytes(tokens(9, 16)))); n != 0 {
			t.Errorf("domain %q adopted %d rows of a state that shares with nobody", d, n)
		}
		check(t, x.Release())
	}

	// Another domain's spans never point at tenant-a's blocks.
	aBlocks := map[device.Ptr]bool{}
	for _, col := range must[[][]device.Span](t)(a.Spans(0, 16)) {
		for _, s := range col {
			aBlocks[s.Ptr] = true
		}
	}
	b, _ := session(t, p, l, "bob", "tenant-b", secret)
	for _, col := range must[[][]device.Span](t)(b.Spans(0, 16)) {
		for _, s := range col {
			if aBlocks[s.Ptr] {
				t.Fatalf("tenant-b's rows lie in tenant-a's block at %#x", s.Ptr)
			}
		}
	}
	check(t, b.Release())

	// Once tenant-a's blocks go back to the pool, another owner gets them
	// zeroed: rows it reserves and never writes read as zeros.
	check(t, a.Release())
	if got := p.ForgetPrefixes("tenant-a"); got == 0 {
		t.Fatal("ForgetPrefixes gave back no bytes of tenant-a's cached blocks")
	}
	c := must[*Head](t)(p.NewSharedHead(l, "bob", "tenant-b"))
	defer c.Release()
	if _, err := c.AppendDevice(64); err != nil {
		t.Fatal(err)
	}
	for i, col := range readPrompt(t, c) {
		if !bytes.Equal(col, make([]byte, len(col))) {
			t.Fatalf("column %d of blocks reused across owners is not zeroed", i)
		}
	}
}

// kernelFill writes rows [from, from+len) of a device append through its spans,
// as a kernel would.
func kernelFill(t testing.TB, b device.Backend, spans [][]device.Span, rows [][]byte, rowBytes []int) {
	t.Helper()
	for c, col := range spans {
		off := 0
		for _, s := range col {
			n := s.Rows * rowBytes[c]
			check(t, b.CopyHtoD(s.Ptr, rows[c][off:off+n]))
			off += n
		}
	}
}

func TestShareRegistersDeviceRowsAtTheNextCall(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := prompt(4, 64)
	toks := tokens(3, 9)
	a := must[*Head](t)(p.NewSharedHead(l, "a", "d"))
	spans := must[[][]device.Span](t)(a.AppendDevice(9))
	kernelFill(t, p.Backend(), spans, promptRows(toks, 0, 9), []int{32, 4})

	adopt := func() int {
		b := must[*Head](t)(p.NewSharedHead(l, "b", "d"))
		defer b.Release()
		n := must[int](t)(b.AdoptPrefix(keyBytes(toks)))
		if n > 0 {
			samePrompt(t, "adopted device rows", readPrompt(t, b), promptRows(toks, 0, n))
		}
		return n
	}
	if n := adopt(); n != 0 {
		t.Fatalf("adopted %d rows whose spans are still the writer's", n)
	}
	_ = a.Len()
	if _, err := a.Spans(0, 1); err != nil { // the next call on a
		t.Fatal(err)
	}
	if n := adopt(); n != 8 {
		t.Fatalf("after the next call, adopted %d rows, want 8", n)
	}

	// Release registers them too, when no stream was recorded.
	c := must[*Head](t)(p.NewSharedHead(l, "c", "d2"))
	spans = must[[][]device.Span](t)(c.AppendDevice(9))
	kernelFill(t, p.Backend(), spans, promptRows(toks, 0, 9), []int{32, 4})
	check(t, c.Release())
	d := must[*Head](t)(p.NewSharedHead(l, "d", "d2"))
	defer d.Release()
	if n := must[int](t)(d.AdoptPrefix(keyBytes(toks))); n != 8 {
		t.Fatalf("after the writer's release, adopted %d rows, want 8", n)
	}
	check(t, a.Release())
}

func TestShareAfterRollbackAndBranch(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := prompt(4, 64)
	base := tokens(1, 8)
	x := append(append([]int32(nil), base...), tokens(2, 4)...)
	y := append(append([]int32(nil), base...), tokens(3, 4)...)
	z := append(append([]int32(nil), base...), tokens(4, 4)...)

	a, _ := session(t, p, l, "a", "d", base)
	defer a.Release()
	s := must[*Snap](t)(a.Snapshot())
	defer s.Release()
	check(t, a.Append(promptRows(x, 8, 12)))
	check(t, a.Rollback(s))
	check(t, a.Append(promptRows(y, 8, 12)))
	br := must[*Head](t)(a.Branch())
	defer br.Release()
	check(t, br.Rollback(s))
	check(t, br.Append(promptRows(z, 8, 12)))

	for _, toks := range [][]int32{x, y, z} {
		h := must[*Head](t)(p.NewSharedHead(l, "b", "d"))
		if n := must[int](t)(h.AdoptPrefix(keyBytes(toks))); n != 12 {
			t.Fatalf("adopted %d rows of a chain written after a rollback, want 12", n)
		}
		samePrompt(t, "adopted after rollback", readPrompt(t, h), promptRows(toks, 0, 12))
		check(t, h.Release())
	}
}

// recorder is an Evictor that keeps what it was asked to rank, oldest
// first as the default does.
type recorder struct{ seen []Victim }

func (r *recorder) Rank(vs []Victim) {
	r.seen = append(r.seen, vs...)
	for i := 1; i < len(vs); i++ {
		for j := i; j > 0 && vs[j].LastUse < vs[j-1].LastUse; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}

func TestShareEvictsCachedBlocksLeavesFirst(t *testing.T) {
	l := prompt(4, 64)
	// Blocks of 4 rows: 128 bytes of KV and 16 of Token, both 256 after
	// alignment. 12 blocks of 256 bytes in all.
	ev := &recorder{}
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 12 * 256, Evictor: ev})
	toks := tokens(5, 16)
	a, _ := session(t, p, l, "a", "d", toks) // 4 blocks per column: 8 blocks
	check(t, a.Release())
	if got := p.Stats().CachedBytes; got != 8*256 {
		t.Fatalf("cached bytes after the writer's release: %d, want %d", got, 8*256)
	}
	// A mandatory state of 12 rows needs 6 blocks: 4 are free, 2 come
	// from the end of the cached chain.
	m := must[*Head](t)(p.NewHead(l, "m"))
	defer m.Release()
	check(t, m.Append(promptRows(tokens(6, 12), 0, 12)))
	if len(ev.seen) == 0 || !ev.seen[0].Cached || ev.seen[0].Type != "Prompt" || ev.seen[0].Owner != "a" {
		t.Fatalf("the Evictor saw %+v, want cached Prompt blocks of owner a", ev.seen)
	}
	st := p.Stats()
	if st.EvictedBytes != 2*256 || st.CachedBytes != 6*256 {
		t.Fatalf("evicted %d bytes, %d cached left; want 512 and 1536", st.EvictedBytes, st.CachedBytes)
	}
	b := must[*Head](t)(p.NewSharedHead(l, "b", "d"))
	defer b.Release()
	if n := must[int](t)(b.AdoptPrefix(keyBytes(toks))); n != 12 {
		t.Fatalf("adopted %d rows after the last block was evicted, want the first 12", n)
	}
	samePrompt(t, "what eviction left", readPrompt(t, b), promptRows(toks, 0, 12))
	// Blocks a head holds are never evicted: nothing else can give way.
	if err := m.Append(promptRows(tokens(6, 20), 12, 20)); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("append past what eviction may free: %v, want ErrNoMemory", err)
	}
	samePrompt(t, "held blocks under pressure", readPrompt(t, b), promptRows(toks, 0, 12))
}

// TestShareTrimKeepsTheCache: Trim gives back free slabs only; cached
// prefix blocks stay until ForgetPrefixes, after which Trim gives back
// everything.
func TestShareTrimKeepsTheCache(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := prompt(4, 64)
	toks := tokens(1, 16)
	a, _ := session(t, p, l, "a", "d", toks)
	check(t, a.Release())
	must[int64](t)(p.Trim())
	if st := p.Stats(); st.ReservedBytes == 0 || st.CachedBytes == 0 {
		t.Fatalf("Trim gave back the cached blocks: %+v", st)
	}
	b := must[*Head](t)(p.NewSharedHead(l, "b", "d"))
	if n := must[int](t)(b.AdoptPrefix(keyBytes(toks))); n != 16 {
		t.Fatalf("adopted %d rows after Trim, want 16", n)
	}
	check(t, b.Release())
	if got := p.ForgetPrefixes("d"); got == 0 {
		t.Fatal("ForgetPrefixes gave back nothing")
	}
	must[int64](t)(p.Trim())
	if st := p.Stats(); st.ReservedBytes != 0 || st.CachedBytes != 0 || st.PhysicalBytes != 0 {
		t.Fatalf("after ForgetPrefixes and Trim: %+v", st)
	}
}

// TestShareTablesFollowTheDomainsInUse: a domain's table goes once no
// head registers in it and it caches nothing, whether its entries were
// never made, forgotten or evicted.
func TestShareTablesFollowTheDomainsInUse(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 64 * 256})
	l := prompt(4, 64)
	tables := func() int {
		p.cache.mu.Lock()
		defer p.cache.mu.Unlock()
		return len(p.cache.tables)
	}
	for i := range 20 {
		d := Domain(fmt.Sprint("tenant-", i))
		h, _ := session(t, p, l, "a", d, tokens(int32(i), 3)) // no full block: nothing cached
		br := must[*Head](t)(h.Branch())
		check(t, h.Release())
		if tables() != 1 {
			t.Fatalf("%d tables while only a branch of one domain is live, want its table alone", tables())
		}
		check(t, br.Release())
	}
	if n := tables(); n != 0 {
		t.Fatalf("%d tables left by domains that cached nothing", n)
	}
	for i := range 4 {
		h, _ := session(t, p, l, "a", Domain(fmt.Sprint("tenant-", i)), tokens(int32(i), 8))
		check(t, h.Release())
	}
	if n := tables(); n != 4 {
		t.Fatalf("%d tables for 4 domains that cache blocks", n)
	}
	p.ForgetPrefixes("tenant-0")
	if n := tables(); n != 3 {
		t.Fatalf("%d tables after one of 4 domains was forgotten", n)
	}
	// A mandatory state that takes the whole pool evicts every cached
	// block, and the tables with them.
	m := must[*Head](t)(p.NewHead(prompt(4, 128), "m"))
	defer m.Release()
	check(t, m.Append(promptRows(tokens(99, 128), 0, 128)))
	if n := tables(); n != 0 || p.Stats().CachedBytes != 0 {
		t.Fatalf("%d tables and %d cached bytes after every cached block was evicted", n, p.Stats().CachedBytes)
	}
}
