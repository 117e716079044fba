package store

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Regression tests for where history (checkpoints, reconstruction, the
// cost model, rollback) meets the rest of the runtime.

// cpLayout is a mutable two-column layout with checkpoints every few
// versions.
func cpLayout(ret Retention) *Layout {
	l := kv(Mutable, 64, Invalidate)
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 4}
	l.Retention = ret
	return l
}

// TestAtFailureLeaksNothing fails the copy At makes to seed a block it
// copies on write, and checks that the failed reconstruction gave back
// every block it took: the pool's blocks in use are as before.
func TestAtFailureLeaksNothing(t *testing.T) {
	fb := statetest.NewFaults(device.Host())
	p, err := NewPool(fb, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	fixedModel(p)
	h := must[*Head](t)(p.NewHead(cpLayout(Mandatory), "me"))
	var vs []Version
	for i := range 3 {
		check(t, h.Write(i, kvRows(1, byte(i+1))))
		vs = append(vs, h.Version())
	}
	before := p.Stats()
	fb.Arm(statetest.OpCopy, 0) // the seed copy of the first block the delta writes
	if _, err := h.At(vs[1]); !errors.Is(err, statetest.ErrInjected) {
		t.Fatalf("At with a failing copy: %v, want the injected fault", err)
	}
	if !fb.Disarm() {
		t.Fatal("the fault did not fire")
	}
	after := p.Stats()
	if after.Blocks != before.Blocks || after.PhysicalBytes != before.PhysicalBytes {
		t.Fatalf("a failed At kept blocks: %d blocks (%d bytes) in use, %d (%d) before",
			after.Blocks, after.PhysicalBytes, before.Blocks, before.PhysicalBytes)
	}
	s := must[*Snap](t)(h.At(vs[1]))
	check(t, s.Release())
	check(t, h.Release())
	if st := p.Stats(); st.Blocks != 0 {
		t.Fatalf("%d blocks in use after every handle is released", st.Blocks)
	}
}

// TestRebuildFailureLeaksNothing has memory pressure evict a
// reconstructable head, fails the rebuild its next call makes, and checks
// that the blocks the rebuild took went back.
func TestRebuildFailureLeaksNothing(t *testing.T) {
	fb := statetest.NewFaults(device.Host())
	p, err := NewPool(fb, PoolOptions{BlockBytes: 256, MaxBytes: 64 * 256})
	check(t, err)
	defer p.Close()
	fixedModel(p)
	h := must[*Head](t)(p.NewHead(cpLayout(Reconstructable), "me"))
	for i := range 3 {
		check(t, h.Write(i, kvRows(1, byte(i+1))))
	}
	var ms []*Head
	for i := 0; p.Stats().EvictedBytes == 0; i++ {
		m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), Owner(fmt.Sprint("m", i))))
		ms = append(ms, m)
		if err := m.Append(wideRow(byte(i))); err != nil {
			t.Fatalf("filling the pool: %v (stats %+v)", err, p.Stats())
		}
	}
	for _, m := range ms {
		check(t, m.Release())
	}
	before := p.Stats()
	fb.Arm(statetest.OpCopy, 0) // the seed copy of the first block the rebuild copies on write
	dst := [][]byte{make([]byte, 16), make([]byte, 8)}
	if err := h.Read(0, 1, dst); !errors.Is(err, statetest.ErrInjected) {
		t.Fatalf("Read with a failing rebuild: %v, want the injected fault", err)
	}
	fb.Disarm()
	if after := p.Stats(); after.Blocks != before.Blocks {
		t.Fatalf("a failed rebuild kept blocks: %d in use, %d before", after.Blocks, before.Blocks)
	}
	check(t, h.Read(0, 1, dst))
	check(t, h.Release())
	if st := p.Stats(); st.Blocks != 0 {
		t.Fatalf("%d blocks in use after every handle is released", st.Blocks)
	}
}

// fixedModel gives p a cost model without measuring, so that the faults
// a test arms meet the reconstruction, not the calibration.
func fixedModel(p *Pool) {
	p.calib.mu.Lock()
	p.calib.model = CostModel{CopyFixed: 200, CopyPerByte: 0.1, Block: 300, PerDelta: 250, Fixed: 300, NewKnown: true}
	p.calib.done = true
	p.calib.mu.Unlock()
}

// TestPlanCalibrationEvictsNothing calls Plan first on a pool that
// optional state nearly fills: the calibration Plan's first call makes
// takes only the room there is, so no handle is evicted, and it does not
// make a buffer of its own (a pool's calibration allocates little on the
// host).
func TestPlanCalibrationEvictsNothing(t *testing.T) {
	warm := newPool(t, PoolOptions{BlockBytes: 256})
	must[CostModel](t)(warm.CostModel()) // the process's shared buffers exist now

	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 64 << 10})
	opt := must[*Head](t)(p.NewHead(wide("Cache", Optional), "cache"))
	defer func() { opt.Release() }()
	rows := make([]byte, 256)
	for opt.Append([][]byte{rows}) == nil {
	}
	// Room for a few blocks, far fewer than a calibration would like.
	check(t, opt.Release())
	opt = must[*Head](t)(p.NewHead(wide("Cache", Optional), "cache"))
	n := int(p.Stats().ReservedBytes/256) - 24
	check(t, opt.Append([][]byte{make([]byte, n*256)}))
	h := must[*Head](t)(p.NewHead(cpLayout(Mandatory), "me"))
	defer h.Release()
	check(t, h.Write(0, kvRows(1, 1)))
	v := h.Version()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := h.Plan(v); err != nil {
		t.Fatalf("Plan: %v", err)
	}
	runtime.ReadMemStats(&after)
	if st := p.Stats(); st.EvictedBytes != 0 {
		t.Fatalf("Plan evicted %d bytes of optional state", st.EvictedBytes)
	}
	if got := opt.Len(); got != n {
		t.Fatalf("the optional head has %d rows after Plan, want %d", got, n)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 4<<20 {
		t.Fatalf("Plan's calibration allocated %d bytes on the host", a)
	}
}

// TestSegmentJumps checks ancestorAt and isAncestor against a plain walk
// of parents, on random segment trees.
func TestSegmentJumps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	segs := []*segment{{}}
	var l lineage
	for range 3000 {
		p := segs[len(segs)-1]
		if rng.IntN(4) == 0 {
			p = segs[rng.IntN(len(segs))]
		}
		segs = append(segs, l.newSegment(p, Version(rng.IntN(50))))
	}
	for range 20000 {
		b := segs[rng.IntN(len(segs))]
		d := rng.IntN(b.depth + 1)
		var steps int
		got := b.ancestorAt(d, &steps)
		want := b
		for want.depth > d {
			want = want.parent
		}
		if got != want {
			t.Fatalf("ancestorAt(%d) of a segment at depth %d: wrong segment", d, b.depth)
		}
		if lim := 3*bits.Len(uint(b.depth)) + 2; steps > lim {
			t.Fatalf("ancestorAt(%d) from depth %d took %d steps, more than %d", d, b.depth, steps, lim)
		}
		a := position{seg: segs[rng.IntN(len(segs))], v: Version(rng.IntN(60))}
		bp := position{seg: b, v: Version(rng.IntN(60))}
		if got, want := isAncestor(a, bp), naiveIsAncestor(a, bp); got != want {
			t.Fatalf("isAncestor = %v, a plain walk says %v", got, want)
		}
	}
}

func naiveIsAncestor(a, b position) bool {
	s, limit := b.seg, b.v
	for s != nil {
		if s == a.seg {
			return a.v <= limit
		}
		s, limit = s.parent, s.fork
	}
	return false
}

// TestRollbackInvalidateWork runs merge, snapshot, write, rollback cycles
// on two heads of one lineage, each line growing two segments per cycle
// (a merged branch's, and the head's write after the merge: a rollback's
// write goes on in the head's segment), and counts the segments each
// rollback's invalidation passes: it must not grow with the cycles the
// line has seen (O(log depth) per live handle), where a walk of every
// handle's whole chain grows linearly.
func TestRollbackInvalidateWork(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	fixedModel(p)
	h := must[*Head](t)(p.NewHead(kv(Mutable, 8, Invalidate), "me"))
	defer h.Release()
	b := must[*Head](t)(h.Branch())
	defer b.Release()
	row := kvRows(1, 1)
	cycle := func(x *Head) int {
		c := must[*Head](t)(x.Branch())
		check(t, c.Write(0, row))
		check(t, x.Merge(c))
		check(t, c.Release())
		check(t, x.Write(0, row))
		s := must[*Snap](t)(x.Snapshot())
		check(t, x.Write(1, row))
		h.lin.mu.Lock()
		before := h.lin.steps
		h.lin.mu.Unlock()
		check(t, x.Rollback(s))
		h.lin.mu.Lock()
		n := h.lin.steps - before
		h.lin.mu.Unlock()
		check(t, s.Release())
		return n
	}
	const cycles = 10000
	var early, late int
	for i := range cycles {
		// b grows twice as deep as h: h's rollbacks look past b's extra
		// segments for the abandoned line.
		cycle(b)
		cycle(b)
		n := cycle(h)
		if i < 10 {
			early = max(early, n)
		}
		if i >= cycles-10 {
			late = max(late, n)
		}
	}
	if d := b.pos.seg.depth; d < 4*cycles {
		t.Fatalf("after %d cycles the branch's line is %d segments deep; want %d", cycles, d, 4*cycles)
	}
	if lim := early + 3*bits.Len(4*cycles) + 2; late > lim {
		t.Fatalf("a rollback after %d cycles passed %d segments, the first ones %d (limit %d)", cycles, late, early, lim)
	}
	t.Logf("segments passed per rollback: %d early, %d after %d cycles", early, late, cycles)
}

// TestFitSpread checks the moving fit of measured against estimated
// reconstruction times: no spread before three measurements, the ratio
// learned, and a spread that opens when the ratios vary.
func TestFitSpread(t *testing.T) {
	var f fit
	if mid, _, _, known := f.scale(); mid != 1 || known {
		t.Fatalf("an empty fit scales by %v (known %v), want 1, unknown", mid, known)
	}
	for range 2 {
		f.observe(100, 300)
	}
	if mid, _, _, known := f.scale(); known || mid < 2.99 || mid > 3.01 {
		t.Fatalf("after two measurements 3x the estimate: scale %v, known %v", mid, known)
	}
	f.observe(100, 300)
	mid, lo, hi, known := f.scale()
	if !known || lo != mid || hi != mid {
		t.Fatalf("three equal ratios: %v [%v, %v], known %v; want 3 with no spread", mid, lo, hi, known)
	}
	for i := range 20 {
		f.observe(100, time.Duration(150+300*(i%2))) // 1.5x and 4.5x in turns
	}
	mid, lo, hi, _ = f.scale()
	if !(lo < 1.5 && hi > 4.5 && lo < mid && mid < hi) {
		t.Fatalf("ratios of 1.5 and 4.5: scale %v in [%v, %v]", mid, lo, hi)
	}
	f.observe(0, 100) // nothing to compare: ignored
	if f.n != 23 {
		t.Fatalf("n = %d", f.n)
	}
}

// TestPlanRefinedByMeasured gives a pool a cost model far off (a second
// per copy) and checks that the reconstructions At measures bring Plan's
// estimate to within the measured times' order, with a spread around it
// once three were measured.
func TestPlanRefinedByMeasured(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	p.calib.mu.Lock()
	p.calib.model = CostModel{CopyFixed: time.Second, Block: time.Second, PerDelta: time.Second, Fixed: time.Second, NewKnown: true}
	p.calib.done = true
	p.calib.mu.Unlock()
	h := must[*Head](t)(p.NewHead(cpLayout(Mandatory), "me"))
	defer h.Release()
	for i := range 6 {
		check(t, h.Write(i, kvRows(1, byte(i))))
	}
	v := h.Version() - 1
	first := must[Plan](t)(h.Plan(v))
	if first.Observed != 0 || first.Low != 0 || first.High != 0 {
		t.Fatalf("a plan before any reconstruction: observed %d, spread [%v, %v]; want none", first.Observed, first.Low, first.High)
	}
	var worst time.Duration
	for range 5 {
		s := must[*Snap](t)(h.At(v))
		last, _ := h.LastReconstruction()
		worst = max(worst, last.Measured)
		check(t, s.Release())
	}
	pl := must[Plan](t)(h.Plan(v))
	if pl.Observed != 5 || pl.Low <= 0 || pl.Low > pl.Estimate || pl.High < pl.Estimate {
		t.Fatalf("after five reconstructions: observed %d, estimate %v in [%v, %v]", pl.Observed, pl.Estimate, pl.Low, pl.High)
	}
	if pl.Estimate > 100*worst+time.Millisecond {
		t.Fatalf("estimate %v after five reconstructions that took at most %v (the model said %v)", pl.Estimate, worst, first.Estimate)
	}
}

// TestPlanFitPerSizeClass checks that reconstructions refine the
// estimates of states of their own size class only.
func TestPlanFitPerSizeClass(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	fixedModel(p)
	small := must[*Head](t)(p.NewHead(cpLayout(Mandatory), "a"))
	defer small.Release()
	l := cpLayout(Mandatory)
	l.BlockRows = 64 // blocks of 1 KiB of keys
	large := must[*Head](t)(p.NewHead(l, "b"))
	defer large.Release()
	for _, h := range []*Head{small, large} {
		for i := range 3 {
			check(t, h.Write(i, kvRows(1, byte(i))))
		}
	}
	v := small.Version() - 1
	for range 3 {
		check(t, must[*Snap](t)(small.At(v)).Release())
	}
	if pl := must[Plan](t)(small.Plan(v)); pl.Observed != 3 {
		t.Fatalf("the small state's plan observed %d reconstructions, want 3", pl.Observed)
	}
	if pl := must[Plan](t)(large.Plan(large.Version() - 1)); pl.Observed != 0 || pl.Low != 0 {
		t.Fatalf("a state of another size class: observed %d, low %v; want none", pl.Observed, pl.Low)
	}
}

// TestEmptyWriteRecordsHistory writes no rows to a checkpointed head, by
// Write and by WriteDevice: the delta of such a version is empty, and
// history must record it without allocating a block of no rows (it
// divided by zero computing the rows per block).
func TestEmptyWriteRecordsHistory(t *testing.T) {
	p := newPool(t, PoolOptions{})
	h, err := p.NewHead(cpLayout(Mandatory), "o")
	check(t, err)
	defer h.Release()
	check(t, h.Write(3, [][]byte{nil, nil}))
	if _, err := h.WriteDevice(5, 5); err != nil {
		t.Fatal(err)
	}
	check(t, h.Write(0, [][]byte{make([]byte, 16), make([]byte, 8)}))
	for v := Version(1); v <= h.Version(); v++ {
		s, err := h.At(v)
		if err != nil {
			t.Fatalf("At(%d): %v", v, err)
		}
		check(t, s.Release())
	}
}
