package blocks

import (
	"bytes"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gpustate/gpustate/runtime/device"
)

var errNoMem = errors.New("no memory")

func newAlloc(t *testing.T, maxBytes int64) (*Allocator, device.Backend) {
	t.Helper()
	b := device.Host()
	a := New(b, Options{MaxBytes: maxBytes, NoMemory: errNoMem})
	t.Cleanup(func() {
		if err := a.Close("test"); err != nil {
			t.Error(err)
		}
	})
	return a, b
}

func check(t *testing.T, a *Allocator, inUse ...*Block) {
	t.Helper()
	refs := map[*Block]int{}
	for _, b := range inUse {
		refs[b] = int(b.Refs())
	}
	if err := a.Check(refs); err != nil {
		t.Fatal(err)
	}
}

// Blocks an owner gave back reach another owner zeroed, and come back to
// the same owner as they were.
func TestOwnersAndZeroing(t *testing.T) {
	a, be := newAlloc(t, 0)
	c := a.Class(256)
	blks, err := a.Alloc(nil, c, "x", 4, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blks {
		if err := be.CopyHtoD(b.Ptr(), bytes.Repeat([]byte{0xAB}, 256)); err != nil {
			t.Fatal(err)
		}
	}
	check(t, a, blks...)
	for _, b := range blks {
		if !b.Release() {
			t.Fatal("a block held once was not freed by its release")
		}
	}
	a.Free(blks)
	check(t, a)
	// Every clean block taken, y gets x's blocks, zeroed.
	clean := len(a.Clean(c))
	fill, err := a.Alloc(nil, c, "fill", clean, false)
	if err != nil {
		t.Fatal(err)
	}
	y, err := a.Alloc(nil, c, "y", 4, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range y {
		got := make([]byte, 256)
		if err := be.CopyDtoH(got, b.Ptr()); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, make([]byte, 256)) {
			t.Fatalf("y got a block holding %#x...", got[:4])
		}
	}
	check(t, a, append(fill, y...)...)
}

// Owners that take turns at the same blocks (every clean one taken, the
// pool growing no more) get each other's zeroed, one zeroing a run of
// neighbours, and taking them allocates nothing: sessions that outnumber
// the free blocks' owners swap blocks this way on every step.
func TestOwnersSwapBlocksWithoutAllocating(t *testing.T) {
	be := &memsets{Backend: device.Host()}
	a := New(be, Options{NoMemory: errNoMem})
	t.Cleanup(func() {
		if err := a.Close("test"); err != nil {
			t.Error(err)
		}
	})
	c := a.Class(256)
	const n = 4
	blks, err := a.Alloc(nil, c, "x", n, false)
	if err != nil {
		t.Fatal(err)
	}
	fill, err := a.Alloc(nil, c, "fill", len(a.Clean(c)), false)
	if err != nil {
		t.Fatal(err)
	}
	give := func(list []*Block) {
		for _, b := range list {
			if !b.Release() {
				t.Fatal("a block held once was not freed by its release")
			}
		}
		a.Free(list)
	}
	give(blks)
	owners := [2]string{"y", "x"}
	mark := bytes.Repeat([]byte{0xAB}, 256)
	got := make([]byte, 256)
	turn := 0
	calls0, bytes0 := be.calls.Load(), be.bytes.Load() // the slab's zeroing
	allocs := testing.AllocsPerRun(50, func() {
		owner := owners[turn%2]
		turn++
		blks, err = a.Alloc(blks, c, owner, n, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blks {
			if err := be.CopyDtoH(got, b.Ptr()); err != nil {
				t.Fatal(err)
			}
			if got[0] != 0 || got[255] != 0 {
				t.Fatalf("%s got the other owner's block unzeroed: %#x", owner, got[0])
			}
			if err := be.CopyHtoD(b.Ptr(), mark); err != nil {
				t.Fatal(err)
			}
		}
		give(blks)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a turn, want none", allocs)
	}
	calls, zeroed := be.calls.Load()-calls0, be.bytes.Load()-bytes0
	if turns := int64(turn); calls != turns || zeroed != turns*n*256 {
		t.Fatalf("%d zeroing calls of %d bytes in %d turns, want one of %d bytes a turn (the blocks neighbour)",
			calls, zeroed, turns, n*256)
	}
	check(t, a, fill...)
}

// memsets is a backend that counts its Memset calls and their bytes.
type memsets struct {
	device.Backend
	calls, bytes atomic.Int64
}

func (m *memsets) Memset(dst device.Ptr, value byte, n int) error {
	m.calls.Add(1)
	m.bytes.Add(int64(n))
	return m.Backend.Memset(dst, value, n)
}

// A block freed alone is kept hot for its owner, and only for it.
func TestHotBlock(t *testing.T) {
	a, _ := newAlloc(t, 0)
	c := a.Class(512)
	blks, err := a.Alloc(nil, c, "x", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	b := blks[0]
	b.SetRefs(0)
	a.Free(blks)
	if got := a.TakeHot(c, "y"); got != nil {
		t.Fatal("another owner took the hot block")
	}
	check(t, a)
	if got := a.TakeHot(c, "x"); got != b || got.Refs() != 1 {
		t.Fatalf("the owner got %p (count %d) back, want %p", got, got.Refs(), b)
	}
	check(t, a, b)
}

// Blocks freed behind a fence are pending until it returns, then free;
// an allocation short of room waits for them (AwaitRoom).
func TestFence(t *testing.T) {
	a, _ := newAlloc(t, 256*SlabBlocks)
	c := a.Class(256)
	all, err := a.Alloc(nil, c, "x", SlabBlocks, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(nil, c, "y", 1, false); !errors.Is(err, errNoMem) {
		t.Fatalf("allocation past the cap: %v, want the NoMemory error", err)
	}
	gate := make(chan struct{})
	a.FreeAfter(all[:8], func() { <-gate })
	if st := a.Stats(); st.Pending != 8*256 || st.Free != 0 {
		t.Fatalf("stats %+v, want 2048 bytes pending and nothing free", st)
	}
	if a.AwaitRoom(c, 9, false, time.Second, func(int64) int64 { return 0 }) {
		t.Fatal("AwaitRoom found room that pending blocks cannot make")
	}
	time.AfterFunc(10*time.Millisecond, func() { close(gate) })
	if !a.AwaitRoom(c, 8, false, 10*time.Second, func(int64) int64 { return 0 }) {
		t.Fatal("AwaitRoom did not wait for the pending blocks")
	}
	a.WaitPending()
	check(t, a, all[8:]...)
	if st := a.Stats(); st.Pending != 0 || st.Free != 8 {
		t.Fatalf("stats %+v after the fence, want 8 blocks free", st)
	}
}

// Trim gives wholly free slabs back, and classes share the slabs' room.
func TestTrimAndClasses(t *testing.T) {
	a, _ := newAlloc(t, 256*SlabBlocks)
	small, large := a.Class(256), a.Class(1024)
	s, err := a.Alloc(nil, small, "x", SlabBlocks/2, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range s {
		b.SetRefs(0)
	}
	a.Free(s)
	// The small class's free blocks go back to the extents for the large.
	// A growth that makes part of the room answers NoMemory, and the
	// caller (the store's reclaim) tries again while Shortfall says the
	// room is there.
	l, err := a.Alloc(nil, large, "x", SlabBlocks/4, false)
	if errors.Is(err, errNoMem) && a.Shortfall(large, SlabBlocks/4, false) <= 0 {
		l, err = a.Alloc(nil, large, "x", SlabBlocks/4, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	check(t, a, l...)
	for _, b := range l {
		b.SetRefs(0)
	}
	a.Free(l)
	n, err := a.Trim("test")
	if err != nil || n == 0 {
		t.Fatalf("Trim gave back %d bytes: %v", n, err)
	}
	if st := a.Stats(); st.Reserved != 0 || st.Slabs != 0 {
		t.Fatalf("stats %+v after Trim, want nothing reserved", st)
	}
	check(t, a)
}

// Shortfall counts the free blocks of other classes as room only where
// they make a run of the class's size: a block of 256 and one of 768 bytes
// in two slabs, each beside a block in use, make no room for one of 1024,
// and two neighbouring free blocks of 512 do. Alloc agrees each time.
func TestShortfallCountsRuns(t *testing.T) {
	a, _ := newAlloc(t, 4096)
	take := func(size, n int) []*Block {
		t.Helper()
		blks, err := a.Alloc(nil, a.Class(size), "x", n, false)
		if err != nil {
			t.Fatal(err)
		}
		return blks
	}
	free := func(blks ...*Block) {
		t.Helper()
		for _, b := range blks {
			if !b.Release() {
				t.Fatal("a block held once was not freed by its release")
			}
		}
		a.Free(blks)
	}
	// Slabs of 512, 1536 and 2048 bytes: the cap, reached.
	small, mid, half := take(256, 2), take(768, 2), take(512, 4)
	if st := a.Stats(); st.Reserved != 4096 || st.Slabs != 3 {
		t.Fatalf("stats %+v, want 4096 bytes reserved in 3 slabs", st)
	}
	free(small[1], mid[0])
	large := a.Class(1024)
	if short := a.Shortfall(large, 1, false); short != 1024 {
		t.Fatalf("shortfall %d with 1024 bytes free in runs of 256 and 768, want 1024", short)
	}
	if _, err := a.Alloc(nil, large, "y", 1, false); !errors.Is(err, errNoMem) {
		t.Fatalf("Alloc of 1024 bytes with no run of them: %v, want no memory", err)
	}
	free(half[0], half[1])
	if short := a.Shortfall(large, 1, false); short > 0 {
		t.Fatalf("shortfall %d with two neighbouring free blocks of 512, want none", short)
	}
	l := take(1024, 1)
	check(t, a, append([]*Block{small[0], mid[1], half[2], half[3]}, l...)...)
}

// A wholly free slab too small for a block of the class counts as room
// under the cap: the allocation gives it back for a new slab.
func TestShortfallCountsSlabsGivenBack(t *testing.T) {
	a, _ := newAlloc(t, 2048)
	var held []*Block
	for _, size := range []int{256, 768, 512, 512} {
		blks, err := a.Alloc(nil, a.Class(size), "x", 1, false)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, blks...)
	}
	if st := a.Stats(); st.Reserved != 2048 || st.Slabs != 4 {
		t.Fatalf("stats %+v, want 2048 bytes reserved in a slab a block", st)
	}
	for _, b := range held[:2] {
		b.Release()
	}
	a.Free(held[:2])
	large := a.Class(1024)
	if short := a.Shortfall(large, 1, false); short > 0 {
		t.Fatalf("shortfall %d with two wholly free slabs of 1024 bytes in all, want none", short)
	}
	l, err := a.Alloc(nil, large, "y", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	check(t, a, append(held[2:], l...)...)
}

// A block's hook is told when its references drop to one, and only then;
// the last release reports the block free without a call.
func TestReleaseHook(t *testing.T) {
	a, _ := newAlloc(t, 0)
	blks, err := a.Alloc(nil, a.Class(256), "x", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	b := blks[0]
	var told []int32
	h := Hook(func(b *Block) { told = append(told, b.Refs()) })
	b.Retain()
	b.Retain() // three references
	b.SetHook(&h)
	if !b.HasHook(&h) {
		t.Fatal("the hook set is not the block's")
	}
	if b.Release() || len(told) != 0 {
		t.Fatalf("two references left: freed or told %v", told)
	}
	if b.Release() || len(told) != 1 || told[0] != 1 {
		t.Fatalf("one reference left: told %v, want [1]", told)
	}
	if !b.Release() || len(told) != 1 {
		t.Fatalf("the last release: not free, or told %v", told)
	}
	b.SetHook(nil)
	a.Free(blks)
	check(t, a)
}

// TestAllocRuns: blocks given back in another order than the slab's
// (every other one then the rest, as two columns' blocks come back; or
// shuffled) come back from one allocation in address order, so that a run
// of neighbours in the slab is one run in the list: small allocations,
// large ones of a few ascending stretches (merged), and shuffled ones.
func TestAllocRuns(t *testing.T) {
	for _, n := range []int{16, 64} {
		for _, shuffle := range []bool{false, true} {
			a, _ := newAlloc(t, 0)
			c := a.Class(256)
			blks, err := a.Alloc(nil, c, "x", n, false)
			if err != nil {
				t.Fatal(err)
			}
			var back []*Block
			for i, b := range blks {
				b.Release()
				if i%2 == 0 {
					back = append(back, b)
				}
			}
			for i, b := range blks {
				if i%2 == 1 {
					back = append(back, b)
				}
			}
			if shuffle {
				for i := range back {
					j := (i*7919 + 13) % len(back)
					back[i], back[j] = back[j], back[i]
				}
			}
			a.Free(back)
			got, err := a.Alloc(nil, c, "x", n, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(got); i++ {
				if !got[i].Follows(got[i-1]) {
					t.Fatalf("%d blocks (shuffled %v): block %d of a reused run does not follow block %d: %#x after %#x",
						n, shuffle, i, i-1, got[i].Ptr(), got[i-1].Ptr())
				}
			}
			check(t, a, got...)
			for _, b := range got {
				b.Release()
			}
			a.Free(got)
		}
	}
}

// An owner that looks in the hot slot while another owner's allocations
// drain it and take the block back (writing its owner) has no data race
// with them: TakeHot takes the block out of the slot before it reads its
// owner (go test -race).
func TestHotSlotContended(t *testing.T) {
	a, _ := newAlloc(t, 0)
	c := a.Class(256)
	stop := make(chan struct{})
	looked := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				looked <- n
				return
			default:
			}
			if b := a.TakeHot(c, "y"); b != nil {
				t.Error("y took x's block from the hot slot")
			}
			n++
		}
	}()
	for range 5000 {
		blks, err := a.Alloc(nil, c, "x", 1, false) // drains the slot
		if err != nil {
			t.Fatal(err)
		}
		if blks[0].Owner() != "x" {
			t.Fatalf("x got a block of %q", blks[0].Owner())
		}
		blks[0].SetRefs(0)
		a.Free(blks) // into the slot
	}
	close(stop)
	<-looked
	check(t, a)
}

// TestBlockIsOneCacheLine keeps a Block at 64 bytes: a release walks
// thousands of them, one line each.
func TestBlockIsOneCacheLine(t *testing.T) {
	if n := unsafe.Sizeof(Block{}); n != 64 {
		t.Errorf("a Block is %d bytes, want 64", n)
	}
}

// A class's growths are timed by the allocator's clock, and FreeCounts
// reports the median of the last growthsKept once there are
// growthsTrusted: none before, and an old growth drops out of the median
// as new ones come.
func TestGrowthTimes(t *testing.T) {
	var clock time.Duration
	be := &costlyAlloc{Backend: device.Host(), clock: &clock}
	a := New(be, Options{NoMemory: errNoMem, Now: func() time.Time { return time.Unix(0, int64(clock)) }})
	defer a.Close("test")
	c := a.Class(256)
	grow := func(cost time.Duration) {
		t.Helper()
		be.cost = cost
		if _, err := a.Alloc(nil, c, "x", SlabBlocks, false); err != nil {
			t.Fatal(err)
		}
	}
	want := func(d time.Duration) {
		t.Helper()
		if f := a.FreeCounts(c); f.GrowTime != d {
			t.Fatalf("GrowTime %v, want %v", f.GrowTime, d)
		}
	}
	grow(5 * time.Millisecond)
	grow(time.Millisecond)
	want(0) // two growths: not yet
	grow(9 * time.Millisecond)
	want(5 * time.Millisecond)
	for range growthsKept {
		grow(time.Millisecond)
	}
	want(time.Millisecond)
	for range growthsKept/2 + 1 {
		grow(7 * time.Millisecond) // a new regime, the majority of the last
	}
	want(7 * time.Millisecond)
	if got := a.FreeCounts(a.Class(512)); got.GrowTime != 0 {
		t.Fatalf("a class that never grew: GrowTime %v", got.GrowTime)
	}
}

// costlyAlloc is a backend whose Alloc advances a clock by cost: the
// device of TestGrowthTimes alone, so it stays here.
type costlyAlloc struct {
	device.Backend
	clock *time.Duration
	cost  time.Duration
}

func (b *costlyAlloc) Alloc(n int) (device.Ptr, error) {
	*b.clock += b.cost
	return b.Backend.Alloc(n)
}

// A class's own free blocks, carved where other classes' blocks were, can
// split a slab's free bytes into runs too short for a block: an
// allocation that finds no other room gives every free block back to its
// slab, and so reaches every byte no block holds (here the two blocks of
// a slab that holds nothing).
func TestAllocReachesRoomItsOwnBlocksSplit(t *testing.T) {
	a, _ := newAlloc(t, 8<<10)
	small, large := a.Class(64), a.Class(1024)
	free := func(list []*Block) {
		for _, b := range list {
			b.SetRefs(0)
		}
		a.Free(list)
	}
	smalls := must(a.Alloc(nil, small, "x", 32, false)) // a slab of 2 KiB
	larges := must(a.Alloc(nil, large, "y", 6, false))  // the cap's other 6 KiB
	free(smalls[8:])
	one := must(a.Alloc(nil, large, "y", 1, false)) // carved at 512, from the small blocks taken back
	free(one)
	free(smalls[:8])
	check(t, a, larges...)
	two, err := a.Alloc(nil, large, "y", 2, false)
	if err != nil {
		t.Fatalf("two blocks of a slab that holds nothing: %v (shortfall %d)", err, a.Shortfall(large, 2, false))
	}
	check(t, a, append(larges, two...)...)
	if sh := a.Shortfall(large, 1, false); sh <= 0 {
		t.Fatalf("shortfall %d for a block in a full pool", sh)
	}
	free(two)
	if sh := a.Shortfall(large, 2, false); sh > 0 {
		t.Fatalf("shortfall %d for the two blocks just freed", sh)
	}
	free(larges)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A Filled allocation hands blocks out with the fills their last holder
// set, where a Dirty one makes them unknown; a clean block it takes is
// no longer marked zeroed.
func TestAllocFilledKeepsFills(t *testing.T) {
	a, _ := newAlloc(t, 0)
	c := a.Class(256)
	blks, err := a.Alloc(nil, c, "x", 4, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range blks {
		b.SetFill(64 * i)
		b.Release()
	}
	a.Free(blks)
	got, err := a.AllocHand(nil, c, "x", 4, Filled)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range got {
		i := slices.Index(blks, b)
		if i < 0 {
			t.Fatal("x did not get its own blocks back")
		}
		if !b.ClaimFill(64*i, 64*i) {
			t.Errorf("block %d lost its fill of %d bytes", i, 64*i)
		}
		b.Release()
	}
	a.Free(got)
	got, err = a.AllocHand(nil, c, "x", 4, Dirty)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range got {
		if i := slices.Index(blks, b); b.ClaimFill(64*i, 64*i) {
			t.Errorf("block %d kept its fill through a Dirty allocation", i)
		}
	}
	clean, err := a.AllocHand(nil, c, "y", len(a.Clean(c)), Filled)
	if err != nil {
		t.Fatal(err)
	}
	check(t, a, append(got, clean...)...) // none marked zeroed
}

// ReturnFill moves a fill back down only from the exact fill its caller
// names, never up, never from an unknown fill; an append from the
// returned fill may then claim the bytes again.
func TestReturnFill(t *testing.T) {
	a, _ := newAlloc(t, 0)
	blks, err := a.Alloc(nil, a.Class(256), "x", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	b := blks[0]
	if b.ReturnFill(128, 64) {
		t.Error("an unknown fill came down")
	}
	b.SetFill(128)
	for _, tt := range []struct{ from, to int }{{64, 32}, {128, 128}, {128, 200}, {128, -1}} {
		if b.ReturnFill(tt.from, tt.to) {
			t.Errorf("ReturnFill(%d, %d) of a fill of 128 moved it", tt.from, tt.to)
		}
	}
	if !b.ReturnFill(128, 64) {
		t.Fatal("ReturnFill(128, 64) of a fill of 128 did nothing")
	}
	if b.ClaimFill(128, 160) || !b.ClaimFill(64, 96) {
		t.Error("after ReturnFill(128, 64) the fill is not 64")
	}
	b.Release()
	a.Free(blks)
}

// TestBlockHost: the blocks of a slab the host backend gave are host
// memory, the block's own bytes from the offset asked; a backend that is
// not the host backend's gives none, and its blocks take its copies.
func TestBlockHost(t *testing.T) {
	a, b := newAlloc(t, 0)
	c := a.Class(256)
	blks, err := a.Alloc(nil, c, "me", 2, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, blk := range blks {
		mem := blk.Host(16, 32)
		if len(mem) != 32 || cap(mem) != 32 {
			t.Fatalf("block %d: Host(16, 32) has %d bytes, capacity %d", i, len(mem), cap(mem))
		}
		mem[0] = byte(i + 1)
		got := make([]byte, 1)
		if err := b.CopyDtoH(got, blk.Ptr()+16); err != nil || got[0] != byte(i+1) {
			t.Errorf("block %d: a write through Host reads back as %d (%v)", i, got[0], err)
		}
	}
	a.Free(blks)

	hb := device.Host()
	defer hb.Close()
	o := New(wrapped{hb}, Options{NoMemory: errNoMem})
	defer o.Close("test")
	oblks, err := o.Alloc(nil, o.Class(256), "me", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if oblks[0].Host(0, 8) != nil {
		t.Error("a block of a backend that is not the host backend's answered host bytes")
	}
	o.Free(oblks)
}

type wrapped struct{ device.Backend }

// TestBlocksOwnTheirLines: every Block a slab's growth makes starts on a
// cache line (blockArray's layout), so that no two Blocks share one.
func TestBlocksOwnTheirLines(t *testing.T) {
	a := New(device.Host(), Options{})
	defer a.Close("test")
	for _, bb := range []int{256, 4096, 1 << 16} {
		bs, err := a.Alloc(nil, a.Class(bb), "o", 300, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if off := uintptr(unsafe.Pointer(b)) % 64; off != 0 {
				t.Fatalf("a block of %d bytes at %p, %d bytes into a cache line", bb, b, off)
			}
		}
		a.Free(bs)
	}
}
