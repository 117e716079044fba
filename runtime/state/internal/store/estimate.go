package store

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// Estimates: how Plan prices the ways to reconstruct a version
// (docs/GUIDE.md, "The cost model"). Each candidate counts what its
// reconstruction will do (copies and their bytes, blocks taken, tree nodes
// copied on their paths, blocks the pool has no free one for, steps to run
// again, rows read back to verify), and the size class's cost model,
// measured on the pool's backend (calibrate.go), prices the counts; the
// pool's measured reconstructions of the class scale the price (fit).

// An estimator plans the reconstructions of one head, h: it prices the
// ways to reconstruct a version (its pricing, set by price), performs the
// cheapest for At, and refines the pool's calibration by what it measured.
// Plan and At make one per call.
type estimator struct {
	h *Head
	pricing
	// touched, nodes, taken and last are what candidate counts in, per
	// column, kept from one candidate to the next.
	touched []bitset   // the blocks taken
	nodes   [][]bitset // per level: the nodes copied
	taken   []int64
	last    []int // the block seeded last, -2 for none
	// in holds them for up to four columns, in the estimator's own
	// allocation.
	in struct {
		touched [4]bitset
		nodes   [4][]bitset
		taken   [4]int64
		last    [4]int
	}
}

// newEstimator returns an estimator of h's reconstructions, priced by
// nothing yet.
func newEstimator(h *Head) *estimator { return &estimator{h: h} }

// pricing is what candidates are priced by: the size class's cost model
// (known false: none was measured), its fit, the free blocks of the
// head's classes, and the expected time of one replayed step.
type pricing struct {
	model CostModel
	known bool
	f     fit
	free  map[*sizeClass]classFree
	step  time.Duration
}

// candidates returns every way to reconstruct entry t, cheapest first.
func (e *estimator) candidates(t int) []candidate {
	x, pr := e.h.hist, &e.pricing
	out := make([]candidate, 0, x.policy.Keep+1) // a candidate a checkpoint
	for q := t; q >= 0; q-- {
		if x.entries[q].cp != nil {
			out = append(out, e.candidate(q, t))
		}
		if q > 0 && x.entries[q].d == nil {
			break // a gap: nothing before it reaches t
		}
	}
	cost := func(c candidate) int64 {
		if pr.known {
			return int64(c.Estimate)
		}
		return c.SeedBytes + c.DeltaBytes
	}
	slices.SortStableFunc(out, func(a, b candidate) int { return cmp.Compare(cost(a), cost(b)) })
	return out
}

// bitset is a set of small non-negative integers.
type bitset []uint64

// add puts i in s and reports whether it was not there.
func (s *bitset) add(i int) bool {
	w := i >> 6
	if w >= len(*s) {
		*s = append(*s, make([]uint64, w-len(*s)+1)...)
	}
	m := uint64(1) << (i & 63)
	if (*s)[w]&m != 0 {
		return false
	}
	(*s)[w] |= m
	return true
}

// candidate estimates seeding from entry q's checkpoint and applying the
// deltas of entries q+1..t.
func (e *estimator) candidate(q, t int) candidate {
	h, x, pr := e.h, e.h.hist, &e.pricing
	c := candidate{Candidate: Candidate{Checkpoint: x.entries[q].pos.v, Deltas: t - q}}
	touched, nodes, taken, last := e.scratch()
	rows := x.entries[q].rows
	cp := x.entries[q].cp
	var unread int64 // seed bytes of blocks no one ever wrote
	for j := q + 1; j <= t; j++ {
		d := x.entries[j].d
		if d.step != nil {
			c.Steps++
			c.Replayed += pr.step
		}
		for col, per := range h.perBlock {
			rb := h.rowBytes[col]
			for bi := d.from / per; bi*per < d.to; bi++ {
				if !touched[col].add(bi) {
					continue
				}
				for lvl, i := 0, bi>>fanBits; ; lvl, i = lvl+1, i>>fanBits {
					if lvl == len(nodes[col]) {
						nodes[col] = append(nodes[col], nil)
					}
					if nodes[col][lvl].add(i) {
						c.nodes++
					}
					if i == 0 {
						break
					}
				}
				c.Blocks++
				taken[col]++
				if used := min(rows, (bi+1)*per) - bi*per; used > 0 {
					c.SeedBytes += int64(used * rb)
					c.Copies++
					if bi != last[col]+1 {
						c.alone++ // its metadata and pages are cold: no copy led to it
					}
					last[col] = bi
					if t := &cp.cols[col]; bi < t.n && t.get(bi).Untouched() {
						unread += int64(used * rb) // its pages fault on this first read
					}
				}
			}
			if d.step == nil {
				c.Copies += copies(d.from, d.to, per)
			} else if d.step.verify {
				c.reads += (x.entries[j].rows + per - 1) / per // one read per block (hashRows)
			}
		}
		if d.step != nil && d.step.verify {
			c.readBytes += d.step.state
		}
		c.DeltaBytes += d.replayBytes()
		rows = x.entries[j].rows
	}
	var grow time.Duration
	c.NewBytes, grow = e.newBytes(taken)
	c.NewBytes += unread
	if !pr.known {
		return c
	}
	c.model = pr.model.estimate(&c, len(h.rowBytes))
	c.newCost = time.Duration(float64(c.NewBytes-unread)*pr.model.NewPerByte+float64(unread)*pr.model.NewReadPerByte) + grow
	mid, _, _, _ := pr.f.scale()
	c.Estimate = time.Duration(float64(c.model)*mid) + c.newCost + c.Replayed
	return c
}

// scratch returns candidate's counts, per column, emptied: the blocks
// taken, per level the nodes copied, the blocks taken, and the block
// seeded last (-2: none).
func (e *estimator) scratch() ([]bitset, [][]bitset, []int64, []int) {
	n := len(e.h.perBlock)
	switch {
	case len(e.touched) == n:
	case n <= len(e.in.touched):
		e.touched, e.nodes, e.taken, e.last = e.in.touched[:n], e.in.nodes[:n], e.in.taken[:n], e.in.last[:n]
	default:
		e.touched, e.nodes, e.taken, e.last = make([]bitset, n), make([][]bitset, n), make([]int64, n), make([]int, n)
	}
	for col := range n {
		clear(e.touched[col])
		for _, lvl := range e.nodes[col] {
			clear(lvl)
		}
		e.taken[col], e.last[col] = 0, -2
	}
	return e.touched, e.nodes, e.taken, e.last
}

// newBytes returns the bytes of memory new to the pool that the blocks
// taken, taken[col] of each column, touch, and the cost of the growths of
// the pool that make them (each makes a slab's worth of blocks, of which
// the reconstruction, taking one block at a time, may use one). A class's
// blocks come from the free blocks that held rows first, which are not
// new; then from its clean blocks, which are: counted by their bytes (a
// class's new blocks follow the ones it carved last, so their first page
// may be touched already, and whole pages would count it twice), or, when
// the first of them follows a block a holder wrote, as the pages that
// start at or after it (the one it starts inside is touched: a page
// faults once, whichever block touches it first); then from growths. A
// growth is priced at the median time of the class's last growths once it
// grew a few times (blocks.Free.GrowTime: calibration times one, and
// twelve calibrations' came out 0.4-1.7x their median), else at the
// model's NewGrowth.
func (e *estimator) newBytes(taken []int64) (bytes int64, grow time.Duration) {
	h, pr, free := e.h, &e.pricing, e.free
	need := map[*sizeClass]int64{}
	for col, n := range taken {
		need[h.cls[col]] += n
	}
	for cls, n := range need {
		f := free[cls]
		k := max(0, n-f.Used)
		if k == 0 {
			continue
		}
		bb := int64(cls.Bytes())
		clean := min(k, f.Clean)
		if f.afterWritten { // implies HasNext
			start := int64(f.Next)
			first := (start + newPage - 1) &^ (newPage - 1) // the first page it starts
			bytes += max(0, (start+clean*bb-first+newPage-1)&^(newPage-1))
		} else {
			bytes += clean * bb
		}
		bytes += (k - clean) * bb
		if g := k - f.Clean; g > 0 && f.Grow > 0 {
			each := f.GrowTime
			if each == 0 {
				each = pr.model.NewGrowth
			}
			grow += time.Duration((g+f.Grow-1)/f.Grow) * each
		}
	}
	return bytes, grow
}

// price sets what h's candidates are priced by: the cost model of its
// largest blocks' class, measured on first use. A pool that had no room
// to measure it prices nothing (known false).
func (e *estimator) price(op string) error {
	h, calib := e.h, &e.h.pool.calib
	cls := e.fitSizeClass()
	e.pricing = pricing{f: calib.fitFor(cls.Bytes()), step: h.hist.stepTime(), free: map[*sizeClass]classFree{}}
	m, err := calib.classModel(h.pool, h, cls)
	switch {
	case err == nil:
		e.model, e.known = m, true
	case !errors.Is(err, ErrNoMemory):
		return h.errorf(op, "calibrating the cost model: %w", err)
	}
	for _, c := range h.cls {
		e.free[c] = e.freeBlocks(c)
	}
	return nil
}

// fitClass is the size class whose fit serves h: that of its largest
// blocks, which carry most of a reconstruction's bytes.
func (e *estimator) fitClass() int { return slices.Max(e.h.blockBytes) }

// fitSizeClass is the size class of fitClass.
func (e *estimator) fitSizeClass() *sizeClass {
	best := e.h.cls[0]
	for _, c := range e.h.cls {
		if c.Bytes() > best.Bytes() {
			best = c
		}
	}
	return best
}

// freeBlocks returns what class c has free (blocks.Free), and whether the
// blocks below the next clean one in memory were written (afterWritten):
// a class carves new blocks only once its clean list is empty, so the
// blocks below the next one were all taken, and every allocation but a
// zeroed one writes what it takes (a zeroed one leaves its blocks
// Untouched). Only a class no zeroed allocation took from is known to be
// written below.
func (e *estimator) freeBlocks(c *sizeClass) classFree {
	f := e.h.pool.mem.FreeCounts(c)
	return classFree{Free: f, afterWritten: f.HasNext && !c.ZeroTaken()}
}

// classFree is what freeBlocks returns.
type classFree struct {
	blocks.Free
	afterWritten bool
}

// Untouched blocks: a block taken zeroed from the clean list is priced as
// a first read (its pages fault, on the host backend) only while nothing
// touched it (Block.Untouched, docs/INTERNALS.md). Every path that reads or
// writes a head's blocks says so with Block.Touch: reads (Read, ReadRows,
// the spans handed to kernels and step functions), writes in place and
// copies on write (writeTx.touchOld), and a reconstruction's seed copies.
// Touch loads first, so that the common case writes nothing.

// stepTime returns the expected time of one replayed step: the median of
// the times the history's steps took when they ran (so that a step that
// paid for something besides its rows, memory new to the pool or a cold
// start, does not price the others), scaled by the history's replays
// measured since (stepFit).
func (x *history) stepTime() time.Duration {
	mid, _, _, _ := x.stepFit.scale()
	return time.Duration(float64(x.stepMedian()) * mid)
}

// stepMedian returns the median of the times the history's steps took
// when they ran.
func (x *history) stepMedian() time.Duration {
	ts := x.took[:0]
	for _, e := range x.entries {
		if e.d != nil && e.d.step != nil {
			ts = append(ts, e.d.step.took)
		}
	}
	x.took = ts
	if len(ts) == 0 {
		return 0
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}

// observe refines the estimates by a reconstruction At performed by plan
// pl, whose replayed steps took replayed: the history's fit of replayed
// steps, and the pool's fit of h's size class with the rest (new memory
// left out, which the model prices apart). A plan the pool could not price
// refines nothing.
func (e *estimator) observe(pl *planned, replayed time.Duration) {
	h := e.h
	if pl.Unmeasured {
		return
	}
	c := &pl.Candidate
	if c.Steps > 0 {
		h.hist.stepFit.observe(time.Duration(c.Steps)*h.hist.stepMedian(), replayed)
	}
	h.pool.calib.observe(e.fitClass(), pl.model, pl.newCost, pl.Measured-replayed)
}

// plan returns the plan for version v and the index of its entry, and
// sets the pricing it was priced by. h.mu is held.
func (e *estimator) plan(op string, v Version) (planned, int, error) {
	h := e.h
	if h.hist == nil {
		return planned{}, 0, h.errorf(op, "%s keeps no checkpoints: %w", h.l.Type, ErrNotRetained)
	}
	t := h.hist.find(v)
	if t < 0 {
		return planned{}, 0, h.errorf(op, "version %d is not in the retained history of the head's line: %w", v, ErrNotRetained)
	}
	if err := e.price(op); err != nil {
		return planned{}, 0, err
	}
	pr := &e.pricing
	cs := e.candidates(t)
	if len(cs) == 0 {
		return planned{}, 0, h.errorf(op, "version %d: a delta before it was not retained: %w", v, ErrNotRetained)
	}
	alts := make([]Candidate, len(cs)-1)
	for i := range alts {
		alts[i] = cs[i+1].Candidate
	}
	pl := planned{Plan: Plan{Target: v, Candidate: cs[0].Candidate, Alternatives: alts, Observed: pr.f.n}, cost: cs[0].cost}
	pl.Unmeasured = !pr.known || (pl.NewBytes > 0 && !pr.model.NewKnown)
	if pl.Unmeasured {
		pl.Estimate, pl.model, pl.newCost = 0, 0, 0
		for i := range alts {
			alts[i].Estimate = 0
		}
		return pl, t, nil
	}
	if _, lo, hi, known := pr.f.scale(); known {
		// Replayed steps spread as the history's replays did, when it
		// measured three.
		sLo, sHi := 1.0, 1.0
		if mid, l, u, ok := h.hist.stepFit.scale(); ok {
			sLo, sHi = l/mid, u/mid
		}
		pl.Low = time.Duration(float64(pl.model)*lo+float64(pl.Replayed)*sLo) + pl.newCost
		pl.High = time.Duration(float64(pl.model)*hi+float64(pl.Replayed)*sHi) + pl.newCost
	}
	return pl, t, nil
}

// at is At with h's call begun: it reconstructs version v by its plan and
// refines the estimates by the time it took. The snapshot is a member of
// cut, when not nil (Group.At).
func (e *estimator) at(v Version, cut *snapCut) (*Snap, error) {
	h := e.h
	p, t, err := e.plan("At", v)
	if err != nil {
		return nil, err
	}
	x := h.hist
	q := t
	for x.entries[q].pos.v != p.Checkpoint || x.entries[q].cp == nil {
		q--
	}
	x.replayed = 0
	start := monotonic()
	r, err := x.reconstruct(h, q, t)
	if err != nil {
		return nil, h.errorf("At", "version %d: %w", v, err)
	}
	p.Measured = monotonic() - start
	e.observe(&p, x.replayed)
	h.lin.mu.Lock()
	s := &Snap{shape: h.shape, gate: h.gate, lin: h.lin, r: r, pos: capture(x.entries[t].pos), cut: cut}
	s.logical = h.logicalOf(r)
	h.lin.snaps.add(s)
	h.pool.register(s, s.gate, &s.inPool)
	h.lin.mu.Unlock()
	x.last = &p.Plan
	return s, nil
}
