package state

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The cost model: what a pool measures of its backend once, for Plan and
// At to estimate the cost of a reconstruction (see checkpoint.go).

// CostModel is what a pool measured of its backend once, to estimate
// reconstruction costs: a device-to-device copy of n bytes costs
// CopyFixed + n*CopyPerByte, a block taken (copied on write or added)
// costs Block besides its copy, applying one column of one delta costs
// PerDelta besides its copies, and every reconstruction Fixed. The figures
// are measured on memory the CPU's caches do not hold, as a reconstruction
// of a past version finds it.
type CostModel struct {
	CopyFixed   time.Duration
	CopyPerByte float64 // nanoseconds per byte
	Block       time.Duration
	PerDelta    time.Duration
	Fixed       time.Duration
}

func (m CostModel) estimate(c *Candidate, columns int) time.Duration {
	ns := float64(m.Fixed) + float64(c.Copies)*float64(m.CopyFixed) +
		float64(c.SeedBytes+c.DeltaBytes)*m.CopyPerByte + float64(c.Blocks)*float64(m.Block) +
		float64(c.Deltas*columns)*float64(m.PerDelta)
	return time.Duration(ns)
}

// CostModel returns the pool's cost model, measuring the backend on first
// use.
func (p *Pool) CostModel() (CostModel, error) {
	if err := p.enter(); err != nil {
		return CostModel{}, fmt.Errorf("state: CostModel: %w", err)
	}
	defer p.leave()
	return p.costModel()
}

type calibration struct {
	mu    sync.Mutex
	done  bool
	model CostModel
	fits  map[int]*fit // the model against measured reconstructions, per size class (bytes)
}

// A fit refines the calibrated model by the reconstructions At measured
// of states whose largest blocks are of one size class:
// a moving estimate (weight fitWeight) of the log of measured time over
// the model's estimate, and of its variance, from n measurements. The
// measured time of replayed steps is the steps' own, not the model's, and
// is left out of both.
type fit struct {
	mean, vari float64
	n          int
}

const (
	fitWeight = 0.25
	// fitKnown is the measurements a spread needs before Plan reports it.
	fitKnown = 3
)

// observe adds a reconstruction whose model estimate was model (the copy
// part, steps left out) and whose copies took measured.
func (f *fit) observe(model, measured time.Duration) {
	if model <= 0 || measured <= 0 {
		return
	}
	x := math.Log(float64(measured) / float64(model))
	x = max(-10, min(10, x))
	if f.n == 0 {
		f.mean = x
	} else {
		d := x - f.mean
		f.mean += fitWeight * d
		f.vari = (1 - fitWeight) * (f.vari + fitWeight*d*d)
	}
	f.n++
}

// scale returns the factors the model's estimate is multiplied by: the
// expected one and the low and high ends of two deviations, and whether
// enough reconstructions were measured to know the spread.
func (f fit) scale() (mid, lo, hi float64, known bool) {
	if f.n == 0 {
		return 1, 0, 0, false
	}
	sd := math.Sqrt(f.vari)
	return math.Exp(f.mean), math.Exp(f.mean - 2*sd), math.Exp(f.mean + 2*sd), f.n >= fitKnown
}

// fitClass is the size class whose fit serves h: that of its largest
// blocks, which carry most of a reconstruction's bytes.
func (h *Head) fitClass() int { return slices.Max(h.blockBytes) }

// fitFor returns the pool's fit for size class cls (bytes).
func (p *Pool) fitFor(cls int) fit {
	p.calib.mu.Lock()
	defer p.calib.mu.Unlock()
	if f := p.calib.fits[cls]; f != nil {
		return *f
	}
	return fit{}
}

// observe refines the fit of size class cls with a reconstruction
// performed by plan c that took measured in all.
func (p *Pool) observe(cls int, c *Candidate, measured time.Duration) {
	p.calib.mu.Lock()
	defer p.calib.mu.Unlock()
	if p.calib.fits == nil {
		p.calib.fits = make(map[int]*fit)
	}
	f := p.calib.fits[cls]
	if f == nil {
		f = &fit{}
		p.calib.fits[cls] = f
	}
	f.observe(c.model, measured-c.Replayed)
}

// costModel returns the pool's cost model, measuring it on first use. A
// measurement that fails (the pool has no room for its blocks) is tried
// again on the next use.
func (p *Pool) costModel() (CostModel, error) {
	p.calib.mu.Lock()
	defer p.calib.mu.Unlock()
	if !p.calib.done {
		m, err := p.calibrate()
		if err != nil {
			return CostModel{}, err
		}
		p.calib.model, p.calib.done = m, true
	}
	return p.calib.model, nil
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
// them, on memory the CPU's caches do not hold (it streams through a
// buffer larger than them before each measurement): device copies of a few
// bytes and of whole blocks between distinct blocks, a synthetic
// reconstruction of one-row deltas into one block, which gives the cost of
// a delta, and blocks taken into a tree and given back.
func (p *Pool) calibrate() (CostModel, error) {
	c, err := p.newCalibrator()
	if err != nil {
		return CostModel{}, err
	}
	defer c.close()
	var m CostModel
	for _, measure := range []func(*CostModel) error{c.measureCopies, c.measureDelta, c.measureBlock} {
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
	p        *Pool
	n        int
	blks     []*block // src, then dst
	src, dst []*block
	evict    []byte
}

// newCalibrator takes 2n blocks: n is 64, or fewer in a fuller pool.
// It takes only blocks the pool has room for as it is: calibration never
// reclaims, so it never evicts a handle's state nor waits for one.
func (p *Pool) newCalibrator() (*calibrator, error) {
	var blks []*block
	var err error
	n := 64
	for ; ; n /= 2 {
		// 3n: measureBlock takes n more, which it finds free again.
		if blks, err = p.allocOnce(nil, p.own, calibrationOwner, 3*n, false); err == nil || n <= 1 || !errors.Is(err, ErrNoMemory) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var freed []*block
	for _, b := range blks[2*n:] {
		releaseBlock(b, &freed)
	}
	p.free(freed)
	blks = blks[:2*n]
	c := &calibrator{p: p, n: n, blks: blks, src: blks[:n], dst: blks[n:]}
	if p.b.Name() == "host" {
		c.evict = coldBuffer()
	}
	return c, nil
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
	b, err := c.p.allocOnce(nil, cls, calibrationOwner, 1, false)
	if err != nil {
		return nil, err
	}
	return b[0], nil
}

// median returns the median time per step of seven cold runs of steps.
func (c *calibrator) median(steps int, run func() error) (time.Duration, error) {
	var runs [7]time.Duration
	for i := range runs {
		c.cold()
		start := time.Now()
		if err := run(); err != nil {
			return 0, err
		}
		if err := c.p.b.Sync(); err != nil {
			return 0, err
		}
		runs[i] = time.Since(start) / time.Duration(steps)
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
	tBig, err := c.median(c.n, c.copyEach(c.p.blockBytes))
	if err != nil {
		return err
	}
	m.CopyFixed = tSmall
	if tBig > tSmall {
		m.CopyPerByte = float64(tBig-tSmall) / float64(c.p.blockBytes-calibRowBytes)
	}
	return nil
}

// measureDelta sets PerDelta from a synthetic reconstruction: a state of
// one column of 64-byte rows, the n source blocks as its checkpoint, and n
// one-row deltas (the destination blocks), all into the checkpoint's first
// block. Per delta it costs one copy of a row (and one block over all).
func (c *calibrator) measureDelta(m *CostModel) error {
	p := c.p
	// Blocks of the pool's own size, those of c.src and c.dst.
	l := &Layout{Type: "calibration", Columns: []Column{{ElemSize: 1, Width: calibRowBytes}}, BlockRows: p.blockBytes / calibRowBytes}
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

// measureBlock sets Block from blocks taken from the pool, put into a
// tree by path copying, and given back when the tree is released.
func (c *calibrator) measureBlock(m *CostModel) error {
	var err error
	m.Block, err = c.median(c.n, func() error {
		r := newRoot(1)
		var freed []*block
		for i := range c.n {
			b, err := c.take(c.p.own)
			if err != nil {
				r.release(&freed)
				c.p.free(freed)
				return err
			}
			r.cols[0].set(i, b, &freed)
		}
		r.release(&freed)
		c.p.free(freed)
		return nil
	})
	return err
}
