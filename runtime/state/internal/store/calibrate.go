package store

import (
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"
)

// The cost model: what a pool measures of its backend and of its own work,
// for Plan and At to estimate the cost of a reconstruction (see
// checkpoint.go). Each size class's model is measured on first use on the
// head being planned, with nothing allocated (calibrator), and refined by
// every reconstruction At measures (fit) and every step a replay runs
// again (history.stepFit); growths are priced by the allocator's timings
// of the class's own (blocks.Free.GrowTime).

func (t Transfer) of(copies int, bytes int64) float64 {
	return float64(copies)*float64(t.Fixed) + float64(bytes)*t.PerByte
}

func (m CostModel) estimate(c *candidate, columns int) time.Duration {
	ns := float64(m.Fixed) + float64(c.Copies)*float64(m.CopyFixed) +
		float64(c.SeedBytes+c.DeltaBytes-c.readBytes)*m.CopyPerByte + float64(c.Blocks)*float64(m.Block) +
		float64(c.Deltas*columns)*float64(m.PerDelta) + m.DtoH.of(c.reads, c.readBytes) +
		float64(c.nodes)*float64(m.Node) + float64(c.alone)*float64(max(0, m.CopyAlone-m.CopyFixed))
	return time.Duration(ns)
}

// fitFor returns the pool's fit for size class cls (bytes).
func (c *calibration) fitFor(cls int) fit {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.fits[cls]; f != nil {
		return *f
	}
	return fit{}
}

// observe refines the fit of size class cls with a reconstruction
// whose copies (steps left out) took measured, priced at model by the
// calibrated model and newCost for its new memory.
func (c *calibration) observe(cls int, model, newCost, measured time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fits == nil {
		c.fits = make(map[int]*fit)
	}
	f := c.fits[cls]
	if f == nil {
		f = &fit{}
		c.fits[cls] = f
	}
	f.observe(model, measured-newCost)
}

// costModel returns the pool's cost model as measured so far: the model
// of the first size class a head's Plan or At measured, with the
// pool-wide figures, or one set without measuring (a model of no class).
// A pool that measured nothing yet answers a zero model.
func (c *calibration) costModel() CostModel {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.model
}

// classModel returns the cost model of pool p's size class cls, measuring
// it on head h's retained history on first use (see calibrator). The
// first class measured measures the pool-wide figures too; a class
// measured later takes them from it, and measures new memory when no
// class before had the clean blocks to. A model set without measuring (of
// no class) serves every class. A measurement that fails (nothing to
// measure on: errNoProbe) is tried again on the next use. h.mu is held.
func (c *calibration) classModel(p *Pool, h *Head, cls *sizeClass) (CostModel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done && c.model.BlockBytes == 0 {
		return c.model, nil
	}
	if m := c.classes[cls.Bytes()]; m != nil {
		return *m, nil
	}
	var pool *CostModel
	if c.done {
		pool = &c.model
	}
	k := newCalibrator(p, h, cls)
	m, err := k.calibrate(pool)
	if err != nil {
		return CostModel{}, err
	}
	if c.classes == nil {
		c.classes = make(map[int]*CostModel)
	}
	c.classes[cls.Bytes()] = &m
	switch {
	case !c.done:
		c.model, c.done = m, true
	case m.NewKnown && !c.model.NewKnown:
		// New memory is the pool's, whichever class measured it.
		for _, o := range append([]*CostModel{&c.model}, slices.Collect(maps.Values(c.classes))...) {
			o.NewPerByte, o.NewGrowth, o.NewKnown = m.NewPerByte, m.NewGrowth, true
			o.NewReadPerByte = m.NewReadPerByte
		}
	}
	return m, nil
}

// calibrationOwner owns the blocks the calibration takes. It copies a
// head's rows into some of them and zeroes those before it gives them
// back (the rest hold zeros it wrote), so that a user's owner of the same
// name, which would share its free list, only ever finds its own rows or
// zeros there; another owner gets them zeroed like any other owner's.
// When that zeroing fails, they go back as the head's owner's
// (calibrator.close).
const calibrationOwner Owner = "state: cost model calibration"

// calibRowBytes is the size of the row copies calibration times.
const calibRowBytes = 64

// A calibrator measures the cost model of one size class, cls, on what a
// head's reconstruction reads and writes, as it lies now: it allocates
// nothing (a calibrator lives on its caller's stack). Its sources are
// blocks of the head's retained checkpoints and deltas, which nothing
// writes (the memory a reconstruction seeds from and applies, in whatever
// state the CPU's caches hold it: a past version not read lately finds
// them cold), spread over the history; its destinations are blocks the
// pool has free, taken one at a time (never growing the pool, never
// reclaiming), given back when it closes. It times each operation once,
// on its clock (Pool.calibNow), and takes medians: no timing repeats on
// memory an earlier one warmed.
type calibrator struct {
	p     *Pool
	h     *Head
	cls   *sizeClass
	srcs  [probeSources][2]*block // a retained block and the one after it (or nil)
	nsrc  int
	alone int // the sources copied alone; the rest are copied whole
	// blks are the blocks taken: probeCopies destinations, and when
	// fresh, all of them memory new to the pool, nNew blocks to write
	// first (the destinations among them) and nNew to read first.
	blks  [2 * probeNewMax]*block
	nblk  int
	fresh bool
	nNew  int
	takes [2 * probeNewMax]time.Duration
}

const (
	// probeSources is the retained blocks a calibrator reads: up to
	// probeAlone copied alone and the rest (probeBig or more) copied
	// whole, each followed by the block after it where it has one; it
	// measures on probeMin at least.
	probeAlone   = 7
	probeBig     = 3
	probeSources = probeAlone + probeBig
	probeMin     = 3
	// probeCopies is the destinations: one a copy (a source's, then the
	// block after it).
	probeCopies = 2 * probeSources
	// New memory is timed in probeParts parts of a page or more
	// (probeNewBytes in all, where the class has that many clean blocks),
	// probeNewMax blocks at most each way.
	probeParts    = 8
	probeNewBytes = probeParts * newPage
	probeNewMax   = 64
)

// newPage is the unit new memory is touched in: a page of the host
// backend.
const newPage = 4096

// errNoProbe is what a calibration answers that found nothing to measure
// on: no retained block of the class, or no free block to copy into.
var errNoProbe = fmt.Errorf("state: nothing to measure the cost model on: %w", ErrNoMemory)

// newCalibrator returns a calibrator of pool p's class cls on head h's
// history. h.mu is held.
func newCalibrator(p *Pool, h *Head, cls *sizeClass) calibrator {
	return calibrator{p: p, h: h, cls: cls}
}

// calibrate measures the class's model; with pool nil it measures the
// pool-wide figures too (new memory, when the pool has enough of it
// clean), else it takes them from pool and measures new memory only when
// pool has not. It gives back what it took.
func (c *calibrator) calibrate(pool *CostModel) (CostModel, error) {
	defer c.close()
	// Fixed is what a reconstruction pays once: its first touch of the
	// code and the records every one uses, the excess of the first
	// operation of each kind the calibrator times over the median of the
	// rest, besides a block taken.
	m := CostModel{BlockBytes: c.cls.Bytes()}
	if pool != nil {
		m.HtoD, m.DtoH = pool.HtoD, pool.DtoH
		m.NewPerByte, m.NewGrowth, m.NewKnown = pool.NewPerByte, pool.NewGrowth, pool.NewKnown
		m.NewReadPerByte = pool.NewReadPerByte
	}
	if c.h.hist == nil {
		return CostModel{}, errNoProbe
	}
	// The tree first: the copies read the sources' records.
	c.measureTree(&m)
	c.alone = c.nsrc
	if !c.sources() {
		return CostModel{}, errNoProbe
	}
	if err := c.take(!m.NewKnown); err != nil {
		return CostModel{}, err
	}
	first := c.takes[0]
	m.Block = c.median(c.takes[:c.nblk])
	m.Fixed += m.Block + firstExcess(first, m.Block)
	if c.fresh {
		if err := c.measureNew(&m); err != nil {
			return CostModel{}, err
		}
	} else if err := c.fill(c.blks[:c.nblk]); err != nil { // written, as a reconstruction's destinations are
		return CostModel{}, err
	}
	if err := c.measureCopies(&m); err != nil {
		return CostModel{}, err
	}
	if pool == nil {
		// Host copies are priced as device copies: on the host backend
		// both are one memmove, and a device's At refines them through
		// its fit.
		m.HtoD = Transfer{Fixed: m.CopyFixed, PerByte: m.CopyPerByte}
		m.DtoH = m.HtoD
	}
	return m, nil
}

// sources picks the rest of the calibrator's sources, after those
// measureTree picked to copy alone: blocks of class cls the head's
// retained deltas hold, spread over its history, each with the block that
// follows it (the delta's next, or the next delta's first), then, where
// those are too few, blocks of its checkpoints that something wrote
// (none the head's reconstructions would count as new), spread over each
// column. It reports whether it found enough, probeMin, and sets the
// number copied alone (at least one is copied whole).
func (c *calibrator) sources() bool {
	h := c.h
	if h.hist == nil {
		return false
	}
	es := h.hist.entries
	add := func(a, b *block) {
		if c.nsrc < probeSources && a != nil && !a.Untouched() && !c.has(a) && (b == nil || !b.Untouched()) {
			c.srcs[c.nsrc] = [2]*block{a, b}
			c.nsrc++
		}
	}
	for k := range probeSources {
		j := k * len(es) / probeSources
		d := es[j].d
		if d == nil || d.cols == nil {
			continue
		}
		for col, blks := range d.cols {
			// A delta's blocks are sized to its rows (allocDelta): of
			// the column's class or a smaller one.
			if len(blks) == 0 || blks[0].Class() != c.cls {
				continue
			}
			var next *block
			if len(blks) > 1 {
				next = blks[1]
			} else if j+1 < len(es) && es[j+1].d != nil && col < len(es[j+1].d.cols) && len(es[j+1].d.cols[col]) > 0 {
				next = es[j+1].d.cols[col][0]
			}
			add(blks[0], next)
		}
	}
	c.leaves(func(t *tree, i int) {
		if b := t.get(i); i+1 < t.n {
			add(b, t.get(i+1))
		}
	})
	if c.alone == 0 || c.alone == c.nsrc {
		c.alone = min(max(c.alone, probeAlone), c.nsrc-1)
	}
	return c.nsrc >= probeMin
}

// leaves calls f with spread indices of the trees of class cls in the
// head's retained checkpoints, newest first (the oldest may hold rows
// nothing wrote yet), probeSources in all at most.
func (c *calibrator) leaves(f func(t *tree, i int)) {
	h, n := c.h, 0
	for k := len(h.hist.entries) - 1; k >= 0; k-- {
		e := h.hist.entries[k]
		if e.cp == nil {
			continue
		}
		for col := range e.cp.cols {
			t := &e.cp.cols[col]
			if h.cls[col] != c.cls || t.n <= t.lo {
				continue
			}
			for k := range probeSources {
				if n == probeSources {
					return
				}
				f(t, t.lo+k*(t.n-t.lo)/probeSources)
				n++
			}
		}
	}
}

// has reports whether b is one of the sources already picked.
func (c *calibrator) has(b *block) bool {
	for _, s := range c.srcs[:c.nsrc] {
		if s[0] == b || s[1] == b {
			return true
		}
	}
	return false
}

// measureTree sets Node and PerDelta from walks down the head's
// checkpoint trees, before anything reads them, and picks the sources the
// leaves it reaches hold (written ones): spread over the state, each a
// copy alone. Node is the walk to a leaf and a look at each block it
// holds, one after the other (a node copied on a path takes a reference
// to each of its children, each a locked instruction that waits for the
// one before), PerDelta a walk to another leaf and a look at a delta's
// records (what applying a delta finds besides its copies), each the
// median over the leaves and the deltas.
// A history with no checkpoint tree of the class leaves them zero: its
// fit prices them.
func (c *calibrator) measureTree(m *CostModel) {
	var node, walk [probeSources]time.Duration
	var refs int32
	k := 0
	c.leaves(func(t *tree, i int) {
		start := c.now()
		n := t.root
		for h := t.height; h > 1; h-- {
			n = n.kids[(i>>(fanBits*(h-1)))&(fan-1)]
		}
		for j := 0; j < fan; j++ {
			if b := n.blks[(j+int(refs>>31))&(fan-1)]; b != nil { // each look waits for the last
				refs += b.Refs()
			}
		}
		node[k] = c.now().Sub(start)
		j := t.lo + (i-t.lo+(t.n-t.lo)/2)%(t.n-t.lo)
		start = c.now()
		refs += t.get(j).Refs()
		walk[k] = c.now().Sub(start)
		k++
		if b := t.get(i); !b.Untouched() && c.nsrc < probeAlone && !c.has(b) {
			c.srcs[c.nsrc] = [2]*block{b, nil}
			c.nsrc++
		}
	})
	// A delta's own records, spread over the history: each the delta, its
	// blocks' list, and the record of its first block.
	var recs [probeSources]time.Duration
	nr := 0
	es := c.h.hist.entries
	for q := range probeSources {
		d := es[q*len(es)/probeSources].d
		if d == nil || len(d.cols) == 0 || len(d.cols[0]) == 0 {
			continue
		}
		start := c.now()
		refs += int32(d.per[0]) + d.cols[0][0].Refs()
		recs[nr] = c.now().Sub(start)
		nr++
	}
	m.PerDelta = c.median(recs[:nr])
	probeSink.Store(refs)
	if k > 0 {
		first, firstWalk := node[0], walk[0]
		m.Node, m.PerDelta = c.median(node[:k]), m.PerDelta+c.median(walk[:k])
		m.Fixed += firstExcess(first, m.Node) + firstExcess(firstWalk, walk[(k-1)/2])
	}
}

// probeSink keeps measureTree's reads from being optimized away.
var probeSink atomic.Int32

// take takes the destinations, one at a time, timing each, and with
// wantNew, where the class has the clean blocks (memory new to the pool)
// for them, probeCopies more to read first. A calibrator's owner has no
// free blocks of a class it never measured, so an allocation takes clean
// blocks first: all it takes are new when the class has that many. It
// takes only what the pool has free: it never grows the pool, nor
// reclaims.
func (c *calibrator) take(wantNew bool) error {
	want := probeCopies
	bb := c.cls.Bytes()
	c.nNew = min(probeNewMax, max(probeCopies, (probeNewBytes+bb-1)/bb))
	f := c.p.mem.FreeCounts(c.cls)
	c.nNew = min(c.nNew, int(f.Clean/2))
	if wantNew && c.nNew >= probeCopies {
		want, c.fresh = 2*c.nNew, true
	}
	if f.Used+f.Clean < int64(want) {
		return errNoProbe
	}
	for c.nblk < want {
		var one [1]*block
		start := c.now()
		b, err := c.p.allocOnce(one[:0], c.cls, calibrationOwner, 1, false)
		c.takes[c.nblk] = c.now().Sub(start)
		if err != nil {
			return err
		}
		c.blks[c.nblk] = b[0]
		c.nblk++
	}
	return nil
}

// measureNew sets NewPerByte and NewReadPerByte on blocks new to the
// pool: the median, over probeParts parts, of the first write of the
// first half of the blocks (the destinations among them) per block
// against a second, and of the first read of the other half (copied into
// the first) against a second. NewGrowth
// is the class's measured growth time (blocks.Free.GrowTime) once it grew
// a few times, else zero: a growth is priced once the pool timed some.
func (c *calibrator) measureNew(m *CostModel) error {
	w, r := c.blks[:c.nNew], c.blks[c.nNew:2*c.nNew]
	bb := c.cls.Bytes()
	var first, again, read, reread [probeParts]time.Duration
	parts := max(1, min(probeParts, c.nNew*bb/newPage)) // a page a part at least
	for i := range parts {
		lo, hi := i*c.nNew/parts, (i+1)*c.nNew/parts
		copyPart := func() error {
			for k := lo; k < hi; k++ {
				if err := c.p.b.CopyDtoD(w[k].Ptr(), r[k].Ptr(), bb); err != nil {
					return err
				}
			}
			return nil
		}
		var err error
		if first[i], err = c.timed(hi-lo, func() error { return c.fill(w[lo:hi]) }); err != nil {
			return err
		}
		if again[i], err = c.timed(hi-lo, func() error { return c.fill(w[lo:hi]) }); err != nil {
			return err
		}
		if read[i], err = c.timed(hi-lo, copyPart); err != nil {
			return err
		}
		if reread[i], err = c.timed(hi-lo, copyPart); err != nil {
			return err
		}
	}
	perByte := func(a, b []time.Duration) float64 { return max(0, float64(c.median(a)-c.median(b))/float64(bb)) }
	m.NewPerByte, m.NewReadPerByte, m.NewKnown = perByte(first[:parts], again[:parts]), perByte(read[:parts], reread[:parts]), true
	m.NewGrowth = c.p.mem.FreeCounts(c.cls).GrowTime
	// A reconstruction makes the nodes it copies new (tree.setNew): the
	// Go heap memory they take is new too when the heap grows for them.
	m.Node += time.Duration(float64(unsafe.Sizeof(leafNode{})) * m.NewPerByte)
	return c.fill(r) // written: the blocks go back dirty
}

// measureCopies sets CopyAlone, CopyFixed and CopyPerByte from one copy
// per source, each into a destination of its own: a row of each of the
// first sources, one at a time (the first read of its block: CopyAlone),
// the whole of each of the others (their first read too), and after
// each, a row of the block after it where it has one (a copy in a row:
// CopyFixed; CopyPerByte is the whole copies' cost beyond it).
func (c *calibrator) measureCopies(m *CostModel) error {
	bb := c.cls.Bytes()
	var alone, next, whole [probeSources]time.Duration
	var na, nn, nw int
	copyOne := func(dst, src *block, n int) (time.Duration, error) {
		return c.timed(1, func() error { return c.p.b.CopyDtoD(dst.Ptr(), src.Ptr(), n) })
	}
	var err error
	for k, s := range c.srcs[:c.nsrc] {
		dst := c.blks[k]
		if k >= c.alone {
			if whole[nw], err = copyOne(dst, s[0], bb); err != nil {
				return err
			}
			nw++
		} else {
			if alone[na], err = copyOne(dst, s[0], calibRowBytes); err != nil {
				return err
			}
			na++
		}
		if s[1] != nil {
			if next[nn], err = copyOne(c.blks[probeSources+k], s[1], calibRowBytes); err != nil {
				return err
			}
			nn++
		}
	}
	firstAlone, firstWhole := alone[0], whole[0]
	a, w, n := c.median(alone[:na]), c.median(whole[:nw]), c.median(next[:nn])
	m.Fixed += firstExcess(firstAlone, a) + firstExcess(firstWhole, w)
	if nn == 0 {
		n = a
	}
	if bb > calibRowBytes && w > n {
		m.CopyPerByte = float64(w-n) / float64(bb-calibRowBytes)
	}
	if run := c.run(); len(run) > 1 {
		// A delta's blocks copied whole one after the other, as a
		// reconstruction copies a delta's rows: its bytes stream.
		t, err := c.timed(len(run), func() error {
			for k, b := range run {
				if err := c.p.b.CopyDtoD(c.blks[k%probeCopies].Ptr(), b.Ptr(), bb); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		m.CopyPerByte = max(0, float64(t-n)/float64(bb-calibRowBytes))
	}
	row := time.Duration(calibRowBytes * m.CopyPerByte)
	m.CopyFixed = max(0, n-row)
	m.CopyAlone = max(m.CopyFixed, a-row)
	return nil
}

// run returns the blocks of class cls of one retained delta, probeRun at
// most, from the middle of the history's deltas that have more than one:
// none where no delta has.
func (c *calibrator) run() []*block {
	var best []*block
	es := c.h.hist.entries
	for j := len(es) / 2; j < len(es); j++ {
		if d := es[j].d; d != nil {
			for _, blks := range d.cols {
				if len(blks) > len(best) && blks[0].Class() == c.cls {
					best = blks
				}
			}
		}
		if len(best) > 1 {
			break
		}
	}
	return best[:min(len(best), probeRun)]
}

// probeRun is the most blocks of a delta run copies.
const probeRun = 8

// firstExcess is what the first operation of a kind took beyond the
// median of them all: its first touch of the code and records the kind
// uses, which a reconstruction pays once. It counts at most firstCap
// medians: the first calibration of a process also meets pages of the
// program itself, which no later reconstruction pays again (one came out
// 80 µs where the others were 2-3).
func firstExcess(first, median time.Duration) time.Duration {
	return min(max(0, first-median), firstCap*median)
}

// firstCap bounds firstExcess, in medians.
const firstCap = 8

// fill zeroes the blocks.
func (c *calibrator) fill(blks []*block) error {
	for _, b := range blks {
		if err := c.p.b.Memset(b.Ptr(), 0, c.cls.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// close zeroes the destinations, which hold copies of the head's rows,
// and gives the blocks taken back, listed in place of blks (a list
// appended to would move the calibrator to the heap). When it cannot
// zero them, the destinations go back as the head's owner's blocks: they
// hold that head's rows (or rows of a prefix it adopted), which only its
// owner may take unzeroed; on calibrationOwner's free list a user's owner
// of that name would have read them.
func (c *calibrator) close() {
	dst := c.blks[:min(c.nblk, probeCopies)]
	if err := c.fill(dst); err != nil {
		for _, b := range dst {
			b.GiveTo(string(c.h.owner))
		}
	}
	n := 0
	for _, b := range c.blks[:c.nblk] {
		if b.Release() { // as releaseBlock: each is the calibrator's alone
			c.blks[n] = b
			n++
		}
	}
	c.p.free(c.blks[:n])
	c.nblk = 0
}

// now reads the calibration's clock.
func (c *calibrator) now() time.Time { return c.p.calibNow() }

// timed returns the time per step of one run of steps, synced: where
// device memory is the process's (the host backend, Block.Host), a copy
// or fill is done when its call returns, and the device's Sync would
// only wait for the work of the program's streams too.
func (c *calibrator) timed(steps int, run func() error) (time.Duration, error) {
	start := c.now()
	if err := run(); err != nil {
		return 0, err
	}
	if c.nblk == 0 || c.blks[0].Host(0, 0) == nil {
		if err := c.p.b.Sync(); err != nil {
			return 0, err
		}
	}
	return c.now().Sub(start) / time.Duration(steps), nil
}

// median returns the median of ts, which it sorts.
func (c *calibrator) median(ts []time.Duration) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	slices.Sort(ts)
	return (ts[(len(ts)-1)/2] + ts[len(ts)/2]) / 2
}
