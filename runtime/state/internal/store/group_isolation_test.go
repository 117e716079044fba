package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestGroupAdoptedStateWrittenInPlaceStaysIsolated: a group that adopted
// another owner's registered recurrent state, once the cache let go of it
// (ForgetPrefixes), holds blocks carved for that owner alone. Writing them
// in place and releasing them would hand the writer's rows back to the
// first owner's free list unzeroed; the write path copies them instead,
// so the first owner's next state never reads the second's rows.
func TestGroupAdoptedStateWrittenInPlaceStaysIsolated(t *testing.T) {
	for _, write := range []struct {
		name string
		do   func(t *testing.T, h *Head, secret []byte)
	}{
		{"Write", func(t *testing.T, h *Head, secret []byte) { check(t, h.Write(1, [][]byte{secret[:8]})) }},
		{"WriteDevice", func(t *testing.T, h *Head, secret []byte) {
			spans := must[[][]device.Span](t)(h.WriteDevice(0, 4))
			check(t, h.pool.b.CopyHtoD(spans[0][0].Ptr, secret))
		}},
		{"Step", func(t *testing.T, h *Head, secret []byte) {
			check(t, h.Step([][]byte{{1}}, false, func(spans [][]device.Span, _ [][]byte) error {
				return h.pool.b.CopyHtoD(spans[0][0].Ptr, secret)
			}))
		}},
	} {
		t.Run(write.name, func(t *testing.T) {
			p := newPool(t, PoolOptions{})
			recL := rec(Invalidate)
			recL.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 2}
			a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, recL))
			prompt := make([]uint32, 16)
			for i := range prompt {
				prompt[i] = uint32(i + 1)
				feedTok(t, a, prompt[i])
			}
			check(t, a.Release())
			b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, recL))
			if n, err := b.AdoptPrefix(keysOf(prompt)); n != 16 || err != nil {
				t.Fatalf("AdoptPrefix = %d, %v; want 16", n, err)
			}
			p.ForgetPrefixes("tenant") // b holds what it adopted alone now
			secret := bytes.Repeat([]byte{0xbb}, 4*8)
			write.do(t, b.Head(1), secret)
			if got := readRec(t, b.Head(1)); !bytes.Contains(got, secret[:8]) {
				t.Fatalf("b reads %x after its write of %x", got, secret)
			}
			check(t, b.Release())
			// Owner a's next states take a's free blocks: none holds b's rows.
			for range 4 {
				h := must[*Head](t)(p.NewHead(recL, "a"))
				defer h.Release()
				if got := readRec(t, h); bytes.Contains(got, []byte{0xbb, 0xbb, 0xbb, 0xbb}) {
					t.Fatalf("a new state of owner a reads owner b's rows: %x", got)
				}
			}
			// An append state of the same block size whose rows a kernel
			// would write (AppendDevice) reads what its blocks held.
			appL := &Layout{Type: "App", Columns: recL.Columns, Growth: Append, Bound: 256, BlockRows: 128}
			for range 4 {
				h := must[*Head](t)(p.NewHead(appL, "a"))
				defer h.Release()
				must[[][]device.Span](t)(h.AppendDevice(4))
				if got := readRec(t, h); bytes.Contains(got, []byte{0xbb, 0xbb, 0xbb, 0xbb}) {
					t.Fatalf("rows owner a's kernel has not written read owner b's rows: %x", got)
				}
			}
		})
	}
}

// TestGroupReusedLayoutFindsItsOwnTable: a Layout value reused after a
// column was widened keys a group table of its own, as it keys a prefix
// table of its own for a single head: a group of the widened layouts
// adopts none of the states registered with the narrower rows, whose
// blocks it would read past into another owner's.
func TestGroupReusedLayoutFindsItsOwnTable(t *testing.T) {
	p := newPool(t, PoolOptions{})
	recL := rec(Invalidate)
	tokL := *tokLayout
	tokL.Columns = slices.Clone(tokLayout.Columns)
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", &tokL, recL))
	prompt := make([]uint32, 32)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
		feedTok(t, a, prompt[i])
	}
	check(t, a.Release())
	// Another owner's rows, next to the registered blocks.
	c := must[*Head](t)(p.NewHead(recL, "carol"))
	defer c.Release()
	check(t, c.Write(0, [][]byte{bytes.Repeat([]byte{0xcc}, 4*8)}))

	recL.Columns[0].Width = 2 // the same Layout value, a wider row
	b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", &tokL, recL))
	defer b.Release()
	if n, err := b.AdoptPrefix(keysOf(prompt)); n != 0 || err != nil {
		t.Fatalf("a group of the widened layout adopted %d rows (%v) of states registered with the narrower one", n, err)
	}
	dst := [][]byte{make([]byte, 4*16)}
	check(t, b.Head(1).Read(0, 4, dst))
	if bytes.Contains(dst[0], []byte{0xcc}) {
		t.Fatalf("the widened state reads another owner's rows: %x", dst[0])
	}
}

// TestGroupTablesFollowTheDomainsInUse: a group table whose last state is
// evicted or forgotten goes, so that registering costs the same whatever
// the number of domains seen before.
func TestGroupTablesFollowTheDomainsInUse(t *testing.T) {
	p := newPool(t, PoolOptions{})
	for i := range 50 {
		d := Domain(fmt.Sprint("tenant", i))
		g := must[*Group](t)(NewSharedGroup(p, Owner(d), d, tokLayout, groupRecLayout))
		for tok := range 16 {
			feedTok(t, g, uint32(tok))
		}
		check(t, g.Release())
		if i%2 == 0 { // evicted, as reclaim would
			var mine []*groupEntry
			for e := p.groups.states.front; e != nil; e = e.next {
				if e.tab.key.d == d {
					mine = append(mine, e)
				}
			}
			for _, e := range mine {
				groupVictim{p: p, e: e}.evict()
			}
		}
	}
	if n := len(p.groups.tables); n != 25 {
		t.Fatalf("%d group tables for 25 domains with registered states", n)
	}
	for i := range 50 {
		p.ForgetPrefixes(Domain(fmt.Sprint("tenant", i)))
	}
	if n := len(p.groups.tables); n != 0 {
		t.Fatalf("%d group tables left once every domain was forgotten", n)
	}
}

// TestGroupStatesSharingBlocksAreCountedAndEvicted: the states one group
// registers along its chain share their prefix blocks and, where a member
// did not change, that member's root. Counted each alone, those blocks
// appear in no figure and weigh nothing for eviction; counted once
// whoever holds them, PoolStats.CachedBytes is every byte the states
// hold, and a mandatory allocation that needs all of it evicts them.
func TestGroupStatesSharingBlocksAreCountedAndEvicted(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 64 << 10})
	recL := rec(Invalidate)
	g := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, recL))
	check(t, g.Head(1).Write(0, recRow(7))) // the recurrent state never changes again
	for tok := range 160 {
		check(t, g.Head(0).Append(tokRow(uint32(tok))))
	}
	check(t, g.Release())
	st := p.Stats()
	if st.Live != 0 || st.PhysicalBytes == 0 || st.CachedBytes != st.PhysicalBytes {
		t.Fatalf("with only registered states left: %d live, %d physical bytes, %d cached; want every physical byte cached",
			st.Live, st.PhysicalBytes, st.CachedBytes)
	}
	// A mandatory state that needs the whole pool: every registered state
	// must go.
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 64}
	h, err := p.NewHead(big, "z")
	if err != nil {
		t.Fatalf("a head that needs the registered states' room: %v (cached %d of %d reserved)", err, st.CachedBytes, st.ReservedBytes)
	}
	defer h.Release()
	if st := p.Stats(); st.CachedBytes != 0 {
		t.Fatalf("%d cached bytes left after the pool needed all of it", st.CachedBytes)
	}
}

// TestOptionalGroupIsOneVictim: under memory pressure an optional group
// is evicted whole, never one member with its partner kept.
func TestOptionalGroupIsOneVictim(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 64 << 10})
	kvL := kv(Append, 1024, Invalidate)
	kvL.Retention = Optional
	recL := rec(Invalidate)
	recL.Retention = Optional
	g := must[*Group](t)(NewGroup(p, "a", kvL, recL))
	defer g.Release()
	check(t, g.Head(0).Append(kvRows(512, 1))) // 12 KiB: the victim the pool needs
	check(t, g.Head(1).Write(0, recRow(3)))
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 56}
	h, err := p.NewHead(big, "z")
	if err != nil {
		t.Fatalf("a mandatory head that needs the group's room: %v", err)
	}
	defer h.Release()
	_, kvErr := g.Head(0).Snapshot()
	recErr := g.Head(1).Read(0, 4, [][]byte{make([]byte, 32)})
	if !errors.Is(kvErr, ErrEvicted) || !errors.Is(recErr, ErrEvicted) {
		t.Fatalf("after eviction: KV answers %v, Rec answers %v; want both evicted", kvErr, recErr)
	}
	if st := p.Stats(); st.Evictions != 1 {
		t.Fatalf("%d evictions; want the group as one", st.Evictions)
	}
}

// TestGroupAdoptionIsCounted: a group's AdoptPrefix counts in PoolStats
// as a head's does: a call, and on a hit the rows adopted.
func TestGroupAdoptionIsCounted(t *testing.T) {
	p := newPool(t, PoolOptions{})
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
	prompt := make([]uint32, 40)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
		feedTok(t, a, prompt[i])
	}
	check(t, a.Release())
	b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, groupRecLayout))
	defer b.Release()
	n := must[int](t)(b.AdoptPrefix(keysOf(prompt)))
	c := must[*Group](t)(NewSharedGroup(p, "c", "tenant", tokLayout, groupRecLayout))
	defer c.Release()
	must[int](t)(c.AdoptPrefix(keysOf([]uint32{99, 98})))
	st := p.Stats()
	if n != 32 || st.AdoptCalls != 2 || st.AdoptHits != 1 || st.AdoptedRows != 32 {
		t.Fatalf("adopted %d rows; stats count %d calls, %d hits, %d rows; want 2 calls, 1 hit, 32 rows",
			n, st.AdoptCalls, st.AdoptHits, st.AdoptedRows)
	}
}
