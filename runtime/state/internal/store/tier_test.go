package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// tierPool holds n blocks of 256 bytes in device memory and tier bytes in
// the host tier.
func tierPool(t *testing.T, n int, tier int64) *Pool {
	return newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: int64(n) * 256, HostTier: tier})
}

// optionalHeads makes n optional heads of two rows each, owner o<i>, rows
// seeded 10*i, used in order: head 0 is the least recently used.
func optionalHeads(t *testing.T, p *Pool, n int) []*Head {
	t.Helper()
	var hs []*Head
	for i := range n {
		h := must[*Head](t)(p.NewHead(wide("Cache", Optional), Owner(fmt.Sprint("o", i))))
		t.Cleanup(func() { h.Release() })
		fill(t, h, 2, byte(10*i))
		hs = append(hs, h)
	}
	return hs
}

// headOf is p.NewHead, released when the test ends (before its pool
// closes).
func headOf(t *testing.T, p *Pool, l *Layout, o Owner) *Head {
	t.Helper()
	h := must[*Head](t)(p.NewHead(l, o))
	t.Cleanup(func() { h.Release() })
	return h
}

func wantRows(i int) []byte { return catWide(wideRow(byte(10*i)), wideRow(byte(10*i+1))) }

func checkInv(t *testing.T, p *Pool) {
	t.Helper()
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}

// TestTierMovesAndBringsBack: where the pool would evict an optional head,
// it moves it to the host tier; Len, Version and Stats answer from the
// image without bringing it back, and a read brings it back with the same
// rows and version. Nothing was dropped.
func TestTierMovesAndBringsBack(t *testing.T) {
	p := tierPool(t, 8, 64<<10)
	opt := optionalHeads(t, p, 4)
	victim := opt[0]
	v := victim.Version()
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 2, 200)
	st := p.Stats()
	if st.TierBytes != 512 || st.TierOut != 512 || st.EvictedBytes != 0 || st.Evictions != 0 {
		t.Fatalf("after the move: tier %d bytes, out %d, evicted %d bytes in %d; want 512, 512, 0, 0",
			st.TierBytes, st.TierOut, st.EvictedBytes, st.Evictions)
	}
	if victim.r != nil || victim.tier == nil {
		t.Fatal("the least recently used optional head is not in the tier")
	}
	checkInv(t, p)
	// Metadata answers from the image.
	if n, got, s := victim.Len(), victim.Version(), victim.Stats(); n != 2 || got != v || s.Rows != 2 || s.LogicalBytes != 512 || s.Version != v {
		t.Fatalf("in the tier: Len %d, Version %d, Stats %+v; want 2, %d, 2 rows of 512 bytes", n, got, s, v)
	}
	if victim.Bound() != 0 || victim.tier == nil || p.Stats().TierIn != 0 {
		t.Fatal("Len, Version, Bound or Stats brought the head back")
	}
	// A read brings it back (another head goes to the tier for its room).
	if got := readWide(t, victim); !bytes.Equal(got, wantRows(0)) {
		t.Fatal("rows brought back from the tier differ")
	}
	if victim.Version() != v {
		t.Fatalf("version %d after the tier, want %d", victim.Version(), v)
	}
	st = p.Stats()
	if st.TierIn != 512 || st.TierOut != 1024 || st.TierBytes != 512 || st.EvictedBytes != 0 {
		t.Fatalf("after the return: in %d, out %d, tier %d, evicted %d; want 512, 1024, 512, 0", st.TierIn, st.TierOut, st.TierBytes, st.EvictedBytes)
	}
	// The head goes on as before: a write after the return.
	check(t, victim.Append(wideRow(7)))
	if got := readWide(t, victim); !bytes.Equal(got, append(wantRows(0), wideRow(7)[0]...)) {
		t.Fatal("an append after the return")
	}
	for i, h := range opt {
		if got := readWide(t, h); i > 0 && !bytes.Equal(got, wantRows(i)) {
			t.Fatalf("optional head %d changed", i)
		}
	}
	checkInv(t, p)
}

// TestTierFullDrops: the tier drops its own victims, the Evictor's
// choice, when it is full; a state dropped from the tier answers
// ErrEvicted and counts in EvictedBytes and TierDropped.
func TestTierFullDrops(t *testing.T) {
	p := tierPool(t, 6, 512) // the tier holds one state
	opt := optionalHeads(t, p, 3)
	a := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, a, 2, 100) // opt[0] to the tier
	fill(t, a, 2, 110) // opt[1] to the tier, opt[0] dropped from it
	if err := opt[0].Read(0, 1, [][]byte{make([]byte, 256)}); !errors.Is(err, ErrEvicted) {
		t.Fatalf("a head the tier dropped: %v, want ErrEvicted", err)
	}
	if n := opt[0].Len(); n != 0 {
		t.Fatalf("a head the tier dropped has %d rows", n)
	}
	st := p.Stats()
	if st.TierDropped != 512 || st.EvictedBytes != 512 || st.Evictions != 1 || st.TierBytes != 512 || st.TierOut != 1024 {
		t.Fatalf("dropped %d, evicted %d bytes in %d, tier %d, out %d; want 512, 512, 1, 512, 1024", st.TierDropped, st.EvictedBytes, st.Evictions, st.TierBytes, st.TierOut)
	}
	if opt[1].Len() != 2 || opt[1].tier == nil {
		t.Fatal("the head moved last is not in the tier")
	}
	checkInv(t, p)
	check(t, a.Release())
	if got := readWide(t, opt[1]); !bytes.Equal(got, wantRows(1)) {
		t.Fatal("rows brought back from the tier differ")
	}
	checkInv(t, p)
}

// TestTierKeepsSharedBlocks: a head whose blocks a snapshot holds too is
// not moved (the tier takes only what a victim holds alone): it is
// dropped as without a tier, and its snapshot keeps its rows.
func TestTierKeepsSharedBlocks(t *testing.T) {
	p := tierPool(t, 6, 64<<10)
	h := headOf(t, p, wide("Cache", Optional), "a")
	fill(t, h, 2, 1)
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	fill(t, h, 1, 9) // two blocks shared, one its own
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 4, 50)
	if err := h.Read(0, 1, [][]byte{make([]byte, 256)}); !errors.Is(err, ErrEvicted) {
		t.Fatalf("a head that shares blocks with a snapshot: %v, want it dropped (ErrEvicted)", err)
	}
	if st := p.Stats(); st.TierOut != 0 || st.TierBytes != 0 || st.EvictedBytes != 256 {
		t.Fatalf("tier out %d, tier %d, evicted %d; want 0, 0, 256", st.TierOut, st.TierBytes, st.EvictedBytes)
	}
	if got := readWide(t, s); !bytes.Equal(got, catWide(wideRow(1), wideRow(2))) {
		t.Fatal("the snapshot lost its rows")
	}
	checkInv(t, p)
}

// TestTierSnapshot: an optional snapshot that holds its blocks alone moves
// to the tier and comes back on a read.
func TestTierSnapshot(t *testing.T) {
	p := tierPool(t, 4, 64<<10)
	h := headOf(t, p, wide("Cache", Optional), "a")
	fill(t, h, 2, 30)
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	check(t, h.Release())
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 3, 50)
	if s.tier == nil || s.Len() != 2 || s.Stats().Rows != 2 {
		t.Fatal("the snapshot is not in the tier, or its metadata is lost")
	}
	check(t, m.Release())
	if got := readWide(t, s); !bytes.Equal(got, catWide(wideRow(30), wideRow(31))) {
		t.Fatal("the snapshot's rows brought back differ")
	}
	if st := p.Stats(); st.TierIn != 512 || st.TierBytes != 0 {
		t.Fatalf("tier in %d, tier %d; want 512, 0", st.TierIn, st.TierBytes)
	}
	checkInv(t, p)
}

// TestTierGroupMovesWhole: an optional group moves to the tier as one, and
// a call on one member brings both back.
func TestTierGroupMovesWhole(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 64 << 10, HostTier: 1 << 20})
	kvL := kv(Append, 1024, Invalidate)
	kvL.Retention = Optional
	recL := rec(Invalidate)
	recL.Retention = Optional
	g := must[*Group](t)(NewGroup(p, "a", kvL, recL))
	defer g.Release()
	check(t, g.Head(0).Append(kvRows(512, 1)))
	check(t, g.Head(1).Write(0, recRow(3)))
	v0, v1 := g.Head(0).Version(), g.Head(1).Version()
	wantKV := [][]byte{make([]byte, 512*16), make([]byte, 512*8)}
	check(t, g.Head(0).Read(0, 512, wantKV))
	wantRec := make([]byte, 32)
	check(t, g.Head(1).Read(0, 4, [][]byte{wantRec}))
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 56}
	h := headOf(t, p, big, "z")
	if g.Head(0).tier == nil || g.Head(1).tier == nil {
		t.Fatal("the group did not move to the tier whole")
	}
	if st := p.Stats(); st.Evictions != 0 || st.EvictedBytes != 0 || st.TierBytes == 0 {
		t.Fatalf("evictions %d of %d bytes, tier %d; want the group in the tier", st.Evictions, st.EvictedBytes, st.TierBytes)
	}
	checkInv(t, p)
	check(t, h.Release())
	got := make([]byte, 32)
	check(t, g.Head(1).Read(0, 4, [][]byte{got}))
	if g.Head(0).tier != nil || p.Stats().TierBytes != 0 {
		t.Fatal("a call on one member left the other in the tier")
	}
	gotKV := [][]byte{make([]byte, 512*16), make([]byte, 512*8)}
	check(t, g.Head(0).Read(0, 512, gotKV))
	if !bytes.Equal(got, wantRec) || !bytes.Equal(gotKV[0], wantKV[0]) || !bytes.Equal(gotKV[1], wantKV[1]) || g.Head(0).Version() != v0 || g.Head(1).Version() != v1 {
		t.Fatal("the members' rows or versions changed in the tier")
	}
	checkInv(t, p)
}

// TestTierIsolation: tier memory that held one owner's rows is zeroed
// before another owner's state takes it, and a state moved out and back
// reads its own rows only.
func TestTierIsolation(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 1024, MaxBytes: 4 * 1024, HostTier: 4096})
	l := wide("Cache", Optional) // 256-byte rows in 1 KiB blocks
	a := must[*Head](t)(p.NewHead(l, "A"))
	for range 4 {
		check(t, a.Append([][]byte{bytes.Repeat([]byte{0xAA}, 256)}))
	}
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 16, 1) // a to the tier
	if a.tier == nil {
		t.Fatal("A's head is not in the tier")
	}
	check(t, a.Release()) // its tier bytes are free, tagged A's
	check(t, m.Release())
	// Every tier block B is handed now held A's rows: all zeros.
	bs, err := p.tier.mem.Alloc(nil, p.tier.mem.Class(1024), "B", 4, false)
	if err != nil {
		t.Fatalf("the tier has no room for B: %v", err)
	}
	for _, b := range bs {
		if bytes.IndexByte(p.tier.hm.bytes(b.Ptr(), b.Bytes()), 0xAA) >= 0 {
			t.Fatal("owner B was handed tier memory that holds owner A's rows")
		}
	}
	p.tier.give(bs)
	// B's own state, one row in a block, out and back: B reads its rows
	// and its block holds nothing of A's.
	b := must[*Head](t)(p.NewHead(l, "B"))
	check(t, b.Append([][]byte{bytes.Repeat([]byte{0xBB}, 256)}))
	m2 := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m2, 16, 1) // b to the tier
	if b.tier == nil {
		t.Fatal("B's head is not in the tier")
	}
	check(t, m2.Release())
	spans2 := must[[][]device.Span](t)(b.Spans(0, 1))
	blk := make([]byte, 1024)
	check(t, p.b.CopyDtoH(blk, spans2[0][0].Ptr))
	if bytes.IndexByte(blk, 0xAA) >= 0 || !bytes.Equal(blk[:256], bytes.Repeat([]byte{0xBB}, 256)) {
		t.Fatal("B's block brought back from the tier holds another owner's bytes or lost its own")
	}
	check(t, b.Release())
	checkInv(t, p)
	if st := p.Stats(); st.TierBytes != 0 {
		t.Fatalf("%d bytes in the tier after every handle was released", st.TierBytes)
	}
}

// TestTierEmptiesOnReleaseAndClose: after every handle is released the
// tier holds nothing; a pool closed with states in the tier gives the
// tier's memory back too.
func TestTierEmptiesOnReleaseAndClose(t *testing.T) {
	p := tierPool(t, 6, 64<<10)
	opt := optionalHeads(t, p, 3)
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 4, 1)
	if st := p.Stats(); st.TierBytes != 1024 {
		t.Fatalf("tier %d bytes, want two heads' 1024", st.TierBytes)
	}
	p.ForgetPrefixes("d") // nothing of a domain: the tier keeps the heads
	for _, h := range opt {
		check(t, h.Release())
	}
	check(t, m.Release())
	checkInv(t, p)
	if st := p.Stats(); st.TierBytes != 0 || p.tier.mem.Stats().InUse != 0 {
		t.Fatalf("%d bytes in the tier after every handle was released", st.TierBytes)
	}
	q, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256, MaxBytes: 4 * 256, HostTier: 64 << 10})
	check(t, err)
	var hs []*Head
	for i := range 2 {
		h := must[*Head](t)(q.NewHead(wide("Cache", Optional), Owner(fmt.Sprint("o", i))))
		fill(t, h, 2, byte(10*i))
		hs = append(hs, h)
	}
	fill(t, must[*Head](t)(q.NewHead(wide("Session", Mandatory), "m")), 2, 1)
	if hs[0].tier == nil {
		t.Fatal("no head in the tier before close")
	}
	if err := q.Close(); err == nil {
		t.Fatal("close with live handles answered nil")
	}
	if st := q.Stats(); st.TierBytes != 0 || len(q.tier.hm.slabs) != 0 {
		t.Fatalf("a closed pool's tier holds %d bytes in %d slabs", st.TierBytes, len(q.tier.hm.slabs))
	}
}

// TestTierFaults: a copy to the tier that fails drops nothing and leaks
// nothing (the state stays in device memory, the tier is as it was); a
// copy back that fails answers the error and keeps the state in the tier.
func TestTierFaults(t *testing.T) {
	fb := statetest.NewFaults(device.Host())
	p, err := NewPool(fb, PoolOptions{BlockBytes: 256, MaxBytes: 5 * 256, HostTier: 64 << 10})
	check(t, err)
	defer p.Close()
	opt := optionalHeads(t, p, 2)
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 1, 1)
	fb.ArmMethod("CopyDtoH", 0)
	check(t, m.Append(wideRow(2))) // opt[0]'s move fails: opt[1] moves instead
	if !fb.Disarm() {
		t.Fatal("no copy to the tier was made")
	}
	if opt[0].tier != nil || opt[0].r == nil || opt[1].tier == nil {
		t.Fatal("a failed move took the head, or the next victim was not moved")
	}
	if got := readWide(t, opt[0]); !bytes.Equal(got, wantRows(0)) {
		t.Fatal("a failed move changed the head's rows")
	}
	if st := p.Stats(); st.TierBytes != 512 || st.TierOut != 512 || st.EvictedBytes != 0 {
		t.Fatalf("tier %d, out %d, evicted %d; want 512, 512, 0", st.TierBytes, st.TierOut, st.EvictedBytes)
	}
	checkInv(t, p)
	// The copy back fails: the head answers the error and stays there.
	check(t, m.Release())
	v := opt[1].Version()
	fb.ArmMethod("CopyHtoD", 0)
	err = opt[1].Read(0, 2, [][]byte{make([]byte, 512)})
	if !errors.Is(err, statetest.ErrInjected) {
		t.Fatalf("a failed copy back answered %v, want the injected error", err)
	}
	fb.Disarm()
	if opt[1].tier == nil || opt[1].r != nil || p.Stats().TierBytes != 512 || p.Stats().TierIn != 0 {
		t.Fatal("a failed copy back left the tier")
	}
	checkInv(t, p)
	if got := readWide(t, opt[1]); !bytes.Equal(got, wantRows(1)) || opt[1].Version() != v {
		t.Fatal("rows brought back after a failed try differ")
	}
	checkInv(t, p)
	for _, h := range opt {
		check(t, h.Release())
	}
}

// TestPrefetch: Prefetch brings a head back from the tier; on a head in
// device memory it answers nil, on a released or nil head ErrReleased.
func TestPrefetch(t *testing.T) {
	p := tierPool(t, 6, 64<<10)
	opt := optionalHeads(t, p, 2)
	check(t, opt[1].Prefetch())
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 3, 1) // opt[0] to the tier
	if opt[0].tier == nil {
		t.Fatal("no head in the tier")
	}
	check(t, m.Release())
	check(t, opt[0].Prefetch())
	if opt[0].tier != nil || p.Stats().TierIn != 512 {
		t.Fatal("Prefetch did not bring the head back")
	}
	check(t, opt[0].Release())
	if err := opt[0].Prefetch(); !errors.Is(err, ErrReleased) {
		t.Fatalf("Prefetch on a released head: %v", err)
	}
	var nilHead *Head
	if err := nilHead.Prefetch(); !errors.Is(err, ErrReleased) {
		t.Fatalf("Prefetch on a nil head: %v", err)
	}
}

// TestTierLeavesKernelRows: a head whose last call handed out rows for a
// kernel to write is not copied to the tier (the copy would keep what the
// rows held before the kernel ran): it is dropped as without a tier.
func TestTierLeavesKernelRows(t *testing.T) {
	p := tierPool(t, 4, 64<<10)
	h := headOf(t, p, wide("Cache", Optional), "a")
	must[[][]device.Span](t)(h.AppendDevice(2))
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 3, 1)
	if st := p.Stats(); st.TierOut != 0 || st.EvictedBytes != 512 {
		t.Fatalf("tier out %d, evicted %d; want 0, 512", st.TierOut, st.EvictedBytes)
	}
	if err := h.Read(0, 1, [][]byte{make([]byte, 256)}); !errors.Is(err, ErrEvicted) {
		t.Fatalf("a head with kernel rows: %v, want ErrEvicted", err)
	}
}

// TestTierAfterRecordedWork: a head whose blocks a recorded stream's work
// writes moves to the tier only after that work: the rows brought back
// are the kernel's.
func TestTierAfterRecordedWork(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256, MaxBytes: 4 * 256, HostTier: 64 << 10})
		check(t, err)
		t.Cleanup(func() { p.Close() })
		h := headOf(t, p, wide("Cache", Optional), "a")
		fill(t, h, 2, 40)
		st, err := r.Streams().NewStream()
		check(t, err)
		defer st.Close()
		spans := must[[][]device.Span](t)(h.Spans(0, 1))
		r.Hold(t, st)
		check(t, r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, spans[0][0].Ptr, uint32(0x5A), uint64(256)))
		check(t, h.RecordStream(st))
		go func() {
			time.Sleep(20 * time.Millisecond)
			r.Release()
		}()
		m := headOf(t, p, wide("Session", Mandatory), "m")
		fill(t, m, 3, 1) // waits for the held work, then moves h
		if h.tier == nil || p.Stats().TierOut != 512 {
			t.Fatal("the head was not moved to the tier once its stream's work was done")
		}
		check(t, m.Release())
		if got := readWide(t, h); !bytes.Equal(got, append(bytes.Repeat([]byte{0x5A}, 256), wideRow(41)[0]...)) {
			t.Fatal("the rows brought back are not those the kernel wrote")
		}
		checkInv(t, p)
	})
}

// TestTierBlockTable: a head's block table stands for the blocks the move
// to the tier frees; Column brings the head back and answers the entries
// of the blocks it came back to, which hold its rows.
func TestTierBlockTable(t *testing.T) {
	p := tierPool(t, 6, 64<<10)
	h := headOf(t, p, wide("Cache", Optional), "a")
	fill(t, h, 2, 40)
	tb := must[*BlockTable](t)(h.BlockTable())
	defer tb.Release()
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 5, 1) // the head (2 blocks) goes to the tier
	if h.tier == nil {
		t.Fatal("the head is not in the tier")
	}
	check(t, m.Release())
	tc := must[TableColumn](t)(tb.Column(0))
	if h.tier != nil || p.Stats().TierIn != 512 {
		t.Fatal("Column did not bring the head back")
	}
	entries := make([]byte, 16)
	check(t, p.b.CopyDtoH(entries, tc.Ptr))
	for i := range 2 {
		ptr := device.Ptr(binary.LittleEndian.Uint64(entries[8*i:]))
		row := make([]byte, 256)
		check(t, p.b.CopyDtoH(row, ptr))
		if !bytes.Equal(row, wideRow(byte(40 + i))[0]) {
			t.Fatalf("entry %d of the table after the return points at other rows", i)
		}
	}
	checkInv(t, p)
}

// TestTierConcurrent runs sessions on optional heads and groups at once in
// a pool far smaller than their rows, with a tier that holds about half
// of what spills: states move out, come back and are dropped under every
// call, and each session's rows stay its own. Run it with -race.
func TestTierConcurrent(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 24 * 256, HostTier: 16 * 256})
	kvL := kv(Append, 1024, Invalidate)
	kvL.Retention = Optional
	recL := rec(Invalidate)
	recL.Retention = Optional
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			owner := Owner(fmt.Sprint("w", w))
			var h *Head
			var g *Group
			var want []byte
			var snap *Snap
			var snapWant []byte
			defer func() {
				h.Release()
				g.Release()
				snap.Release()
			}()
			for i := range 300 {
				if h == nil {
					var err error
					if h, err = p.NewHead(wide("Cache", Optional), owner); err != nil {
						errs <- err
						return
					}
					want = nil
				}
				switch rng.IntN(6) {
				case 0, 1:
					row := wideRow(byte(w*40 + i))
					if err := h.Append(row); errors.Is(err, ErrEvicted) {
						h.Release()
						h = nil
					} else if err == nil {
						want = append(want, row[0]...)
					} else if !errors.Is(err, ErrNoMemory) {
						errs <- err
						return
					}
				case 2:
					dst := make([]byte, len(want))
					err := h.Read(0, len(want)/256, [][]byte{dst})
					switch {
					case errors.Is(err, ErrEvicted):
						h.Release()
						h = nil
					case err == nil && !bytes.Equal(dst, want):
						errs <- fmt.Errorf("worker %d: rows read back differ", w)
						return
					case err != nil && !errors.Is(err, ErrNoMemory):
						errs <- err
						return
					}
				case 3:
					if err := h.Prefetch(); err != nil && !errors.Is(err, ErrEvicted) && !errors.Is(err, ErrNoMemory) {
						errs <- err
						return
					}
				case 4:
					if snap != nil {
						dst := make([]byte, len(snapWant))
						err := snap.Read(0, len(snapWant)/256, [][]byte{dst})
						if err == nil && !bytes.Equal(dst, snapWant) {
							errs <- fmt.Errorf("worker %d: a snapshot's rows differ", w)
							return
						}
						snap.Release()
						snap = nil
					} else if s, err := h.Snapshot(); err == nil {
						snap, snapWant = s, slices.Clone(want)
					}
				case 5:
					if g == nil {
						var err error
						if g, err = NewGroup(p, owner, kvL, recL); err != nil {
							continue
						}
					}
					if err := g.Head(0).Append(kvRows(4, byte(i))); errors.Is(err, ErrEvicted) {
						g.Release()
						g = nil
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkInv(t, p)
	st := p.Stats()
	t.Logf("tier: out %d, in %d, dropped %d; evicted %d", st.TierOut, st.TierIn, st.TierDropped, st.EvictedBytes)
	if st.TierOut == 0 || st.TierIn == 0 {
		t.Fatal("nothing moved through the tier")
	}
	if st.TierBytes != 0 {
		t.Fatalf("%d bytes left in the tier after every handle was released", st.TierBytes)
	}
}

// TestTierCachedPrefix: cached prefix blocks no head holds move to the
// tier where the pool would drop them, keeping their owner; an
// AdoptPrefix of their chain brings them back, cached again, with the
// same rows; ForgetPrefixes drops a domain's blocks from the tier too.
func TestTierCachedPrefix(t *testing.T) {
	l := prompt(4, 64)
	// Blocks of 4 rows: 128 bytes of KV and 16 of Token, both 256 after
	// alignment. 12 blocks of 256 bytes in all.
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 12 * 256, HostTier: 64 << 10})
	toks := tokens(5, 16)
	a, _ := session(t, p, l, "a", "d", toks) // 4 blocks per column: 8 blocks
	check(t, a.Release())
	m := headOf(t, p, l, "m")
	check(t, m.Append(promptRows(tokens(6, 12), 0, 12))) // 6 blocks: 4 free, the chain's last entry (2 blocks) moves
	st := p.Stats()
	if st.EvictedBytes != 0 || st.TierBytes != 2*256 || st.TierOut != 2*256 || st.CachedBytes != 6*256 {
		t.Fatalf("evicted %d, tier %d, out %d, cached %d; want 0, 512, 512, 1536", st.EvictedBytes, st.TierBytes, st.TierOut, st.CachedBytes)
	}
	checkInv(t, p)
	check(t, m.Release())
	b := must[*Head](t)(p.NewSharedHead(l, "b", "d"))
	defer b.Release()
	if n := must[int](t)(b.AdoptPrefix(keyBytes(toks))); n != 16 {
		t.Fatalf("adopted %d rows, want all 16: the tier's blocks are the chain's end", n)
	}
	samePrompt(t, "what the tier brought back", readPrompt(t, b), promptRows(toks, 0, 16))
	for c := range 2 {
		if o := b.r.cols[c].get(3).Owner(); o != "a" {
			t.Fatalf("a block brought back for b is of owner %q, want a's, who wrote it", o)
		}
	}
	if st := p.Stats(); st.TierIn != 2*256 || st.TierBytes != 0 || st.AdoptedRows != 16 {
		t.Fatalf("tier in %d, tier %d, adopted rows %d; want 512, 0, 16", st.TierIn, st.TierBytes, st.AdoptedRows)
	}
	checkInv(t, p)
	// Cached again: a third session adopts them from device memory.
	check(t, b.Release())
	c := must[*Head](t)(p.NewSharedHead(l, "c", "d"))
	defer c.Release()
	if n := must[int](t)(c.AdoptPrefix(keyBytes(toks))); n != 16 {
		t.Fatalf("adopted %d rows after the return, want 16", n)
	}
	check(t, c.Release())
	// Pushed out again, then forgotten with the domain.
	m2 := headOf(t, p, l, "m")
	check(t, m2.Append(promptRows(tokens(6, 12), 0, 12)))
	if p.Stats().TierBytes == 0 {
		t.Fatal("nothing moved to the tier the second time")
	}
	p.ForgetPrefixes("d")
	if st := p.Stats(); st.TierBytes != 0 || st.CachedBytes != 0 {
		t.Fatalf("after ForgetPrefixes: tier %d, cached %d; want 0, 0", st.TierBytes, st.CachedBytes)
	}
	checkInv(t, p)
}

// TestTierFragmented: a state whose host blocks do not follow one another
// in a fragmented tier (every other block is another owner's) comes back
// whole.
func TestTierFragmented(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 1024, HostTier: 8 << 10})
	h := headOf(t, p, &Layout{Type: "Cache", Columns: []Column{{Name: "Row", ElemSize: 8, Width: 64}}, Retention: Optional}, "a")
	want := make([]byte, 8*512)
	for i := range want {
		want[i] = byte(i * 13)
	}
	check(t, h.Append([][]byte{want})) // 8 rows of 512 bytes: 4 blocks of 1 KiB
	held, err := p.tier.mem.Alloc(nil, p.tier.mem.Class(1024), "x", 8, false)
	check(t, err)
	var kept []*block
	for i, b := range held {
		if i%2 == 0 {
			p.tier.give([]*block{b})
		} else {
			kept = append(kept, b)
		}
	}
	if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
		t.Fatalf("move out: %v, %v", moved, err)
	}
	for i := 1; i < len(h.tier.blks); i++ {
		if h.tier.blks[i].Follows(h.tier.blks[i-1]) {
			t.Fatal("the image's host blocks follow one another: the test made no fragments")
		}
	}
	got := make([]byte, len(want))
	check(t, h.Read(0, 8, [][]byte{got}))
	if !bytes.Equal(got, want) {
		t.Fatal("rows brought back from a fragmented tier differ")
	}
	p.tier.give(kept)
	checkInv(t, p)
}

// TestTierCallsBringBack: the calls that use a head's rows bring it back
// from the tier first: Spans, RecordStream, Snapshot, Branch.
func TestTierCallsBringBack(t *testing.T) {
	calls := map[string]func(t *testing.T, h *Head){
		"Spans": func(t *testing.T, h *Head) { must[[][]device.Span](t)(h.Spans(0, 2)) },
		"RecordStream": func(t *testing.T, h *Head) {
			st := must[device.Stream](t)(h.pool.b.(device.Streams).NewStream())
			defer st.Close()
			check(t, h.RecordStream(st))
		},
		"Snapshot": func(t *testing.T, h *Head) { check(t, must[*Snap](t)(h.Snapshot()).Release()) },
		"Branch":   func(t *testing.T, h *Head) { check(t, must[*Head](t)(h.Branch()).Release()) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			p := tierPool(t, 4, 64<<10)
			h := headOf(t, p, wide("Cache", Optional), "a")
			fill(t, h, 2, 40)
			m := headOf(t, p, wide("Session", Mandatory), "m")
			fill(t, m, 3, 1)
			if h.tier == nil {
				t.Fatal("the head is not in the tier")
			}
			check(t, m.Release())
			call(t, h)
			if st := p.Stats(); st.TierIn != 512 || st.TierBytes != 0 || h.tier != nil {
				t.Fatalf("after %s: tier in %d, tier %d; want the head back", name, st.TierIn, st.TierBytes)
			}
			if got := readWide(t, h); !bytes.Equal(got, catWide(wideRow(40), wideRow(41))) {
				t.Fatalf("after %s: rows differ", name)
			}
			checkInv(t, p)
		})
	}
}

// TestTierRollbackTarget: a rollback to a snapshot in the tier brings the
// snapshot back first, and the head takes its rows.
func TestTierRollbackTarget(t *testing.T) {
	p := tierPool(t, 5, 64<<10)
	l := &Layout{Type: "Cache", Columns: []Column{{Name: "Row", ElemSize: 8, Width: 32}}, Growth: Mutable, Bound: 2, Retention: Optional}
	h := headOf(t, p, l, "a")
	check(t, h.Write(0, [][]byte{catWide(wideRow(1), wideRow(2))}))
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	v := s.Version()
	check(t, h.Write(0, [][]byte{catWide(wideRow(7), wideRow(8))})) // copies both blocks: the snapshot holds its own
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 2, 50)
	if s.tier == nil || h.tier != nil {
		t.Fatalf("snapshot in the tier: %v, head: %v; want the snapshot only", s.tier != nil, h.tier != nil)
	}
	check(t, m.Release())
	check(t, h.Rollback(s))
	if got := readWide(t, h); !bytes.Equal(got, catWide(wideRow(1), wideRow(2))) || h.Version() != v {
		t.Fatal("the rollback to a snapshot brought back from the tier took other rows")
	}
	checkInv(t, p)
}

// TestTierMergeDivergedFirst: a merge with a head in the tier answers
// ErrDiverged before it brings the head back, as for an evicted head a
// rebuild would, so that a call that fails anyway takes no memory.
func TestTierMergeDivergedFirst(t *testing.T) {
	p := tierPool(t, 6, 64<<10)
	h := headOf(t, p, wide("Cache", Optional), "a")
	c := must[*Head](t)(h.Branch()) // of the empty head: the two share no block
	defer c.Release()
	fill(t, h, 2, 2) // h diverged from c's branch point
	fill(t, c, 1, 3)
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 4, 9) // the least recently used (h) goes to the tier
	if h.tier == nil {
		t.Fatal("the head is not in the tier")
	}
	in := p.Stats().TierIn
	if err := h.Merge(c); !errors.Is(err, ErrDiverged) {
		t.Fatalf("merge of diverged heads: %v, want ErrDiverged", err)
	}
	if p.Stats().TierIn != in || h.tier == nil {
		t.Fatal("a merge that fails anyway brought the head back")
	}
}

// reverseRank ranks the most recently used first: an Evictor of its own,
// which the tier must follow as the pool does.
type reverseRank struct{ seen [][]Victim }

func (r *reverseRank) Rank(vs []Victim) {
	r.seen = append(r.seen, slices.Clone(vs))
	slices.SortFunc(vs, func(a, b Victim) int { return int(b.LastUse) - int(a.LastUse) })
}

// TestTierUsesTheEvictor: when the tier is full, PoolOptions.Evictor ranks
// its states too, and the tier drops the one it ranks first.
func TestTierUsesTheEvictor(t *testing.T) {
	ev := &reverseRank{}
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 6 * 256, HostTier: 1024, Evictor: ev})
	opt := optionalHeads(t, p, 3) // 6 blocks: the pool is full
	m := headOf(t, p, wide("Session", Mandatory), "m")
	fill(t, m, 2, 1) // the most recently used, opt[2], goes to the tier
	fill(t, m, 2, 3) // then opt[1]: the tier is full
	if opt[2].tier == nil || opt[1].tier == nil {
		t.Fatal("the Evictor's first choices are not in the tier")
	}
	fill(t, m, 2, 5) // opt[0] moves; the tier drops the one the Evictor ranks first
	var tierRound []Victim
	for _, vs := range ev.seen {
		if len(vs) == 2 && (vs[0].Owner == "o1" || vs[0].Owner == "o2") { // the tier's two states
			tierRound = vs
		}
	}
	if tierRound == nil {
		t.Fatalf("the Evictor never ranked the tier's states: %v", ev.seen)
	}
	// opt[2] was used after opt[1] (fill order), so reverseRank puts it
	// first: the tier drops it, where least recently used first would
	// have dropped opt[1].
	if opt[2].tier != nil || opt[1].tier == nil || opt[0].tier == nil {
		t.Fatalf("the tier dropped other than the Evictor's first: o2 in tier %v, o1 %v, o0 %v", opt[2].tier != nil, opt[1].tier != nil, opt[0].tier != nil)
	}
	if err := opt[2].Read(0, 1, [][]byte{make([]byte, 256)}); !errors.Is(err, ErrEvicted) {
		t.Fatalf("the state the tier dropped: %v, want ErrEvicted", err)
	}
	if st := p.Stats(); st.TierDropped != 512 {
		t.Fatalf("tier dropped %d bytes, want one state's 512", st.TierDropped)
	}
	checkInv(t, p)
}

// emptyNodes counts the nodes of t under which no block of [t.lo, t.n)
// lies: nodes a tree keeps for nothing.
func emptyNodes(t *tree) int {
	var walk func(n *node, h, base int) (empty int, holds bool)
	walk = func(n *node, h, base int) (int, bool) {
		if h == 1 {
			for k, b := range n.blks {
				if i := base + k; b != nil && i >= t.lo && i < t.n {
					return 0, true
				}
			}
			return 1, false
		}
		empty, holds := 0, false
		for k, c := range n.kids {
			if c != nil {
				e, hb := walk(c, h-1, base+k*capacity(h-1))
				empty, holds = empty+e, holds || hb
			}
		}
		if !holds {
			empty++
		}
		return empty, holds
	}
	if t.root == nil {
		return 0
	}
	e, _ := walk(t.root, t.height, 0)
	return e
}

// TestTierBackBuildsNoEmptyNodes: a window whose floor is past block
// 1024 comes back from the host tier as a tree built from its floor up;
// it kept an empty node for each level it grew below its first block
// (found by a breaker helper), which no drop ever reached again.
func TestTierBackBuildsNoEmptyNodes(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 64 * 256, HostTier: 1 << 20})
	h := must[*Head](t)(p.NewHead(bwLayout(8, 1, Keep, Optional), "win"))
	defer h.Release()
	for i := 0; i < 1100; i += 8 {
		check(t, h.Append(bwVals(make([]uint32, 8))))
	}
	hog := must[*Head](t)(p.NewHead(&Layout{Type: "Hog", Columns: []Column{{Name: "X", ElemSize: 4, Width: 64}}, Growth: Append, Retention: Mandatory}, "hog"))
	for range 60 {
		check(t, hog.Append([][]byte{make([]byte, 256)}))
	}
	h.mu.Lock()
	out := h.tier != nil
	h.mu.Unlock()
	if !out {
		t.Fatal("setup: the window did not go to the host tier")
	}
	check(t, hog.Release())
	check(t, h.Read(h.Len()-1, h.Len(), [][]byte{make([]byte, 4)}))
	for range 200 { // on through the tree it came back as
		check(t, h.Append(bwVals(make([]uint32, 8))))
	}
	checkInv(t, p)
	h.mu.Lock()
	defer h.mu.Unlock()
	if tr := &h.r.cols[0]; emptyNodes(tr) > 0 {
		t.Fatalf("the tree (lo %d, n %d, height %d) keeps %d empty nodes", tr.lo, tr.n, tr.height, emptyNodes(tr))
	}
}
