package store

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The cost model: what a pool measures of its backend once, for Plan and
// At to estimate the cost of a reconstruction (see checkpoint.go).

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

// costModel returns pool p's cost model (c is p.calib), measuring it on
// first use. A measurement that fails (the pool has no room for its
// blocks) is tried again on the next use.
func (c *calibration) costModel(p *Pool) (CostModel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ownModelLocked(p)
}

// ownModelLocked is costModel with c.mu held.
func (c *calibration) ownModelLocked(p *Pool) (CostModel, error) {
	if !c.done {
		k, err := newCalibrator(p, p.own)
		if err != nil {
			return CostModel{}, err
		}
		m, err := k.calibrate(nil)
		if err != nil {
			return CostModel{}, err
		}
		c.model, c.done = m, true
	}
	return c.model, nil
}

// classModel returns the cost model of pool p's size class cls, measuring
// it (and the pool's own first) on first use.
func (c *calibration) classModel(p *Pool, cls *sizeClass) (CostModel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	own, err := c.ownModelLocked(p)
	if err != nil || cls == p.own || own.BlockBytes == 0 {
		return own, err // a model of no class (set, not measured) serves all
	}
	if m := c.classes[cls.Bytes()]; m != nil {
		return *m, nil
	}
	k, err := newCalibrator(p, cls)
	if err != nil {
		return CostModel{}, err
	}
	m, err := k.calibrate(&own)
	if err != nil {
		return CostModel{}, err
	}
	if c.classes == nil {
		c.classes = make(map[int]*CostModel)
	}
	c.classes[cls.Bytes()] = &m
	if m.NewKnown && !own.NewKnown {
		// New memory is the pool's, whichever class measured it.
		for _, o := range append([]*CostModel{&c.model}, slices.Collect(maps.Values(c.classes))...) {
			o.NewPerByte, o.NewGrowth, o.NewKnown = m.NewPerByte, m.NewGrowth, true
			o.NewReadPerByte = m.NewReadPerByte
		}
	}
	return m, nil
}

// calibrationOwner owns the blocks the calibration takes. Its rows are
// copies of zeroed blocks and of its own earlier rows, and it gives its
// blocks back dirty, so another owner gets them zeroed like any other
// owner's. A user's owner of the same name would share its free list, and
// so only ever find its own rows or zeros there.
const calibrationOwner Owner = "state: cost model calibration"

// calibRowBytes is the row size of the calibration's synthetic state.
const calibRowBytes = 64

// calibrate measures the backend and the store as a reconstruction uses
// them, in the calibrator's blocks (of its class), on memory the CPU's caches do not hold (it
// streams through a buffer larger than them before each measurement):
// device copies of a few bytes and of whole blocks between distinct
// blocks, a synthetic reconstruction of one-row deltas into one block,
// which gives the cost of a delta, and blocks taken into a tree and given
// back. With pool nil it measures the pool-wide figures too: copies to and
// from the host, and, when its blocks are memory new to the pool, the
// first touch of new memory; else it takes them from pool. It gives the
// calibrator's blocks back.
func (c *calibrator) calibrate(pool *CostModel) (CostModel, error) {
	defer c.close()
	// Nodes are made new while it runs, as a reconstruction's are
	// (applyDeltaWith, tree.setNew). Measured on nodes reused, a node
	// copied cost 0.7 µs against 2.2, and the calibration's other figures
	// fell too, while a reconstruction with few nodes took as long either
	// way: a 16-row one's estimate fell to 0.7-0.8 of its time.
	calibrating.Add(1)
	defer calibrating.Add(-1)
	m := CostModel{BlockBytes: c.cls.Bytes()}
	measures := []func(*CostModel) error{c.measureCopies, c.measureDelta, c.measureBlock, c.measureNode}
	if pool == nil {
		measures = append([]func(*CostModel) error{c.measureNew}, append(measures, c.measureHost)...)
	} else {
		m.HtoD, m.DtoH = pool.HtoD, pool.DtoH
		m.NewPerByte, m.NewGrowth, m.NewKnown = pool.NewPerByte, pool.NewGrowth, pool.NewKnown
		m.NewReadPerByte = pool.NewReadPerByte
		if !pool.NewKnown {
			measures = append(measures, c.measureNew) // when these blocks are new
		}
	}
	for _, measure := range measures {
		if err := measure(&m); err != nil {
			return CostModel{}, err
		}
	}
	m.Fixed = m.Block
	return m, nil
}

// calibrator holds what the measurements share: n source blocks, n
// destination blocks, and the buffer that evicts the CPU's caches.
type calibrator struct {
	p         *Pool
	cls       *sizeClass
	n         int
	blks      []*block // src, then dst
	src, dst  []*block
	evict     []byte
	fresh     bool            // the blocks are memory new to the pool
	grow      time.Duration   // with fresh: the growth that made them
	firsts    []time.Duration // the blocks' first writes, per block, in parts
	firstRead time.Duration   // the sources' first read, per block
}

// newPage is the unit new memory is touched in: a page of the host
// backend. Calibration spaces its blocks this far apart.
const newPage = 4096

// calibBytes bounds the bytes of the n blocks a calibration copies.
const calibBytes = 1 << 20

// newCalibrator takes 2n blocks of pool p's class cls: n is 64, or fewer in a
// fuller pool or of large blocks (calibBytes). It takes only blocks the pool has room for as it is:
// calibration never reclaims, so it never evicts a handle's state nor
// waits for one.
func newCalibrator(p *Pool, cls *sizeClass) (*calibrator, error) {
	var blks []*block
	var err error
	before := p.Stats().ReservedBytes
	// Blocks a page apart, as a large state's blocks lie: every copy
	// finds its block's page cold, as in a reconstruction.
	stride := max(1, (newPage+cls.Bytes()-1)/cls.Bytes())
	n := max(1, min(64, calibBytes/(stride*cls.Bytes())))
	var took time.Duration
	for {
		// 3n: measureBlock takes n more, which it finds free again.
		start := p.calibNow()
		blks, err = p.allocOnce(nil, cls, calibrationOwner, 3*n*stride, false)
		took = p.calibNow().Sub(start)
		if err == nil || !errors.Is(err, ErrNoMemory) {
			break
		}
		if n > 1 {
			n /= 2
		} else if stride > 1 {
			stride = 1
		} else {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	grown := p.Stats().ReservedBytes - before
	used := make([]*block, 0, 2*n)
	var rest []*block
	for i, b := range blks {
		if i%stride == 0 && len(used) < 2*n {
			used = append(used, b)
		} else {
			rest = append(rest, b)
		}
	}
	c := &calibrator{p: p, cls: cls, n: n, blks: used, src: used[:n], dst: used[n:], fresh: grown >= int64(len(blks)*cls.Bytes())}
	if c.fresh {
		c.grow = took
	}
	if p.b.Name() == "host" {
		c.evict = coldBuffer()
	}
	// Every block is written once before use, and so is every block given
	// back: an allocation that finds them free never pays their first
	// touch, which Plan prices for memory new to the pool only. The
	// sources are first read, untouched, into the touched destinations.
	c.firsts, err = c.touch(slices.DeleteFunc(slices.Clone(blks), func(b *block) bool { return slices.Contains(c.src, b) }))
	if err == nil {
		c.firstRead, err = c.firstReads()
	}
	if err == nil {
		err = c.fill(c.src)()
	}
	var freed []*block
	for _, b := range rest {
		releaseBlock(b, &freed)
	}
	p.free(freed)
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// touch writes the blocks, in up to touchParts parts, and returns the
// time per block each part took.
func (c *calibrator) touch(blks []*block) ([]time.Duration, error) {
	parts := min(touchParts, len(blks))
	out := make([]time.Duration, parts)
	for i := range out {
		part := blks[i*len(blks)/parts : (i+1)*len(blks)/parts]
		c.cold()
		var err error
		if out[i], err = c.timed(len(part), c.fill(part)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// firstReads copies each source block, untouched, to its destination, in
// up to touchParts parts, and returns the median time per block of the
// parts: a first read happens once, and one timing of it all came out
// twice the others now and then (NewReadPerByte of 5.7 against 2.7-3.0).
func (c *calibrator) firstReads() (time.Duration, error) {
	parts := min(touchParts, c.n)
	ts := make([]time.Duration, parts)
	for i := range ts {
		lo, hi := i*c.n/parts, (i+1)*c.n/parts
		c.cold()
		var err error
		ts[i], err = c.timed(hi-lo, func() error {
			for k := lo; k < hi; k++ {
				if err := c.p.b.CopyDtoD(c.dst[k].Ptr(), c.src[k].Ptr(), c.cls.Bytes()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	slices.Sort(ts)
	return ts[(len(ts)-1)/2], nil
}

// touchParts is the number of parts touch times: the median of several,
// so that one the scheduler interrupted does not price new memory.
const touchParts = 6

// fill returns a run that zeroes the blocks.
func (c *calibrator) fill(blks []*block) func() error {
	return func() error {
		for _, b := range blks {
			if err := c.p.b.Memset(b.Ptr(), 0, c.cls.Bytes()); err != nil {
				return err
			}
		}
		return nil
	}
}

// coldBytes is the size of the buffer calibration streams through to
// empty the CPU's caches: larger than the last-level cache of the
// machines the host backend serves.
const coldBytes = 32 << 20

// coldOnce makes the buffer and writes it once, so that its pages are
// its own (untouched pages may all map one zero page); calibrations then
// only read it, and may share it.
var coldOnce = sync.OnceValue(func() []byte {
	b := make([]byte, coldBytes)
	for i := 0; i < len(b); i += 64 {
		b[i] = byte(i >> 6)
	}
	return b
})

// coldBuffer returns the process's one cache-evicting buffer, made on
// first use: every pool's calibration shares it. Only the host backend
// needs it; a device's memory is in none of the CPU's caches.
func coldBuffer() []byte { return coldOnce() }

// close gives the calibrator's blocks back.
func (c *calibrator) close() {
	var freed []*block
	for _, b := range c.blks {
		releaseBlock(b, &freed)
	}
	c.p.free(freed)
}

// cold streams through the evict buffer, so that the CPU's caches hold
// none of the blocks.
func (c *calibrator) cold() {
	var sum byte
	for i := 0; i < len(c.evict); i += 64 {
		sum += c.evict[i]
	}
	coldSink.Store(uint32(sum))
}

// coldSink keeps cold's reads from being optimized away.
var coldSink atomic.Uint32

// take is the block allocation of calibration: room the pool has now,
// never reclaimed.
func (c *calibrator) take(cls *sizeClass) (*block, error) {
	var one [1]*block // on the stack: see measureBlock
	b, err := c.p.allocOnce(one[:0], cls, calibrationOwner, 1, false)
	if err != nil {
		return nil, err
	}
	return b[0], nil
}

// now reads the calibration's clock.
func (c *calibrator) now() time.Time { return c.p.calibNow() }

// timed returns the time per step of one run of steps, synced.
func (c *calibrator) timed(steps int, run func() error) (time.Duration, error) {
	start := c.now()
	if err := run(); err != nil {
		return 0, err
	}
	if err := c.p.b.Sync(); err != nil {
		return 0, err
	}
	return c.now().Sub(start) / time.Duration(steps), nil
}

// median returns the median time per step of five cold runs of steps.
func (c *calibrator) median(steps int, run func() error) (time.Duration, error) {
	var runs [5]time.Duration
	for i := range runs {
		c.cold()
		t, err := c.timed(steps, run)
		if err != nil {
			return 0, err
		}
		runs[i] = t
	}
	slices.Sort(runs[:])
	return runs[len(runs)/2], nil
}

// copyEach returns a run that copies bytes from each source block to its
// destination block.
func (c *calibrator) copyEach(bytes int) func() error {
	return func() error {
		for i := range c.n {
			if err := c.p.b.CopyDtoD(c.dst[i].Ptr(), c.src[i].Ptr(), bytes); err != nil {
				return err
			}
		}
		return nil
	}
}

// measureCopies sets CopyFixed and CopyPerByte from copies of a row and of
// a block.
func (c *calibrator) measureCopies(m *CostModel) error {
	tSmall, err := c.median(c.n, c.copyEach(calibRowBytes))
	if err != nil {
		return err
	}
	tBig, err := c.median(c.n, c.copyEach(c.cls.Bytes()))
	if err != nil {
		return err
	}
	m.CopyFixed, m.CopyPerByte = line(tSmall, tBig, c.cls.Bytes())
	// One copy at a time, caches emptied before each, from a different
	// block each time.
	var alone [copiesAlone]time.Duration
	for i := range alone {
		k := i * c.n / len(alone)
		c.cold()
		alone[i], err = c.timed(1, func() error {
			return c.p.b.CopyDtoD(c.dst[k].Ptr(), c.src[k].Ptr(), calibRowBytes)
		})
		if err != nil {
			return err
		}
	}
	slices.Sort(alone[:])
	m.CopyAlone = max(m.CopyFixed, alone[len(alone)/2]-time.Duration(calibRowBytes*m.CopyPerByte))
	return nil
}

// copiesAlone is the number of copies measureCopies times one at a time.
const copiesAlone = 7

// line returns the fixed cost and the cost per byte of a copy that took
// small for calibRowBytes bytes and big for bytes.
func line(small, big time.Duration, bytes int) (time.Duration, float64) {
	if bytes <= calibRowBytes || big <= small {
		return small, 0
	}
	per := float64(big-small) / float64(bytes-calibRowBytes)
	return max(0, small-time.Duration(per*calibRowBytes)), per
}

// measureHost sets HtoD and DtoH from copies of a row and of a block
// between the blocks and a host buffer.
func (c *calibrator) measureHost(m *CostModel) error {
	buf := make([]byte, c.cls.Bytes())
	for _, dir := range []struct {
		t    *Transfer
		copy func(b *block, n int) error
	}{
		{&m.HtoD, func(b *block, n int) error { return c.p.b.CopyHtoD(b.Ptr(), buf[:n]) }},
		{&m.DtoH, func(b *block, n int) error { return c.p.b.CopyDtoH(buf[:n], b.Ptr()) }},
	} {
		var ts [2]time.Duration
		for i, n := range []int{calibRowBytes, c.cls.Bytes()} {
			var err error
			ts[i], err = c.median(c.n, func() error {
				for _, b := range c.dst {
					if err := dir.copy(b, n); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		dir.t.Fixed, dir.t.PerByte = line(ts[0], ts[1], c.cls.Bytes())
	}
	return nil
}

// measureNew sets NewPerByte when the calibrator's blocks are memory new
// to the pool: the median of their first writes (newCalibrator, per part)
// against that of writes again, all with the CPU's caches cold.
func (c *calibrator) measureNew(m *CostModel) error {
	if !c.fresh {
		return nil
	}
	again, err := c.median(c.n, c.fill(c.dst))
	if err != nil {
		return err
	}
	read, err := c.median(c.n, c.copyEach(c.cls.Bytes()))
	if err != nil {
		return err
	}
	f := slices.Clone(c.firsts)
	slices.Sort(f)
	first := f[(len(f)-1)/2]
	bb := float64(c.cls.Bytes())
	m.NewPerByte, m.NewGrowth, m.NewKnown = max(0, float64(first-again)/bb), c.grow, true
	m.NewReadPerByte = max(0, float64(c.firstRead-read)/bb)
	return nil
}

// measureDelta sets PerDelta from a synthetic reconstruction: a state of
// one column of 64-byte rows, the n source blocks as its checkpoint, and n
// one-row deltas (the destination blocks), all into the checkpoint's first
// block. Per delta it costs one copy of a row (and one block over all).
func (c *calibrator) measureDelta(m *CostModel) error {
	p := c.p
	// Blocks of the calibrated class, those of c.src and c.dst.
	l := &Layout{Type: "calibration", Columns: []Column{{ElemSize: 1, Width: calibRowBytes}}, BlockRows: c.cls.Bytes() / calibRowBytes}
	h := &Head{shape: newShape(p, l, calibrationOwner)}
	var freed []*block
	base := newRoot(1)
	for i, b := range c.src {
		b.Retain()
		base.cols[0].set(i, b, &freed)
	}
	base.rows = c.n * h.perBlock[0]
	defer func() {
		base.release(&freed)
		p.free(freed)
	}()
	deltas := make([]*delta, c.n)
	for i := range deltas {
		deltas[i] = &delta{from: i, to: i + 1, cols: [][]*block{{c.dst[i]}}, per: []int{h.perBlock[0]}, bytes: calibRowBytes}
	}
	tSame, err := c.median(c.n, func() error {
		r := base.retain()
		var err error
		for _, d := range deltas {
			if r, err = h.applyDeltaWith(r, d, base.rows, c.take); err != nil {
				break
			}
		}
		var freed []*block
		r.release(&freed)
		p.free(freed)
		return err
	})
	if err != nil {
		return err
	}
	m.PerDelta = time.Duration(max(0, float64(tSame)-float64(m.CopyFixed)-calibRowBytes*m.CopyPerByte))
	return nil
}

// measureNode sets Node from paths copied in a tree of calibNodes leaves,
// one leaf each: the tree holds block records of its own, which no pool
// allocation ever returns and nothing frees (each keeps a reference
// besides the tree's).
func (c *calibrator) measureNode(m *CostModel) error {
	recs := make([]block, calibNodes*fan)
	base := newRoot(1)
	var freed []*block
	for i := range recs {
		recs[i].SetRefs(2)
		base.cols[0].set(i, &recs[i], &freed)
	}
	defer base.release(&freed)
	var err error
	m.Node, err = c.median(calibNodes, func() error {
		r := base.retain().own(&freed)
		for k := range calibNodes {
			b := &recs[k*fan+k%fan]
			b.Retain()
			r.cols[0].set(k*fan+k%fan, b, &freed)
		}
		r.release(&freed)
		return nil
	})
	return err
}

// calibNodes is the number of leaves measureNode copies.
const calibNodes = 64

// measureBlock sets Block from blocks taken from the pool, each put in a
// slot of a tree whose path is the tree's alone (as a reconstruction's is
// once it copied it) in place of the block there, and given back when the
// next run replaces it. The tree and the list of freed blocks are made
// once, before the runs: the runs allocate nothing on the Go heap, whose
// growth into new pages (faults inside a run that came or not as the
// heap's spans ran out) is no cost of the store's, and made Block vary by
// five times from one calibration to the next.
func (c *calibrator) measureBlock(m *CostModel) error {
	r := newRoot(1)
	freed := make([]*block, 0, c.n)
	for i, b := range c.dst {
		b.Retain() // the tree's reference: replacing it frees nothing
		r.cols[0].set(i, b, &freed)
	}
	defer func() {
		r.release(&freed)
		c.p.free(freed)
	}()
	run := func() error {
		for i := range c.n {
			b, err := c.take(c.cls)
			if err != nil {
				return err
			}
			r.cols[0].set(i, b, &freed)
		}
		c.p.free(freed)
		freed = freed[:0]
		return nil
	}
	if err := run(); err != nil { // the slots hold taken blocks now
		return err
	}
	var err error
	m.Block, err = c.median(c.n, run)
	return err
}
