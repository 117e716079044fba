package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Where the allocator meets the other features: pending blocks, eviction,
// size classes under a cap, and backend calls that block.

// pendingRig makes a pool of n blocks of 256 bytes on a backend with
// streams, and a head of owner "gone" holding k of them, released while
// held-back work on a recorded stream may still use them: k blocks pending
// until the returned function lets the stream go.
func pendingRig(t *testing.T, n, k int, opt PoolOptions) (*Pool, func()) {
	t.Helper()
	r := statetest.HostStreamRig(t)
	opt.BlockBytes, opt.MaxBytes = 256, int64(n)*256
	p, err := NewPool(r.Backend, opt)
	check(t, err)
	t.Cleanup(func() { p.Close() })
	st, err := r.Streams().NewStream()
	check(t, err)
	t.Cleanup(func() { st.Close() })
	gone := must[*Head](t)(p.NewHead(wide("Gone", Mandatory), "gone"))
	fill(t, gone, k, 1)
	r.Hold(t, st)
	check(t, gone.RecordStream(st))
	check(t, gone.Release())
	if got := p.Stats().PendingBytes; got != int64(k)*256 {
		t.Fatalf("%d bytes pending after the release, want %d", got, k*256)
	}
	var once bool
	let := func() {
		if !once {
			once = true
			r.Release()
		}
	}
	t.Cleanup(let)
	return p, let
}

// TestAllocWaitsForPendingBeforeEvicting: an allocation that pending blocks
// would serve waits for them rather than answer ErrNoMemory or evict
// optional state, when the work holding them finishes within
// PoolOptions.PendingWait.
func TestAllocWaitsForPendingBeforeEvicting(t *testing.T) {
	// The work is let go after 20ms; the deadline is far past that, so a
	// loaded machine does not turn the wait into an eviction.
	p, let := pendingRig(t, 12, 8, PoolOptions{PendingWait: 30 * time.Second})
	opt := must[*Head](t)(p.NewHead(wide("Cache", Optional), "o"))
	fill(t, opt, 4, 40) // the cap is reached: 8 pending, 4 optional
	time.AfterFunc(20*time.Millisecond, let)
	b := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "b"))
	for i := range 6 {
		if err := b.Append(wideRow(byte(100 + i))); err != nil {
			t.Fatalf("append %d while the pending blocks' work finishes: %v", i, err)
		}
	}
	if err := opt.Read(0, 4, [][]byte{make([]byte, 4*256)}); err != nil {
		t.Fatalf("the optional head after the allocation: %v; want it kept (the pending blocks served)", err)
	}
	if got := p.Stats().EvictedBytes; got != 0 {
		t.Errorf("%d bytes evicted; want none", got)
	}
	check(t, errors.Join(b.Release(), opt.Release()))
}

// TestAllocDeadlineThenFails: pending blocks whose work does not finish
// within PoolOptions.PendingWait leave the allocation to fail with
// ErrNoMemory after the deadline, not hang.
func TestAllocDeadlineThenFails(t *testing.T) {
	p, _ := pendingRig(t, 8, 8, PoolOptions{PendingWait: 30 * time.Millisecond})
	b := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "b"))
	start := time.Now()
	err := b.Append(wideRow(7))
	if !errors.Is(err, ErrNoMemory) {
		t.Fatalf("append while every block is pending past the deadline: %v; want ErrNoMemory", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 20*time.Second {
		t.Errorf("the allocation gave up after %v; want the 30ms deadline", d)
	}
	if b.Len() != 0 {
		t.Errorf("a failed append left %d rows", b.Len())
	}
	check(t, b.Release())
}

// TestAllocFailsWithoutEvicting: an allocation that evicting every optional
// state could not serve fails with ErrNoMemory and evicts nothing.
func TestAllocFailsWithoutEvicting(t *testing.T) {
	p := smallPool(t, 12, nil)
	opt := must[*Head](t)(p.NewHead(wide("Cache", Optional), "o"))
	fill(t, opt, 4, 40)
	m := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "m"))
	fill(t, m, 8, 80)
	b := must[*Head](t)(p.NewHead(&Layout{Type: "Big", Columns: []Column{{Name: "Row", ElemSize: 256, Width: 1}}}, "b"))
	err := b.Append([][]byte{make([]byte, 6*256)}) // 6 blocks; evicting frees 4
	if !errors.Is(err, ErrNoMemory) {
		t.Fatalf("an append past what eviction frees: %v; want ErrNoMemory", err)
	}
	if got := readWide(t, opt); len(got) != 4*256 {
		t.Fatalf("the optional head reads %d bytes; want its 4 rows", len(got))
	}
	if got := p.Stats().EvictedBytes; got != 0 {
		t.Errorf("%d bytes evicted by a call that failed anyway; want none", got)
	}
	check(t, errors.Join(b.Release(), m.Release(), opt.Release()))
}

// TestTrimFreesWithoutThePoolLock: while Trim's Free of a slab waits (as
// a backend's Free waits for stream work), another session reads, appends
// and the pool reports its stats: no pool lock is held across the call.
func TestTrimFreesWithoutThePoolLock(t *testing.T) {
	g := &statetest.GatedFree{Backend: device.Host()}
	defer g.Backend.Close()
	p, err := NewPool(g, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	b := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "b"))
	fill(t, b, 4, 1)
	a := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "a"))
	fill(t, a, 2*slabBlocks, 9) // a second slab, wholly free once a goes
	check(t, a.Release())
	entered, let := g.Arm()
	defer let()
	trimmed := make(chan error, 1)
	go func() {
		_, err := p.Trim()
		trimmed <- err
	}()
	<-entered // Trim is inside Free
	done := make(chan error, 1)
	go func() {
		dst := make([]byte, 4*256)
		if err := b.Read(0, 4, [][]byte{dst}); err != nil {
			done <- err
			return
		}
		if err := b.Append(wideRow(50)); err != nil {
			done <- err
			return
		}
		_ = p.Stats()
		done <- nil
	}()
	select {
	case err := <-done:
		check(t, err)
	case <-time.After(20 * time.Second):
		let()
		t.Fatal("a read, an append and Stats waited for Trim's Free of a slab")
	}
	let()
	check(t, <-trimmed)
	check(t, b.Release())
}

// rowLayout is an append layout of one column of rowBytes-byte rows.
func rowLayout(rowBytes int) *Layout {
	return &Layout{Type: fmt.Sprint("Row", rowBytes), Columns: []Column{{Name: "R", ElemSize: 1, Width: rowBytes}}}
}

// TestSizeClassesShareTheCap: under MaxBytes, heads of many distinct row
// sizes (a size class each, on a pool whose blocks follow the rows) fill
// half the cap; a head of every size, and of a size never seen, can still
// allocate, and so can one that needs the room others gave back.
func TestSizeClassesShareTheCap(t *testing.T) {
	const cap = 4 << 20
	p := newPool(t, PoolOptions{MaxBytes: cap})
	var sizes []int
	for i := range 40 {
		sizes = append(sizes, 1024+256*i)
	}
	var heads []*Head
	for i, rb := range sizes {
		heads = append(heads, must[*Head](t)(p.NewHead(rowLayout(rb), Owner(fmt.Sprint("fill", i)))))
	}
	for round := 0; p.Stats().PhysicalBytes < cap/2; round++ {
		for i, h := range heads {
			if err := h.Append([][]byte{bytes.Repeat([]byte{byte(i)}, sizes[i])}); err != nil {
				t.Fatalf("round %d, rows of %d bytes, %d of %d bytes in use: %v", round, sizes[i], p.Stats().PhysicalBytes, cap, err)
			}
		}
	}
	for i, rb := range append(sizes, 30000) {
		h := must[*Head](t)(p.NewHead(rowLayout(rb), Owner(fmt.Sprint("new", i))))
		if err := h.Append([][]byte{make([]byte, rb)}); err != nil {
			t.Fatalf("a row of %d bytes with %d of %d bytes in use: %v", rb, p.Stats().PhysicalBytes, cap, err)
		}
		check(t, h.Release())
	}
	// Every other filler goes: the room they free serves one large head.
	var freed int64
	for i := 0; i < len(heads); i += 2 {
		freed += heads[i].Stats().PhysicalBytes
		check(t, heads[i].Release())
	}
	big := must[*Head](t)(p.NewHead(rowLayout(8192), "big"))
	rows := int(freed / 8192 / 2)
	if err := big.Append([][]byte{make([]byte, rows*8192)}); err != nil {
		t.Fatalf("%d rows of 8 KiB after %d bytes were freed: %v", rows, freed, err)
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
	check(t, big.Release())
	for i := 1; i < len(heads); i += 2 {
		check(t, heads[i].Release())
	}
	if _, err := p.Trim(); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.ReservedBytes != 0 || s.Slabs != 0 {
		t.Errorf("after every release and Trim: %d bytes reserved in %d slabs; want none", s.ReservedBytes, s.Slabs)
	}
}

// TestDeltaClassesShareTheCap: deltas of many lengths, each sized to its
// rows (a size class per length), under MaxBytes: the writes, and At's
// reconstruction (with its first calibration) still find room.
func TestDeltaClassesShareTheCap(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 1 << 20})
	l := kv(Mutable, 4096, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 64, Keep: 2}
	h := must[*Head](t)(p.NewHead(l, "h"))
	var target Version
	want := [][]byte{make([]byte, 4096*16), make([]byte, 4096*8)}
	for n := 1; n <= 48; n++ {
		if err := h.Write((n*37)%(4096-n), kvRows(n, byte(n))); err != nil {
			t.Fatalf("a write of %d rows, %d bytes reserved: %v", n, p.Stats().ReservedBytes, err)
		}
		if n == 40 {
			target = h.Version()
			check(t, h.Read(0, 4096, want))
		}
	}
	s := must[*Snap](t)(h.At(target))
	got := [][]byte{make([]byte, 4096*16), make([]byte, 4096*8)}
	check(t, s.Read(0, 4096, got))
	if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
		t.Error("At reads other rows than the version had")
	}
	check(t, errors.Join(s.Release(), h.Release()))
}

// TestSizeClassesRandom: heads of random row sizes come and go under
// MaxBytes. An append fails only with ErrNoMemory, and never while the
// blocks in use and the ones it asks for stay under 40% of the cap; the
// pool's books (free lists, extents, reserved bytes) hold throughout, and
// Trim gives everything back at the end.
func TestSizeClassesRandom(t *testing.T) {
	const cap = 2 << 20
	p := newPool(t, PoolOptions{MaxBytes: cap})
	rng := rand.New(rand.NewPCG(1, 2))
	var live []*Head
	var failed int
	var peak int64
	for step := range 3000 {
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			check(t, live[i].Release())
			live = append(live[:i], live[i+1:]...)
		} else {
			rb := 256 * (1 + rng.IntN(24))
			rows := 1 + rng.IntN(8)
			h := must[*Head](t)(p.NewHead(rowLayout(rb), Owner(fmt.Sprint("o", step%7))))
			inUse := p.Stats().PhysicalBytes
			err := h.Append([][]byte{bytes.Repeat([]byte{byte(step)}, rows*rb)})
			switch {
			case err == nil:
				live = append(live, h)
			case !errors.Is(err, ErrNoMemory):
				t.Fatalf("step %d: %v", step, err)
			case inUse+int64(rows*rb) <= cap*4/10:
				t.Fatalf("step %d: %d rows of %d bytes with %d of %d bytes in use: %v", step, rows, rb, inUse, cap, err)
			default:
				failed++
				check(t, h.Release())
			}
			peak = max(peak, p.Stats().PhysicalBytes)
		}
		if step%100 == 0 {
			if err := checkInvariants(p); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	}
	if failed == 0 || peak < cap*6/10 {
		t.Fatalf("%d appends failed, at most %d of %d bytes in use: the cap was never pressed", failed, peak, cap)
	}
	t.Logf("%d appends failed for room; at most %d of %d bytes in use", failed, peak, cap)
	for _, h := range live {
		check(t, h.Release())
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Trim(); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.ReservedBytes != 0 {
		t.Errorf("%d bytes reserved after every release and Trim", s.ReservedBytes)
	}
}

// TestEvictionWaitsForTheBlocksItFenced: eviction that frees blocks a
// recorded stream's work may still use frees them behind a fence, as
// pending; the allocation waits for them (PoolOptions.PendingWait) rather
// than evict everything else and then fail with the state already gone
// (docs/INTERNALS.md: a call that fails anyway changes nothing).
func TestEvictionWaitsForTheBlocksItFenced(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256, PendingWait: 30 * time.Second})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	st, err := r.Streams().NewStream()
	check(t, err)
	t.Cleanup(func() { st.Close() })
	opt := must[*Head](t)(p.NewHead(wide("Cache", Optional), "o"))
	fill(t, opt, 6, 10)
	var once sync.Once
	let := func() { once.Do(r.Release) }
	t.Cleanup(let)
	r.Hold(t, st)
	check(t, opt.RecordStream(st)) // work on st reads opt's blocks
	time.AfterFunc(20*time.Millisecond, let)
	b := must[*Head](t)(p.NewHead(&Layout{Type: "Big", Columns: []Column{{Name: "Row", ElemSize: 256, Width: 1}}}, "b"))
	// 4 blocks, 2 free: evicting opt makes the room once st's work is done.
	if err := b.Append([][]byte{bytes.Repeat([]byte{7}, 4*256)}); err != nil {
		t.Fatalf("append that evicting the optional head serves, once its fenced blocks return: %v (evicted %d bytes)",
			err, p.Stats().EvictedBytes)
	}
	if got := p.Stats().EvictedBytes; got != 6*256 {
		t.Errorf("%d bytes evicted; want the optional head's %d", got, 6*256)
	}
	check(t, errors.Join(b.Release(), opt.Release()))
}

// TestEvictionSparesStateQueuedWorkHolds: an optional head whose blocks
// work queued on a recorded stream still uses, past PoolOptions.PendingWait,
// is not evicted for an allocation it alone could serve: its blocks would
// only go pending, and the call would fail with the head gone
// (docs/INTERNALS.md: a call that fails anyway changes nothing).
func TestEvictionSparesStateQueuedWorkHolds(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256, PendingWait: 30 * time.Millisecond})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	st, err := r.Streams().NewStream()
	check(t, err)
	t.Cleanup(func() { st.Close() })
	opt := must[*Head](t)(p.NewHead(wide("Cache", Optional), "o"))
	fill(t, opt, 6, 10)
	var once sync.Once
	let := func() { once.Do(r.Release) }
	t.Cleanup(let)
	r.Hold(t, st)
	check(t, opt.RecordStream(st)) // held work on st reads opt's blocks
	b := must[*Head](t)(p.NewHead(&Layout{Type: "Big", Columns: []Column{{Name: "Row", ElemSize: 256, Width: 1}}}, "b"))
	err = b.Append([][]byte{bytes.Repeat([]byte{7}, 4*256)})
	if !errors.Is(err, ErrNoMemory) {
		t.Fatalf("append that only the held head's blocks could serve: %v; want ErrNoMemory", err)
	}
	if got := p.Stats().EvictedBytes; got != 0 {
		t.Errorf("%d bytes evicted by a call that failed anyway; want none", got)
	}
	let()
	if got := readWide(t, opt); len(got) != 6*256 {
		t.Fatalf("the optional head reads %d bytes; want its 6 rows", len(got))
	}
	check(t, errors.Join(b.Release(), opt.Release()))
}

// TestEvictionWeighsRunsNotBytes: evicting an optional head whose blocks
// lie each between two of a mandatory head's frees enough bytes for a
// larger block but no run of its size: the allocation fails with
// ErrNoMemory and evicts nothing (docs/INTERNALS.md: a call that fails
// anyway changes nothing).
func TestEvictionWeighsRunsNotBytes(t *testing.T) {
	p := smallPool(t, 16, nil) // slabs of two blocks: an eighth of the cap
	opt := must[*Head](t)(p.NewHead(wide("Cache", Optional), "o"))
	m := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "m"))
	for i := range 8 { // each slab: one block of opt's, one of m's
		check(t, opt.Append(wideRow(byte(10+i))))
		check(t, m.Append(wideRow(byte(50+i))))
	}
	big := &Layout{Type: "Big", Columns: []Column{{Name: "Row", ElemSize: 256, Width: 1}}, BlockRows: 4}
	b := must[*Head](t)(p.NewHead(big, "b"))
	err := b.Append([][]byte{bytes.Repeat([]byte{7}, 4*256)}) // one block of 1 KiB
	if !errors.Is(err, ErrNoMemory) {
		t.Fatalf("a 1 KiB block where evicting frees 2 KiB in 256-byte holes: %v; want ErrNoMemory", err)
	}
	if got := p.Stats().EvictedBytes; got != 0 {
		t.Errorf("%d bytes evicted by a call that failed anyway; want none", got)
	}
	if got := readWide(t, opt); len(got) != 8*256 {
		t.Fatalf("the optional head reads %d bytes; want its 8 rows", len(got))
	}
	check(t, errors.Join(b.Release(), m.Release(), opt.Release()))
}

// An allocation of blocks of two classes evicts for none of them when the
// victims cannot make room for both: the call fails having evicted
// nothing, however the first class's room would have come.
func TestEvictionWeighsEveryClass(t *testing.T) {
	p := smallPool(t, 16, nil)
	m := must[*Head](t)(p.NewHead(wide("Log", Mandatory), "m"))
	for i := range 12 { // 3 KiB of the cap's 4
		check(t, m.Append(wideRow(byte(i))))
	}
	big := &Layout{Type: "Big", Columns: []Column{{Name: "Row", ElemSize: 256, Width: 1}}, BlockRows: 4, Retention: Optional}
	opt := must[*Head](t)(p.NewHead(big, "o"))
	check(t, opt.Append([][]byte{bytes.Repeat([]byte{7}, 4*256)})) // one block of 1 KiB: the last
	if st := p.Stats(); st.EvictedBytes != 0 || st.ReservedBytes != 4096 || st.FreeBlocks != 0 {
		t.Fatalf("stats %+v after filling the pool; want 4 KiB reserved, no block free, nothing evicted", st)
	}
	pair := &Layout{Type: "Pair", Columns: []Column{{Name: "Wide", ElemSize: 256, Width: 1}, {Name: "Narrow", ElemSize: 8, Width: 1}}, BlockRows: 4}
	h := must[*Head](t)(p.NewHead(pair, "h"))
	err := h.Append([][]byte{bytes.Repeat([]byte{1}, 4*256), bytes.Repeat([]byte{2}, 4*8)}) // a block of 1 KiB and one of 256 bytes
	if !errors.Is(err, ErrNoMemory) {
		t.Fatalf("1280 bytes of blocks where evicting frees 1 KiB: %v; want ErrNoMemory", err)
	}
	if got := p.Stats().EvictedBytes; got != 0 {
		t.Errorf("%d bytes evicted by a call that failed anyway; want none", got)
	}
	check(t, errors.Join(h.Release(), m.Release(), opt.Release()))
}
