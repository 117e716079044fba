package blocks

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// isoMemsetLog records every Memset's range, to check that none crosses
// a slab (a backend allocation) or covers bytes of a block not zeroed for
// the call.
type isoMemsetLog struct {
	device.Backend
	mu     sync.Mutex
	allocs map[device.Ptr]int
	sets   [][2]int64 // ptr, n
}

func (m *isoMemsetLog) Alloc(n int) (device.Ptr, error) {
	p, err := m.Backend.Alloc(n)
	if err == nil {
		m.mu.Lock()
		if m.allocs == nil {
			m.allocs = map[device.Ptr]int{}
		}
		m.allocs[p] = n
		m.mu.Unlock()
	}
	return p, err
}

func (m *isoMemsetLog) Memset(dst device.Ptr, v byte, n int) error {
	m.mu.Lock()
	m.sets = append(m.sets, [2]int64{int64(dst), int64(n)})
	m.mu.Unlock()
	return m.Backend.Memset(dst, v, n)
}

func (m *isoMemsetLog) reset() {
	m.mu.Lock()
	m.sets = nil
	m.mu.Unlock()
}

// inOneAlloc reports whether [p, p+n) lies inside one allocation.
func (m *isoMemsetLog) inOneAlloc(p, n int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for a, sz := range m.allocs {
		if p >= int64(a) && p+n <= int64(a)+int64(sz) {
			return true
		}
	}
	return false
}

func isoAlloc(t *testing.T, be device.Backend, maxBytes int64) *Allocator {
	t.Helper()
	a := New(be, Options{MaxBytes: maxBytes, NoMemory: errNoMem})
	t.Cleanup(func() {
		if err := a.Close("test"); err != nil {
			t.Error(err)
		}
	})
	return a
}

func isoWrite(t *testing.T, be device.Backend, list []*Block, v byte) {
	t.Helper()
	for _, b := range list {
		if err := be.CopyHtoD(b.Ptr(), bytes.Repeat([]byte{v}, b.Bytes())); err != nil {
			t.Fatal(err)
		}
	}
}

func isoRead(t testing.TB, be device.Backend, b *Block) []byte {
	got := make([]byte, b.Bytes())
	if err := be.CopyDtoH(got, b.Ptr()); err != nil {
		t.Fatal(err)
	}
	return got
}

func isoGive(t testing.TB, a *Allocator, list []*Block) {
	for _, b := range list {
		if !b.Release() {
			t.Fatal("a block held once was not freed by its release")
		}
	}
	a.Free(list)
}

// isoAllZero fails t when any block of list holds a non-zero byte.
func isoAllZero(t testing.TB, be device.Backend, what string, list []*Block) {
	for _, b := range list {
		got := isoRead(t, be, b)
		if i := bytes.IndexFunc(got, func(r rune) bool { return r != 0 }); i >= 0 {
			t.Fatalf("%s: block %#x (owner %q) holds %#x at byte %d", what, b.Ptr(), b.Owner(), got[i], i)
		}
	}
}

// Other owners' blocks that lie back to back across two slabs
// that are neighbours in memory (an arena hands allocations out back to
// back) are zeroed one Memset per slab: zero promises a call per run of
// neighbours (Block.Follows: same allocation), and the arena fails any
// memset that leaves its allocation.
func TestZeroRunStopsAtSlab(t *testing.T) {
	arena := statetest.NewArena(1 << 20)
	log := &isoMemsetLog{Backend: arena}
	// A cap of 64 blocks: each growth takes a slab of 8.
	a := isoAlloc(t, log, 64*256)
	c := a.Class(256)
	x, err := a.Alloc(nil, c, "x", 8, false)
	if err != nil {
		t.Fatal(err)
	}
	x2, err := a.Alloc(nil, c, "x", 8, false)
	if err != nil {
		t.Fatal(err)
	}
	x = append(x, x2...)
	if x2[0].Ptr() != x[7].Ptr()+256 {
		t.Fatalf("the slabs are not neighbours in memory")
	}
	if st := a.Stats(); st.Slabs < 2 {
		t.Fatalf("want x's blocks over two slabs, got %d", st.Slabs)
	}
	isoWrite(t, log, x, 0xAB)
	isoGive(t, a, x)
	log.reset()
	// y takes x's 16 blocks (other owners' come before a growth).
	y, err := a.Alloc(nil, c, "y", 16, false)
	if err != nil {
		t.Fatal(err)
	}
	isoAllZero(t, log, "y's blocks", y)
	for _, s := range log.sets {
		if !log.inOneAlloc(s[0], s[1]) {
			t.Fatalf("a memset of %d bytes at %#x leaves its slab", s[1], s[0])
		}
	}
	if len(log.sets) != 2 {
		t.Fatalf("%d memsets for two runs, want 2", len(log.sets))
	}
	check(t, a, y...)
}

// Other owners' blocks taken by one allocation lie in several
// runs; the memset of each run in turn fails. After each failure: the
// books check, the clean list is as it was (empty), every block on a dirty
// list belongs to that list's owner and the stats are those before; the
// next allocation of the same owner reads zeros only.
func TestZeroFaultInEachRun(t *testing.T) {
	for k := range 4 {
		t.Run(fmt.Sprint("memset ", k), func(t *testing.T) {
			fb := statetest.NewFaults(device.Host())
			a := isoAlloc(t, fb, 0)
			c := a.Class(256)
			// x holds 16 blocks; it gives back four runs of neighbours.
			x, err := a.Alloc(nil, c, "x", 16, false)
			if err != nil {
				t.Fatal(err)
			}
			isoWrite(t, fb, x, 0xAB)
			var give, keep []*Block
			for i, b := range x {
				if i%4 == 3 {
					keep = append(keep, b)
				} else {
					give = append(give, b)
				}
			}
			isoGive(t, a, give)
			// Every clean block taken: the next allocation must zero x's.
			fill, err := a.Alloc(nil, c, "fill", len(a.Clean(c)), false)
			if err != nil {
				t.Fatal(err)
			}
			inUse := append(append([]*Block(nil), keep...), fill...)
			check(t, a, inUse...)
			before := a.Stats()
			fb.Arm(statetest.OpMemset, k)
			_, err = a.Alloc(nil, c, "y", len(give), false)
			fired := fb.Disarm()
			if err == nil || !fired || !errors.Is(err, statetest.ErrInjected) {
				t.Fatalf("y's allocation: %v (fired %v), want the injected fault", err, fired)
			}
			if after := a.Stats(); after != before {
				t.Fatalf("a failed allocation changed the stats: %+v, was %+v", after, before)
			}
			check(t, a, inUse...)
			isoAllZero(t, fb, "a clean block after the failure", a.Clean(c))
			if got := len(a.Clean(c)); got != 0 {
				t.Fatalf("%d clean blocks after a failure at run %d, want none: the runs zeroed before it go back to x", got, k)
			}
			y, err := a.Alloc(nil, c, "y", len(give), false)
			if err != nil {
				t.Fatal(err)
			}
			isoAllZero(t, fb, "y's blocks", y)
			check(t, a, append(inUse, y...)...)
		})
	}
}

// An allocation takes the blocks of many owners, interleaved
// in memory (more than the wipe buffer's 8, more than the 16 byAddress
// sorts, more ascending stretches than it merges), with a memset fault at
// every run in turn; then every run without one.
func TestZeroManyOwnersInterleaved(t *testing.T) {
	const owners, per = 12, 3
	for k := -1; k < 20; k++ {
		t.Run(fmt.Sprint("fault ", k), func(t *testing.T) {
			fb := statetest.NewFaults(device.Host())
			a := isoAlloc(t, fb, 0)
			c := a.Class(256)
			blks, err := a.Alloc(nil, c, "base", owners*per*2, false)
			if err != nil {
				t.Fatal(err)
			}
			// Block i goes to owner i%owners, every other one held.
			var held []*Block
			byOwner := map[string][]*Block{}
			for i, b := range blks {
				if i%2 == 1 {
					held = append(held, b)
					continue
				}
				o := fmt.Sprint("o", (i/2)%owners)
				b.owner = o
				byOwner[o] = append(byOwner[o], b)
			}
			for o, list := range byOwner {
				isoWrite(t, fb, list, byte(0x10+len(o)))
				isoGive(t, a, list)
			}
			fill, err := a.Alloc(nil, c, "fill", len(a.Clean(c)), false)
			if err != nil {
				t.Fatal(err)
			}
			inUse := append(append([]*Block(nil), held...), fill...)
			before := a.Stats()
			if k >= 0 {
				fb.Arm(statetest.OpMemset, k)
			}
			y, err := a.Alloc(nil, c, "y", owners*per, false)
			fired := fb.Disarm()
			if k >= 0 && k < owners*per {
				if err == nil || !fired {
					t.Fatalf("want the fault at memset %d: %v", k, err)
				}
				if after := a.Stats(); after != before {
					t.Fatalf("stats changed: %+v, was %+v", after, before)
				}
				check(t, a, inUse...)
				isoAllZero(t, fb, "clean", a.Clean(c))
				y, err = a.Alloc(nil, c, "y", owners*per, false)
			}
			if err != nil {
				t.Fatal(err)
			}
			isoAllZero(t, fb, "y's blocks", y)
			check(t, a, append(inUse, y...)...)
		})
	}
}

// A block freed alone sits in the hot slot; another owner's
// one-block allocation (locked path: it drains the slot) must zero it,
// and TakeHot must refuse it.
func TestHotBlockOtherOwner(t *testing.T) {
	be := device.Host()
	a := isoAlloc(t, be, 0)
	c := a.Class(256)
	x, err := a.Alloc(nil, c, "x", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	fill, err := a.Alloc(nil, c, "fill", len(a.Clean(c)), false)
	if err != nil {
		t.Fatal(err)
	}
	isoWrite(t, be, x, 0xCD)
	isoGive(t, a, x) // hot
	if b := a.TakeHot(c, "y"); b != nil {
		t.Fatal("TakeHot gave y x's block")
	}
	for _, hand := range []Hand{Dirty, Filled, Zeroed} {
		y, err := a.AllocHand(nil, c, "y", 1, hand)
		if err != nil {
			t.Fatal(err)
		}
		isoAllZero(t, be, fmt.Sprint("y's block, hand ", hand), y)
		isoWrite(t, be, y, 0xCD)
		check(t, a, append(append([]*Block(nil), fill...), y...)...)
		// Give it back as x's again.
		y[0].owner = "x"
		isoGive(t, a, y)
	}
}

// Owners allocate concurrently under a small cap, in two size
// classes that take each other's room back (take-back, regrowth, dirty
// extents carved again): every block an owner gets holds zeros or its own
// byte only; zeroed allocations hold zeros only.
func TestConcurrentOwnersNoForeignBytes(t *testing.T) {
	be := device.Host()
	a := isoAlloc(t, be, 48*256)
	classes := []*Class{a.Class(256), a.Class(512), a.Class(768)}
	var wg sync.WaitGroup
	var failed atomic.Value
	const owners = 5
	for o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(o), 7))
			owner := fmt.Sprint("o", o)
			mine := byte(0x20 + o)
			buf := make([]byte, 768)
			for it := 0; it < 400 && failed.Load() == nil; it++ {
				c := classes[r.IntN(len(classes))]
				n := 1 + r.IntN(5)
				hand := Hand(r.IntN(3))
				list, err := a.AllocHand(nil, c, owner, n, hand)
				if err != nil {
					if !errors.Is(err, errNoMem) {
						failed.Store(err.Error())
					}
					continue
				}
				for _, b := range list {
					got := buf[:b.Bytes()]
					if err := be.CopyDtoH(got, b.Ptr()); err != nil {
						failed.Store(err.Error())
						return
					}
					for i, v := range got {
						if v != 0 && (hand == Zeroed || v != mine) {
							failed.Store(fmt.Sprintf("owner %s (hand %d) got block %#x of %d bytes holding %#x at %d", owner, hand, b.Ptr(), b.Bytes(), v, i))
							return
						}
					}
					if err := be.CopyHtoD(b.Ptr(), bytes.Repeat([]byte{mine}, b.Bytes())); err != nil {
						failed.Store(err.Error())
						return
					}
				}
				if r.IntN(4) == 0 {
					for _, b := range list {
						b.Release()
						a.Free([]*Block{b}) // one at a time: the hot slot
					}
				} else {
					isoGive(t, a, list)
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	check(t, a)
	for _, c := range classes {
		isoAllZero(t, be, "clean", a.Clean(c))
	}
}

// A 512-byte allocation under a full cap must take back the
// 256-byte class's free blocks (dirty: another owner's rows) and carve
// its blocks from their extents: those come from the empty owner's list
// and must be zeroed; with a memset fault there, nothing leaks and a
// retry reads zeros.
func TestRegrowFromDirtyExtents(t *testing.T) {
	for _, fault := range []int{-1, 0, 1} {
		t.Run(fmt.Sprint("fault ", fault), func(t *testing.T) {
			fb := statetest.NewFaults(device.Host())
			a := isoAlloc(t, fb, 32*256)
			small, big := a.Class(256), a.Class(512)
			x, err := a.Alloc(nil, small, "x", 32, false)
			if err != nil {
				t.Fatal(err)
			}
			isoWrite(t, fb, x, 0xEE)
			// x keeps every fourth block pair, gives the rest back.
			var give, keep []*Block
			for i, b := range x {
				if i%8 >= 6 {
					keep = append(keep, b)
				} else {
					give = append(give, b)
				}
			}
			isoGive(t, a, give)
			before := a.Stats()
			if fault >= 0 {
				fb.Arm(statetest.OpMemset, fault)
			}
			y, err := a.Alloc(nil, big, "y", 12, false)
			fired := fb.Disarm()
			if fault >= 0 {
				if err == nil || !fired {
					t.Fatalf("want the fault: %v (fired %v)", err, fired)
				}
				check(t, a, keep...)
				if after := a.Stats(); after.InUse != before.InUse || after.InUseBytes != before.InUseBytes {
					t.Fatalf("a failed allocation changed what is in use: %+v, was %+v", after, before)
				}
				for _, c := range []*Class{small, big} {
					isoAllZero(t, fb, "clean", a.Clean(c))
				}
				y, err = a.Alloc(nil, big, "y", 12, false)
			}
			if err != nil {
				t.Fatal(err)
			}
			isoAllZero(t, fb, "y's 512-byte blocks", y)
			check(t, a, append(append([]*Block(nil), keep...), y...)...)
		})
	}
}

// A zeroing that fails gives every block back to its owner, the runs it
// zeroed before the failure too: on the clean list a zeroed allocation
// would take them as untouched (memory no block used, which the cost
// model prices as new memory), though they held x's rows.
func TestZeroFailureKeepsUsedBlocksOffTheCleanList(t *testing.T) {
	fb := statetest.NewFaults(device.Host())
	a := isoAlloc(t, fb, 0)
	c := a.Class(256)
	x, err := a.Alloc(nil, c, "x", 8, false)
	if err != nil {
		t.Fatal(err)
	}
	isoWrite(t, fb, x, 0xAB)
	give := []*Block{x[0], x[1], x[2], x[4], x[5], x[6]} // two runs
	isoGive(t, a, give)
	fill, err := a.Alloc(nil, c, "fill", len(a.Clean(c)), false)
	if err != nil {
		t.Fatal(err)
	}
	fb.Arm(statetest.OpMemset, 1) // the second run fails
	if _, err := a.Alloc(nil, c, "y", 6, false); err == nil || !fb.Disarm() {
		t.Fatalf("want the fault: %v", err)
	}
	z, err := a.Alloc(nil, c, "z", 3, true)
	if err != nil {
		t.Fatal(err)
	}
	check(t, a, append(append(append([]*Block(nil), fill...), x[3], x[7]), z...)...)
	for _, b := range z {
		if b.Untouched() {
			t.Fatalf("block %#x held x's rows, yet a zeroed allocation reports it untouched", b.Ptr())
		}
	}
}
