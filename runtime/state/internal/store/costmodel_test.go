package store

import (
	"cmp"
	"math"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// timedBackend is the host backend with a clock of its own that only its
// calls advance, each by a cost per direction: what the calibration
// measures is then exact. It is the device of this file's tests of the
// cost model alone, and stays next to them: its costs (below) are the
// figures those tests expect the calibration to find.
type timedBackend struct {
	device.Backend
	mu      sync.Mutex
	ns      int64
	touched map[device.Ptr]bool // blocks written at least once (Memset)
	alloc   float64             // what Alloc costs; zero: tAlloc
}

// The costs timedBackend charges: nanoseconds, fixed and per byte.
const (
	tDtoDFixed, tDtoDPer = 100, 0.5
	tHtoDFixed, tHtoDPer = 50, 0.25
	tDtoHFixed, tDtoHPer = 70, 0.125
	tMemsetPer           = 0.0625
	tFirstPer            = 2 // a first write's extra cost
	tFirstReadPer        = 1 // a first read's
	tAlloc               = 1 << 20
)

func newTimedBackend() *timedBackend {
	return &timedBackend{Backend: device.Host(), touched: map[device.Ptr]bool{}}
}

func (b *timedBackend) Name() string      { return "timed" }
func (b *timedBackend) AllocZeroes() bool { return true }
func (b *timedBackend) charge(ns float64) {
	b.mu.Lock()
	b.ns += int64(ns)
	b.mu.Unlock()
}
func (b *timedBackend) now() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Unix(0, b.ns)
}
func (b *timedBackend) Alloc(n int) (device.Ptr, error) {
	b.mu.Lock()
	cost := cmp.Or(b.alloc, tAlloc)
	b.mu.Unlock()
	b.charge(cost)
	return b.Backend.Alloc(n)
}
func (b *timedBackend) CopyDtoD(dst, src device.Ptr, n int) error {
	b.mu.Lock()
	first := !b.touched[src]
	b.touched[src], b.touched[dst] = true, true
	b.mu.Unlock()
	ns := tDtoDFixed + tDtoDPer*float64(n)
	if first {
		ns += tFirstReadPer * float64(n)
	}
	b.charge(ns)
	return b.Backend.CopyDtoD(dst, src, n)
}
func (b *timedBackend) CopyHtoD(dst device.Ptr, src []byte) error {
	b.mu.Lock()
	b.touched[dst] = true // written: a later read finds it resident
	b.mu.Unlock()
	b.charge(tHtoDFixed + tHtoDPer*float64(len(src)))
	return b.Backend.CopyHtoD(dst, src)
}
func (b *timedBackend) CopyDtoH(dst []byte, src device.Ptr) error {
	b.charge(tDtoHFixed + tDtoHPer*float64(len(dst)))
	return b.Backend.CopyDtoH(dst, src)
}
func (b *timedBackend) Memset(dst device.Ptr, v byte, n int) error {
	b.mu.Lock()
	first := !b.touched[dst]
	b.touched[dst] = true
	b.mu.Unlock()
	ns := tMemsetPer * float64(n)
	if first {
		ns += tFirstPer * float64(n)
	}
	b.charge(ns)
	return b.Backend.Memset(dst, v, n)
}

// timedPool returns a pool over a timedBackend whose calibration reads the
// backend's clock.
func timedPool(t *testing.T, opt PoolOptions) (*Pool, *timedBackend) {
	be := newTimedBackend()
	p, err := NewPool(be, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.calib.now = be.now
	return p, be
}

// timedHead returns a checkpointed head on p whose history holds deltas
// of several blocks each (a column of 1024 rows of 16 and 8 bytes).
func timedHead(t *testing.T, p *Pool) *Head {
	l := kv(Append, 1<<14, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 4}
	h := must[*Head](t)(p.NewHead(l, "me"))
	t.Cleanup(func() { h.Release() })
	for i := range 12 {
		check(t, h.Append(kvRows(1024, byte(i))))
	}
	return h
}

// TestCalibrationPerDirection: the calibration a head's first Plan makes
// recovers the cost of a device copy (fixed and per byte, alone and in a
// row) and of memory new to the pool (its first write and first read)
// from a backend whose every call costs a known time; host copies are
// priced as device copies; what the backend does not charge (walks of the
// tree, blocks taken from free lists) costs nothing. The model is the
// class's, and the pool's.
func TestCalibrationPerDirection(t *testing.T) {
	p, _ := timedPool(t, PoolOptions{})
	if m := must[CostModel](t)(p.CostModel()); m != (CostModel{}) {
		t.Fatalf("a pool that planned nothing has a model: %+v", m)
	}
	h := timedHead(t, p)
	must[Plan](t)(h.Plan(h.Version() - 1))
	m := must[CostModel](t)(p.CostModel())
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*max(1, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("CopyFixed", float64(m.CopyFixed), tDtoDFixed)
	near("CopyPerByte", m.CopyPerByte, tDtoDPer)
	near("CopyAlone", float64(m.CopyAlone), tDtoDFixed)                         // every copy costs the same here
	near("Node", float64(m.Node), float64(unsafe.Sizeof(leafNode{}))*tFirstPer) // a node new, its memory too
	near("PerDelta", float64(m.PerDelta), 0)
	near("Block", float64(m.Block), 0)
	if m.HtoD != (Transfer{Fixed: m.CopyFixed, PerByte: m.CopyPerByte}) || m.DtoH != m.HtoD {
		t.Errorf("host copies priced %+v and %+v, want the device copy's", m.HtoD, m.DtoH)
	}
	if !m.NewKnown {
		t.Fatal("a calibration on a pool with clean blocks did not measure new memory")
	}
	near("NewPerByte", m.NewPerByte, tFirstPer)
	near("NewReadPerByte", m.NewReadPerByte, tFirstReadPer)
	cls := newEstimator(h).fitSizeClass()
	if m.BlockBytes != cls.Bytes() || *p.calib.classes[cls.Bytes()] != m {
		t.Fatalf("the pool's model is of blocks of %d bytes, want the head's class, %d", m.BlockBytes, cls.Bytes())
	}
	again := must[Plan](t)(h.Plan(h.Version() - 2))
	if again.Unmeasured || must[CostModel](t)(p.CostModel()) != m {
		t.Fatal("a class is measured again on its second use")
	}
}

// TestCalibrationAllocatesNothing: a calibration takes no memory new to
// the pool (it takes free blocks only, and gives them back) and allocates
// nothing on the Go heap; the pool's reserved bytes stay as they were.
func TestCalibrationAllocatesNothing(t *testing.T) {
	p := newPool(t, PoolOptions{})
	h := timedHead(t, p)
	cls := newEstimator(h).fitSizeClass()
	before := p.Stats().ReservedBytes
	h.mu.Lock()
	defer h.mu.Unlock()
	n := testing.AllocsPerRun(20, func() {
		k := newCalibrator(p, h, cls)
		if _, err := k.calibrate(nil); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("a calibration allocated %v times", n)
	}
	if after := p.Stats().ReservedBytes; after != before {
		t.Errorf("a calibration grew the pool from %d to %d bytes", before, after)
	}
}

// TestNewMemoryMeasuredLater: a pool whose first calibration found no
// clean blocks measures no new memory; the first calibration of another
// class that finds them measures it for the pool and every class.
func TestNewMemoryMeasuredLater(t *testing.T) {
	p, _ := timedPool(t, PoolOptions{})
	h := timedHead(t, p)
	cls := newEstimator(h).fitSizeClass()
	f := p.mem.FreeCounts(cls)
	var freed []*block
	for _, b := range must[[]*block](t)(p.allocIn(nil, cls, "hog", int(f.Used+f.Clean), handDirty)) {
		releaseBlock(b, &freed)
	}
	p.free(freed) // free again, but written: none is clean
	must[Plan](t)(h.Plan(h.Version() - 1))
	if m := must[CostModel](t)(p.CostModel()); m.NewKnown || m.BlockBytes != cls.Bytes() {
		t.Fatalf("a calibration on written blocks: %+v", m)
	}
	l := kv(Append, 1<<14, Keep)
	l.Columns = []Column{{ElemSize: 4, Width: 64}}
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 4}
	g := must[*Head](t)(p.NewHead(l, "other"))
	defer g.Release()
	for range 12 {
		check(t, g.Append([][]byte{make([]byte, 1000*256)})) // some of the last growth left clean
	}
	other := newEstimator(g).fitSizeClass()
	if other == cls {
		t.Fatalf("both heads' blocks are of %d bytes", cls.Bytes())
	}
	must[Plan](t)(g.Plan(g.Version() - 1))
	if m := must[CostModel](t)(p.CostModel()); !m.NewKnown || m.NewPerByte != tFirstPer {
		t.Fatalf("the pool's model after a class measured new memory: known %v, %v a byte", m.NewKnown, m.NewPerByte)
	}
	if cm := *p.calib.classes[cls.Bytes()]; !cm.NewKnown || cm.NewReadPerByte != tFirstReadPer {
		t.Fatalf("the first class's model after another measured new memory: known %v, %v a byte read", cm.NewKnown, cm.NewReadPerByte)
	}
}

// estimatePool returns a pool with a fixed cost model and a checkpointed
// head with eight versions.
func estimatePool(t *testing.T) (*Pool, *Head) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	fixedModel(p)
	h := must[*Head](t)(p.NewHead(cpLayout(Mandatory), "me"))
	t.Cleanup(func() { h.Release() })
	for i := range 8 {
		check(t, h.Write(i, kvRows(1, byte(i))))
	}
	return p, h
}

// TestEstimateRefreshedByMeasured injects measured times of
// reconstructions and checks the moving estimate: the first sets the
// scale, the estimate follows the median of the latest five (so one far
// off moves it little, and a new regime takes over within three), and the
// spread opens once three were measured.
func TestEstimateRefreshedByMeasured(t *testing.T) {
	_, h := estimatePool(t)
	v := h.Version() - 1
	plan := func() Plan {
		t.Helper()
		return must[Plan](t)(h.Plan(v))
	}
	base := plan()
	if base.Estimate <= 0 || base.Unmeasured || base.Observed != 0 || base.Low != 0 || base.High != 0 {
		t.Fatalf("a first plan: %+v", base)
	}
	measure := func(factor float64) {
		pl := planOf(t, h, v)
		pl.Measured = time.Duration(float64(base.Estimate) * factor)
		newEstimator(h).observe(&pl, 0)
	}
	scale := func() float64 { return float64(plan().Estimate) / float64(base.Estimate) }
	within := func(got, want float64) bool { return math.Abs(got/want-1) < 1e-3 }
	measure(2)
	if pl := plan(); !within(scale(), 2) || pl.Observed != 1 || pl.Low != 0 {
		t.Fatalf("after one reconstruction twice the estimate: estimate %.3fx, observed %d, low %v", scale(), pl.Observed, pl.Low)
	}
	measure(2)
	measure(2)
	measure(50) // interrupted
	if got := scale(); !within(got, 2) {
		t.Fatalf("after 2x three times and one 50x: estimate %.3fx, want 2", got)
	}
	for i, want := range []float64{2, 2, 0.5} { // warm: a quarter of it
		measure(0.5)
		if got := scale(); !within(got, want) {
			t.Fatalf("after %d at 0.5x: estimate %.3fx, want %v", i+1, got, want)
		}
	}
	measure(0.4)
	measure(0.6)
	pl := plan()
	if pl.Observed != 9 || pl.Low <= 0 || pl.Low >= pl.Estimate || pl.High <= pl.Estimate {
		t.Fatalf("observed %d, estimate %v in [%v, %v]", pl.Observed, pl.Estimate, pl.Low, pl.High)
	}
}

// TestReplayEstimateRefreshed: a replayed step is priced by the median
// time the history's steps took, then by the replays measured since.
func TestReplayEstimateRefreshed(t *testing.T) {
	p := newPool(t, PoolOptions{})
	fixedModel(p)
	h := must[*Head](t)(p.NewHead(recLayout(16, 4, Invalidate), "me"))
	defer h.Release()
	f := stepOn(p.Backend(), h.rowBytes, false)
	for range 6 {
		check(t, h.Step([][]byte{make([]byte, 8)}, false, f))
	}
	// The steps' recorded times, set: 1ms each, but one of 50ms.
	h.mu.Lock()
	for i, e := range h.hist.entries {
		if e.d != nil && e.d.step != nil {
			e.d.step.took = time.Millisecond
			if i == 2 {
				e.d.step.took = 50 * time.Millisecond
			}
		}
	}
	h.mu.Unlock()
	v := h.Version()
	pl := planOf(t, h, v)
	if pl.Steps == 0 || pl.Replayed != time.Duration(pl.Steps)*time.Millisecond {
		t.Fatalf("%d steps priced %v, want 1ms each (the median)", pl.Steps, pl.Replayed)
	}
	pl.Measured = pl.Estimate
	newEstimator(h).observe(&pl, time.Duration(pl.Steps)*3*time.Millisecond) // replays took 3x
	again := must[Plan](t)(h.Plan(v))
	if want := time.Duration(again.Steps) * 3 * time.Millisecond; again.Replayed < want-time.Microsecond || again.Replayed > want+time.Microsecond {
		t.Fatalf("after replays at 3ms a step: %d steps priced %v", again.Steps, again.Replayed)
	}
}

// TestPlanUnmeasured: a pool with no free room for its calibration (it
// never evicts for one) answers a plan marked Unmeasured, with no
// estimate, and At still reconstructs; so does a plan that takes new
// memory on a pool that never measured new memory.
func TestPlanUnmeasured(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 64 << 10})
	h := must[*Head](t)(p.NewHead(cpLayout(Mandatory), "me"))
	defer h.Release()
	for i := range 8 {
		check(t, h.Write(i, kvRows(1, byte(i))))
	}
	opt := must[*Head](t)(p.NewHead(wide("Cache", Optional), "cache"))
	defer opt.Release()
	for opt.Append([][]byte{make([]byte, 256)}) == nil {
	}
	v := h.Version() - 1
	pl := must[Plan](t)(h.Plan(v))
	if !pl.Unmeasured || pl.Estimate != 0 || pl.Low != 0 || pl.High != 0 {
		t.Fatalf("a plan on a pool with no room to calibrate: %+v", pl)
	}
	for _, a := range pl.Alternatives {
		if a.Estimate != 0 {
			t.Fatalf("an alternative priced %v by a model never measured", a.Estimate)
		}
	}
	s := must[*Snap](t)(h.At(v))
	check(t, s.Release())
	last, _ := h.LastReconstruction()
	if !last.Unmeasured || last.Measured <= 0 || last.Observed != 0 {
		t.Fatalf("At's plan: unmeasured %v, measured %v, observed %d", last.Unmeasured, last.Measured, last.Observed)
	}
	if pl := must[Plan](t)(h.Plan(v)); pl.Observed != 0 {
		t.Fatalf("an unpriced reconstruction refined the fit: observed %d", pl.Observed)
	}

	// New memory on a pool whose calibration never took any.
	q := newPool(t, PoolOptions{BlockBytes: 256})
	q.calib.mu.Lock()
	q.calib.model = CostModel{CopyFixed: 200, CopyPerByte: 0.1, Block: 300, PerDelta: 250, Fixed: 300}
	q.calib.done = true
	q.calib.mu.Unlock()
	g := must[*Head](t)(q.NewHead(cpLayout(Mandatory), "me"))
	defer g.Release()
	for i := range 8 {
		check(t, g.Write(i, kvRows(1, byte(i))))
	}
	pl = must[Plan](t)(g.Plan(g.Version() - 1))
	if pl.NewBytes == 0 || !pl.Unmeasured || pl.Estimate != 0 {
		t.Fatalf("a plan that takes %d bytes of new memory the pool never measured: unmeasured %v, estimate %v", pl.NewBytes, pl.Unmeasured, pl.Estimate)
	}
	// Once the pool has free blocks of the class, nothing is new.
	check(t, must[*Snap](t)(g.At(g.Version()-1)).Release())
	if pl := must[Plan](t)(g.Plan(g.Version() - 1)); pl.NewBytes != 0 || pl.Unmeasured || pl.Estimate == 0 {
		t.Fatalf("a plan the pool's free blocks cover: new %d bytes, unmeasured %v, estimate %v", pl.NewBytes, pl.Unmeasured, pl.Estimate)
	}
}

// TestCalibrationKeepsCachedBlocks: a full pool whose room the prefix
// cache holds keeps every cached block through the calibration a head's
// first Plan makes, whether it finds a few free blocks (and measures on
// them) or none.
func TestCalibrationKeepsCachedBlocks(t *testing.T) {
	for _, bb := range []int{256, 0} { // 0: the pool's 64 KiB class has no room at all
		p := newPool(t, PoolOptions{BlockBytes: bb, MaxBytes: 64 << 10})
		a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
		for i := range 64 {
			feedTok(t, a, uint32(i))
		}
		check(t, a.Release())
		h := must[*Head](t)(p.NewHead(cpLayout(Mandatory), "me"))
		defer h.Release()
		for i := range 8 {
			check(t, h.Write(i, kvRows(1, byte(i))))
		}
		opt := must[*Head](t)(p.NewHead(wide("Cache", Optional), "cache"))
		defer opt.Release()
		for p.Stats().ReservedBytes < 64<<10-8*256 && opt.Append([][]byte{make([]byte, 256)}) == nil {
		}
		before := p.Stats()
		if before.CachedBytes == 0 {
			t.Fatal("nothing cached")
		}
		_, err := h.Plan(h.Version() - 1)
		if err != nil {
			t.Fatalf("block bytes %d: Plan: %v", bb, err)
		}
		after := p.Stats()
		if after.CachedBytes != before.CachedBytes || after.Evictions != before.Evictions || after.EvictedBytes != before.EvictedBytes {
			t.Fatalf("block bytes %d: calibration (err %v) changed the cache: %d cached bytes, %d evictions; before %d, %d",
				bb, err, after.CachedBytes, after.Evictions, before.CachedBytes, before.Evictions)
		}
	}
}

// TestPlanPricesUnwrittenSeeds: the seed rows a reconstruction reads of
// blocks nothing ever read or wrote (a mutable state's first blocks, zeroed
// from memory no block used) count as new memory, besides the blocks it
// takes new, until something touches them: a reconstruction's read, a
// Read or ReadRows of the rows, the spans a kernel is given, or a write
// that copies the block's other rows on write. Writes that cover the
// blocks whole read nothing of them; rows written before count as read.
func TestPlanPricesUnwrittenSeeds(t *testing.T) {
	const bb = 256
	for _, tc := range []struct {
		name   string
		before func(h *Head, at []int) // after the first checkpoint, before the writes
		rows   int                     // rows each write covers, from a block's start
		unread bool                    // the plan prices the seeds as a first read
		every  int                     // checkpoints; 0: none past the first
	}{
		{"whole blocks", nil, 32, true, 0},
		{"read", func(h *Head, at []int) {
			for _, a := range at {
				check(t, h.Read(a, a+32, [][]byte{make([]byte, 32*16), make([]byte, 32*8)}))
			}
		}, 32, false, 0},
		{"read rows", func(h *Head, at []int) {
			for _, a := range at {
				idx := make([]int, 32)
				for i := range idx {
					idx[i] = a + i
				}
				check(t, h.ReadRows(idx, [][]byte{make([]byte, 32*16), make([]byte, 32*8)}))
			}
		}, 32, false, 0},
		{"spans", func(h *Head, at []int) {
			for _, a := range at {
				must[[][]device.Span](t)(h.Spans(a, a+32))
			}
		}, 32, false, 0},
		{"copy on write", nil, 1, false, 0},
		{"written before", func(h *Head, _ []int) {
			check(t, h.Write(0, kvRows(4096, 9)))
			check(t, h.Write(0, kvRows(1, 9))) // a checkpoint of the rows written whole
		}, 32, false, 2},
	} {
		p := newPool(t, PoolOptions{BlockBytes: bb})
		fixedModel(p)
		l := kv(Mutable, 4096, Keep)
		l.Checkpoint = &CheckpointPolicy{Every: 64, Keep: 4}
		if tc.every > 0 {
			l.Checkpoint.Every = tc.every
		}
		h := must[*Head](t)(p.NewHead(l, "me"))
		at := []int{128, 128 + 512, 128 + 1024}
		if tc.before != nil {
			tc.before(h, at)
		}
		for i, a := range at {
			check(t, h.Write(a, kvRows(tc.rows, byte(i))))
		}
		v := h.Version()
		first := must[Plan](t)(h.Plan(v))
		if first.SeedBytes == 0 {
			t.Fatalf("%s: a plan with no seed", tc.name)
		}
		check(t, must[*Snap](t)(h.At(v)).Release())
		again := must[Plan](t)(h.Plan(v))
		taken := int64(first.Blocks * bb)
		switch {
		case tc.unread && (first.NewBytes != first.SeedBytes+taken || again.NewBytes != 0):
			t.Fatalf("%s: seeds nothing touched: new bytes %d of %d seed bytes and %d taken first, %d once read",
				tc.name, first.NewBytes, first.SeedBytes, taken, again.NewBytes)
		case !tc.unread && first.NewBytes > taken:
			t.Fatalf("%s: seeds touched before counted new: %d new bytes, %d seed bytes, %d taken",
				tc.name, first.NewBytes, first.SeedBytes, taken)
		}
		check(t, h.Release())
	}
}

// TestBlockTakenWithoutAllocating: taking a block, as a reconstruction
// does for each block it copies on write, and putting it in a tree whose
// path is the tree's alone allocate nothing on the Go heap. A heap growing
// into new pages faults inside whatever allocates; the cost model prices
// the store's work, and a reconstruction that allocated per block paid
// those faults now and then.
func TestBlockTakenWithoutAllocating(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := kv(Append, 1<<12, Keep)
	h := must[*Head](t)(p.NewHead(l, "me"))
	defer h.Release()
	r := newRoot(1)
	var freed []*block
	for i, b := range must[[]*block](t)(p.alloc("tree", 64, false)) {
		r.cols[0].set(i, b, &freed)
	}
	defer func() {
		r.release(&freed)
		p.free(freed)
	}()
	freed = make([]*block, 0, 4)
	if n := testing.AllocsPerRun(100, func() {
		b, err := (&reconstruction{h: h}).takeNew(p.own)
		check(t, err)
		r.cols[0].set(0, b, &freed)
		p.free(freed)
		freed = freed[:0]
	}); n != 0 {
		t.Errorf("a block taken and put in a tree: %v allocations", n)
	}
}

// TestPlanPricesSeedsAlone: a seed copy from a block not next to the one
// seeded before (writes scattered over a state) is priced at CopyAlone,
// the others at CopyFixed: one write across k neighbouring blocks seeds
// one block alone per column, k writes to blocks far apart seed k.
func TestPlanPricesSeedsAlone(t *testing.T) {
	const extra = 1000 // ns: CopyAlone beyond CopyFixed
	for _, scattered := range []bool{false, true} {
		p := newPool(t, PoolOptions{BlockBytes: 256})
		fixedModel(p)
		l := kv(Mutable, 4096, Keep)
		l.Checkpoint = &CheckpointPolicy{Every: 64, Keep: 4}
		h := must[*Head](t)(p.NewHead(l, "me"))
		const k = 4
		if scattered {
			for i := range k {
				check(t, h.Write(100+i*512, kvRows(1, byte(i))))
			}
		} else {
			check(t, h.Write(96, kvRows(k*32, 1))) // 4 blocks of each column, and more of the keys
		}
		v := h.Version()
		base := must[Plan](t)(h.Plan(v))
		p.calib.mu.Lock()
		p.calib.model.CopyAlone = p.calib.model.CopyFixed + extra
		p.calib.mu.Unlock()
		pl := planOf(t, h, v)
		want := 2 // columns
		if scattered {
			want = 2 * k
		}
		if pl.alone != want || pl.Estimate-base.Estimate != time.Duration(want*extra) {
			t.Fatalf("scattered %v: %d seeds alone priced %v more, want %d and %v", scattered, pl.alone, pl.Estimate-base.Estimate, want, time.Duration(want*extra))
		}
		check(t, h.Release())
	}
}

// TestPlanCountsNewPages: the clean blocks a reconstruction takes next
// follow the head's last block, which it wrote; those that lie in that
// block's page touch no page for the first time, and Plan counts them as
// no new memory (their bytes were counted before).
func TestPlanCountsNewPages(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	fixedModel(p)
	l := kv(Append, 1<<12, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 4}
	h := must[*Head](t)(p.NewHead(l, "me"))
	defer h.Release()
	for i := range 6 {
		check(t, h.Append(kvRows(8, byte(i))))
	}
	f := p.mem.FreeCounts(h.cls[0])
	next, ok := f.Next, f.HasNext
	if !ok || next%newPage == 0 {
		t.Fatalf("the next clean block at %#x (%v): want one inside a page", uint64(next), ok)
	}
	pl := must[Plan](t)(h.Plan(h.Version()))
	if room := newPage - int64(next%newPage); pl.Blocks == 0 || int64(pl.Blocks*256) > room {
		t.Fatalf("%d blocks taken, %d bytes left in the page: the test wants some that fit", pl.Blocks, room)
	}
	if pl.NewBytes != 0 {
		t.Fatalf("%d blocks in a page the head's blocks touched: %d new bytes, want 0", pl.Blocks, pl.NewBytes)
	}
}

// TestPlanPricesGrowthsMeasured: a growth of the pool is priced at the
// median time of the class's last growths once it grew a few times, which
// follows the backend when its allocations grow dearer; before, at the
// calibration's NewGrowth (that median when it ran, or nothing).
func TestPlanPricesGrowthsMeasured(t *testing.T) {
	p, be := timedPool(t, PoolOptions{BlockBytes: 256})
	h := must[*Head](t)(p.NewHead(cpLayout(Mandatory), "me"))
	defer h.Release()
	for i := range 8 {
		check(t, h.Write(i, kvRows(1, byte(i))))
	}
	// Two growths' worth of blocks past the clean ones, in column 0.
	growBy := func() time.Duration {
		t.Helper()
		pr := newEstimator(h)
		check(t, pr.price("test"))
		f := pr.free[h.cls[0]]
		taken := make([]int64, len(h.perBlock))
		taken[0] = f.Used + f.Clean + 2*f.Grow
		_, grow := pr.newBytes(taken)
		return grow
	}
	if got := growBy(); got != 2*must[CostModel](t)(p.CostModel()).NewGrowth {
		t.Fatalf("two growths priced at %v before the class grew thrice, want two of the calibration's", got)
	}
	be.mu.Lock()
	be.alloc = 3 * tAlloc
	be.mu.Unlock()
	var held []*block
	for range 5 { // each takes every free block and one more
		f := p.mem.FreeCounts(h.cls[0])
		held = append(held, must[[]*block](t)(p.allocIn(nil, h.cls[0], "grow", int(f.Used+f.Clean)+1, handDirty))...)
	}
	var freed []*block
	for _, b := range held {
		releaseBlock(b, &freed)
	}
	p.free(freed)
	if got := growBy(); got != 6*tAlloc {
		t.Fatalf("two growths priced at %v after five cost %v each, want %v", got, time.Duration(3*tAlloc), time.Duration(6*tAlloc))
	}
}

// planOf is h.Plan(v) with the pricing the store keeps of its choice.
func planOf(t *testing.T, h *Head, v Version) planned {
	t.Helper()
	check(t, h.begin("Plan"))
	defer h.end()
	pl, _, err := newEstimator(h).plan("Plan", v)
	check(t, err)
	return pl
}

// TestCalibrationWaitsForNoStream: on the host backend, whose copies are
// done when they return, the first Plan's calibration times its copies
// without waiting for the device: work queued on a stream of the
// program's, held back here, does not stall it.
func TestCalibrationWaitsForNoStream(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{}))
	t.Cleanup(func() { check(t, p.Close()) })
	h := timedHead(t, p)
	st := must[device.Stream](t)(r.Streams().NewStream())
	t.Cleanup(func() { check(t, st.Close()) })
	r.Hold(t, st)
	done := make(chan error, 1)
	go func() {
		_, err := h.Plan(h.Version())
		done <- err
	}()
	select {
	case err := <-done:
		check(t, err)
		r.Release()
	case <-time.After(10 * time.Second):
		r.Release()
		<-done
		t.Fatal("the calibration waited for a stream's work")
	}
}
