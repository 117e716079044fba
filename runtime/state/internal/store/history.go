package store

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// candidate is a Candidate with the store's pricing of it.
type candidate struct {
	Candidate
	cost
}

// cost is what the store's pricing of a candidate keeps besides Candidate.
type cost struct {
	model   time.Duration // the calibrated model's estimate, new memory and steps left out
	newCost time.Duration // the cost of NewBytes
	// reads counts the copies to the host (verified steps' hashes),
	// readBytes their bytes (part of DeltaBytes).
	reads     int
	readBytes int64
	nodes     int // tree nodes copied on the paths to the blocks taken
	alone     int // seed copies from a block not next to the one seeded before (CostModel.CopyAlone)
}

// planned is a Plan with the pricing of its chosen candidate, which At
// refines the cost model by once it measured the reconstruction.
type planned struct {
	Plan
	cost
}

type delta struct {
	from, to int         // rows written
	cols     [][]*block  // per column, rows [from, to) packed from the first block
	per      []int       // per column, rows per block of cols
	bytes    int64       // bytes of the rows
	step     *stepRec    // a version Step made: rows [from, to) are rebuilt by running it again, cols is nil
	ready    *deltaReady // copied in stream order: the copies' event; nil once landed or when copied at once
	// mem is the allocation newDelta made d in (a write's delta of up to
	// four columns), kept for the next one once d's last holder drops it
	// (history.dropDelta); nil for a step's delta and a wider one.
	mem *deltaMem
}

// deltaMem is a delta with room for the usual one in the same allocation:
// its columns, their rows per block and their blocks, for a checkpointed
// decode step's one-row delta of up to four columns.
type deltaMem struct {
	d    delta
	cols [4][]*block
	per  [4]int
	blks [4]*block
}

// deltaMems keeps the deltas whose last holder dropped them (deltaMem.keep),
// for newDelta: a checkpointed state written every step makes a delta a
// step, and each checkpoint past Keep drops as many, so that its writes
// allocate none in steady state. A delta is held by the histories whose
// entries name it, and each holds a reference to every block of it
// (history.clone): the one whose drop frees all of them is the last.
var deltaMems sync.Pool

// newDelta returns a delta of rows [from, to) of ncols columns, and a
// buffer for its blocks: the delta's own room where they fit, a kept one
// where there is one.
func newDelta(from, to, ncols int) (*delta, []*block) {
	if ncols > len(deltaMem{}.cols) {
		return &delta{from: from, to: to, cols: make([][]*block, ncols), per: make([]int, ncols)}, nil
	}
	m, _ := deltaMems.Get().(*deltaMem)
	if m == nil {
		m = &deltaMem{}
	}
	m.d = delta{from: from, to: to, mem: m}
	m.d.cols, m.d.per = m.cols[:ncols:ncols], m.per[:ncols:ncols]
	return &m.d, m.blks[:0]
}

// keep empties m, whose delta's last holder dropped it, and keeps it for
// newDelta.
func (m *deltaMem) keep() {
	*m = deltaMem{}
	deltaMems.Put(m)
}

// deltaReady is the event after the copies of a delta taken in stream
// order (a kernel's rows, copyDelta); the histories that share the delta
// share it, and the last to drop the delta closes it.
type deltaReady struct {
	mu   sync.Mutex
	ev   device.Event // nil once waited for
	refs atomic.Int32
}

// wait waits until d's rows have landed in its blocks; a stream's failure
// is the delta's, for every later wait too.
func (d *delta) wait() error {
	r := d.ready
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ev == nil {
		return nil
	}
	if err := r.ev.Wait(); err != nil {
		return fmt.Errorf("a kernel's rows copied into history: %w", err)
	}
	r.ev.Close()
	r.ev = nil
	return nil
}

// drop gives up one history's hold on r.
func (r *deltaReady) drop() {
	if r.refs.Add(-1) != 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ev != nil {
		r.ev.Close()
		r.ev = nil
	}
}

type entry struct {
	pos  position
	rows int
	d    *delta // the write that made this version; nil: first entry, or a gap
	cp   *root  // a checkpoint of this version, or nil
	// seq orders the commit that made this version among every head's
	// commits (commitSeqs): a group's At finds the other members' versions
	// at the time a member made a version by it.
	seq uint64
}

// commitSeqs numbers commits of every head, in the order they were made.
var commitSeqs atomic.Uint64

type pendingDelta struct {
	from, to int
	seq      uint64 // the commit's, taken when it was made
}

// history is a head's checkpoints and deltas. It is guarded by the head's
// lock.
type history struct {
	policy     CheckpointPolicy
	entries    []entry
	since      int   // versions since the last checkpoint
	sinceBytes int64 // delta bytes since the last checkpoint
	pending    *pendingDelta
	last       *Plan // the last reconstruction At performed
	// replayed sums the time step functions took in replays since At
	// started (replayStep); stepFit is the moving fit of that time
	// against the steps' median time when they ran (stepTime).
	replayed time.Duration
	stepFit  fit
	// held is the pool's count of the bytes of delta blocks
	// (PoolStats.HistoryBytes): added to when a delta is stored, taken from
	// when its blocks' last reference goes.
	held *atomic.Int64
	// copies is copyDelta's batch of device copies, kept for the next.
	copies []device.DeviceCopy
	// replayCols and replaySpans are a replayed step's spans (replayStep),
	// and took the steps' times stepMedian sorts, kept for the next.
	replayCols  [][]device.Span
	replaySpans []device.Span
	took        []time.Duration
	// hostCols are a host step's rows, per column, and the slices it
	// is handed, and hostCopied says which columns are copies (runHost),
	// kept for the next.
	hostCols   [][]byte
	hostCopied []bool
	// free lists the step deltas (with their records and input
	// buffers) no history holds any more, nfree of them, for this
	// history's next steps (newStep); at most as many as the history had
	// entries when it dropped them, so that they stay within the memory
	// of the inputs the history keeps.
	free  *delta
	nfree int
	// stock is the pool's step records (stepStock): a history that is
	// dropped whole gives its free ones there, and one whose free list
	// is empty takes some from it.
	stock *stepStock
}

func newHistory(p *CheckpointPolicy, pos position, r *root, held *atomic.Int64, stock *stepStock) *history {
	return &history{policy: *p, entries: []entry{{pos: pos, rows: r.rows, cp: r.retain(), seq: commitSeqs.Add(1)}}, held: held, stock: stock}
}

// clone returns a copy sharing every delta block and checkpoint root.
func (x *history) clone() *history {
	c := *x
	c.entries = slices.Clone(x.entries)
	c.pending, c.last, c.copies = nil, nil, nil         // copies: the buffer is x's own
	c.free, c.nfree = nil, 0                            // so are the free step records
	c.replayCols, c.replaySpans, c.took = nil, nil, nil // and the buffers of At
	c.hostCols, c.hostCopied = nil, nil
	for _, e := range c.entries {
		if e.cp != nil {
			e.cp.retain()
		}
		if e.d != nil {
			if e.d.step != nil {
				e.d.step.refs.Add(1)
			}
			for _, col := range e.d.cols {
				for _, b := range col {
					b.Retain()
				}
			}
			if e.d.ready != nil {
				e.d.ready.refs.Add(1)
			}
		}
	}
	return &c
}

// drop gives up entry i's checkpoint and delta.
func (x *history) drop(i int, freed *[]*block) {
	e := &x.entries[i]
	if e.cp != nil {
		e.cp.release(freed)
		e.cp = nil
	}
	x.dropDelta(i, freed)
}

// dropDelta gives up entry i's delta; the bytes of its blocks that no
// other history shares leave the pool's count.
func (x *history) dropDelta(i int, freed *[]*block) {
	e := &x.entries[i]
	d := e.d
	if d == nil {
		return
	}
	e.d = nil
	// Read before the blocks go: a clone that shares d, dropping it at
	// the same time under its own head's lock, may free the last of
	// them and keep d for the next delta.
	ready, step, mem := d.ready, d.step, d.mem
	var gone int64
	held, last := false, true // d held blocks; this drop freed every one
	for _, col := range d.cols {
		for _, b := range col {
			held = true
			if b.Release() {
				*freed = append(*freed, b)
				gone += int64(b.Bytes())
			} else {
				last = false
			}
		}
	}
	x.held.Add(-gone)
	if ready != nil {
		ready.drop()
	}
	switch {
	case step != nil:
		x.dropStep(d)
	case mem != nil && held && last:
		mem.keep() // no other history holds d: each held its blocks too
	}
}

// releaseAll drops the whole history; the step records it kept for its
// next steps go to the pool's stock.
func (x *history) releaseAll(freed *[]*block) {
	for i := range x.entries {
		x.drop(i, freed)
	}
	x.entries, x.pending = nil, nil
	if x.stock != nil && x.free != nil {
		x.stock.give(x.free)
	}
	x.free, x.nfree = nil, 0
}

// roots returns the checkpoint roots the history holds.
func (x *history) roots() []*root {
	var out []*root
	for _, e := range x.entries {
		if e.cp != nil {
			out = append(out, e.cp)
		}
	}
	return out
}

// deltaBlocks returns the delta blocks the history holds.
func (x *history) deltaBlocks() []*block {
	var out []*block
	for _, e := range x.entries {
		if e.d != nil {
			for _, col := range e.d.cols {
				out = append(out, col...)
			}
		}
	}
	return out
}

// rollback cuts the history back to the target position: the entries
// after it are gone. A target older than the history starts it anew, with
// the target's root as its checkpoint.
func (x *history) rollback(to position, r *root, freed *[]*block) {
	x.pending = nil
	for i := len(x.entries) - 1; i >= 0; i-- {
		if x.entries[i].pos == to {
			for j := i + 1; j < len(x.entries); j++ {
				x.drop(j, freed)
			}
			x.entries = x.entries[:i+1]
			x.recount()
			return
		}
	}
	x.releaseAll(freed)
	x.entries = []entry{{pos: to, rows: r.rows, cp: r.retain()}}
	x.since, x.sinceBytes = 0, 0
}

// recount sets since and sinceBytes from the entries.
func (x *history) recount() {
	x.since, x.sinceBytes = 0, 0
	for i := len(x.entries) - 1; i >= 0 && x.entries[i].cp == nil; i-- {
		x.since++
		if d := x.entries[i].d; d != nil {
			x.sinceBytes += d.bytes
		}
	}
}

// trim drops the oldest checkpoints past Keep, with the entries only they
// made reconstructable, and leading entries before the first checkpoint.
func (x *history) trim(freed *[]*block) {
	n := 0
	for _, e := range x.entries {
		if e.cp != nil {
			n++
		}
	}
	cut := 0
	for i, e := range x.entries {
		if e.cp != nil {
			if n <= x.policy.Keep {
				cut = i
				break
			}
			n--
		}
		cut = i + 1
	}
	if cut > 0 {
		for i := range x.entries[:cut] {
			x.drop(i, freed)
		}
		x.entries = slices.Delete(x.entries, 0, cut)
	}
	// The oldest entry is a checkpoint: nothing applies its delta.
	x.dropDelta(0, freed)
}

// find returns the index of the entry of version v, or -1.
func (x *history) find(v Version) int {
	if n := len(x.entries); n > 0 && x.entries[n-1].pos.v == v {
		return n - 1 // the head's own version, as a step asks every call
	}
	i, ok := slices.BinarySearchFunc(x.entries, v, func(e entry, v Version) int { return cmp.Compare(e.pos.v, v) })
	if !ok {
		return -1
	}
	return i
}

// stepRec is the delta of a version Step made. It lives in a stepMem
// with its delta, which the histories that hold the delta count (refs):
// the history that drops the last reference keeps the record, and the
// buffer of its input, for its next step (history.dropStep).
type stepRec struct {
	in     [][]byte
	f      stepFunc
	took   time.Duration // how long f took when it ran
	verify bool
	hash   uint64 // with verify: the hash of the rows f produced
	state  int64  // bytes of the rows, which verify reads back
	// refs counts the histories whose entries hold the delta: clones
	// share it (history.clone), and each history's drop gives its
	// reference up; atomic, as branches' histories are guarded by
	// their own heads' locks.
	refs atomic.Int32
	// buf is the storage of in's columns, kept with the record when it is
	// recycled; inl holds in's slices for up to two columns.
	buf []byte
	inl [2][]byte
	// next links the step deltas on a history's free list
	// (history.free).
	next *delta
}

// stepMem is a step's delta and its record in one allocation; the
// record's storage (its input's buffer, room for the slices of up to two
// input columns) comes with it, and is used again when the history
// recycles it.
type stepMem struct {
	d   delta
	rec stepRec
}

// newStep returns the delta of a step whose input is in, with a copy of
// in in its record (keep) and one reference, the entry's: a record from
// x's free list where it has one, else a new one. The caller sets the
// record's function, verify and state, and the delta's rows.
func (x *history) newStep(in [][]byte) *delta {
	if x.free == nil && x.stock != nil {
		x.stock.take(x)
	}
	d := x.free
	if d != nil {
		x.free, d.step.next = d.step.next, nil
		x.nfree--
	} else {
		m := &stepMem{}
		m.d.step = &m.rec
		d = &m.d
	}
	d.from, d.to = 0, 0
	d.bytes = d.step.keep(in)
	d.step.refs.Store(1)
	return d
}

// dropStep gives up one history's reference to d, a step's delta: the
// last one puts it on x's free list, while x keeps fewer records there
// than entries, else in the pool's stock. x is the history that held
// the reference; no other holds d once the count is zero, so x's head's
// lock guards it from then on.
func (x *history) dropStep(d *delta) {
	rec := d.step
	if rec.refs.Add(-1) != 0 {
		return
	}
	rec.f = stepFunc{} // the caller's function, not kept past its version
	rec.took, rec.verify, rec.hash, rec.state = 0, false, 0, 0
	if x.nfree >= max(len(x.entries), stepFreeMin) {
		if x.stock != nil {
			x.stock.give(d) // rec.next is nil: d alone
		}
		return
	}
	rec.next = x.free
	x.free = d
	x.nfree++
}

// stepStock is the step records that the histories of released heads
// (and of merged, evicted or restarted ones, history.releaseAll) of a
// shard of a pool's gate left, for the steps of new histories of the
// shard: sessions that come and go take their records from those before
// them rather than allocate each, and two goroutines' sessions seldom
// take them from one stock. A history takes them a batch at a time, when
// its own free list is empty. A stock keeps at most stepStockMax records
// and stepStockBytes of their input buffers (a pool: gateShards times
// as many); a record past the bytes keeps no buffer.
type stepStock struct {
	_     [64]byte // apart from the other shards' stocks
	mu    sync.Mutex
	free  *delta
	n     int
	bytes int64 // the capacity of the records' input buffers
	// hash is the buffer hashRows reads rows back into, for the next
	// verified step or replay of any head of the pool: one call holds it
	// at a time, the others read into buffers of their own.
	hash []byte
}

// hashBufMax is the largest buffer the stock keeps for hashRows: the
// rows of one block of up to 64 KiB; a state of larger blocks reads each
// back into one of the call's own.
const hashBufMax = 64 << 10

// takeHashBuf returns the stock's hash buffer, or nil where another call
// holds it (or s is nil).
func (s *stepStock) takeHashBuf() []byte {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.hash
	s.hash = nil
	return b
}

// putHashBuf gives b back for the next takeHashBuf, where it is not
// larger than hashBufMax.
func (s *stepStock) putHashBuf(b []byte) {
	if s == nil || cap(b) > hashBufMax {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cap(b) > cap(s.hash) {
		s.hash = b
	}
}

const (
	stepStockMax   = 4096 / gateShards
	stepStockBytes = (4 << 20) / gateShards
	stepStockBatch = 16
)

// give adds the free step deltas linked from d (history.free) to s, as
// many as it has room for.
func (s *stepStock) give(d *delta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for d != nil && s.n < stepStockMax {
		rec := d.step
		next := rec.next
		if s.bytes+int64(cap(rec.buf)) > stepStockBytes {
			rec.buf, rec.in, rec.inl = nil, nil, [2][]byte{}
		}
		s.bytes += int64(cap(rec.buf))
		rec.next, s.free = s.free, d
		s.n++
		d = next
	}
}

// take moves up to stepStockBatch records from s to x's free list.
func (s *stepStock) take(x *history) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := 0; k < stepStockBatch && s.free != nil; k++ {
		d := s.free
		rec := d.step
		s.free = rec.next
		s.n--
		s.bytes -= int64(cap(rec.buf))
		rec.next, x.free = x.free, d
		x.nfree++
	}
}

// stepFreeMin is the step records a history keeps for its next steps
// whatever its length: a short history's rollback and steps after it.
const stepFreeMin = 4

// keep copies in into r, all its columns in one buffer (the record's
// own where it is large enough), and returns its bytes.
func (r *stepRec) keep(in [][]byte) int64 {
	switch {
	case len(in) <= len(r.inl):
		r.in = r.inl[:len(in)]
	case cap(r.in) >= len(in): // a record's own slice, of more than two
		r.in = r.in[:len(in)]
	default:
		r.in = make([][]byte, len(in))
	}
	total := 0
	for _, col := range in {
		total += len(col)
	}
	if cap(r.buf) < total {
		r.buf = make([]byte, 0, total)
	}
	buf := r.buf[:0]
	for i, col := range in {
		start := len(buf)
		buf = append(buf, col...)
		r.in[i] = buf[start:len(buf):len(buf)]
	}
	return int64(total)
}

// replayBytes are the bytes a reconstruction copies to apply d: the rows
// of a write set, or the rows a verified step reads back to hash.
func (d *delta) replayBytes() int64 {
	switch {
	case d.step == nil:
		return d.bytes
	case d.step.verify:
		return d.step.state
	}
	return 0
}

// inputBytes returns the bytes of the inputs the history records.
func (x *history) inputBytes() int64 {
	var n int64
	for _, e := range x.entries {
		if e.d != nil && e.d.step != nil {
			n += e.d.bytes
		}
	}
	return n
}

// Stepper is a step function as StepWith takes it.
type Stepper interface {
	Step(spans [][]device.Span, in [][]byte) error
}

// HostStepper is a step function written for the host, as StepHostWith
// takes it: rows holds, per column, every row of the head as bytes, which
// it rewrites in place, or it sets a column's slice to one of its own of
// the same length, whose bytes the runtime copies into the rows. It must
// not keep rows or in.
type HostStepper interface {
	StepHost(rows, in [][]byte) error
}

// stepFunc is a step function as a history keeps it: one that writes
// device spans (Step) or one that rewrites host rows (StepHost).
type stepFunc struct {
	dev  Stepper
	host HostStepper
}

// A fit refines the calibrated model by the reconstructions At measured
// of states whose largest blocks are of one size class: a moving
// estimate of the log of measured time over the model's estimate, the
// median of the last fitWindow measured (a median, so that one
// reconstruction the scheduler or the collector interrupted moves it
// little, while a change of regime, caches warm after cold, takes over
// within three), and a moving estimate (weight fitWeight) of the variance
// of each measurement about the estimate before it, from n measurements
// in all. The measured time of replayed steps and the price of new memory
// are left out of both.
type fit struct {
	last       [fitWindow]float64 // the latest log ratios, a ring
	mean, vari float64
	n          int
}

const (
	fitWindow = 5
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
	x := max(-10, min(10, math.Log(float64(measured)/float64(model))))
	if f.n > 0 {
		d := x - f.mean
		f.vari = (1 - fitWeight) * (f.vari + fitWeight*d*d)
	}
	f.last[f.n%fitWindow] = x
	f.n++
	var sorted [fitWindow]float64
	w := sorted[:min(f.n, fitWindow)]
	copy(w, f.last[:])
	slices.Sort(w)
	f.mean = (w[(len(w)-1)/2] + w[len(w)/2]) / 2
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

// deltaStream is a pool's own stream for the delta copies that follow
// work on several streams (history.deltaStream), made on first use, and
// made anew after one that failed.
type deltaStream struct {
	mu sync.Mutex
	st device.Stream
}

// after returns the stream with a wait for each event of evs queued on
// it. A stream whose work failed fails all work after: the next delta's
// copies go on a new one.
func (d *deltaStream) after(sb device.Streams, evs []device.Event) (device.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.st != nil && streamFailed(sb, d.st) {
		go d.st.Close() // Close waits for the work queued before, which may wait for other streams
		d.st = nil
	}
	if d.st == nil {
		st, err := sb.NewStream()
		if err != nil {
			return nil, err
		}
		d.st = st
	}
	for _, ev := range evs {
		if err := sb.WaitEvent(d.st, ev); err != nil {
			return nil, err
		}
	}
	return d.st, nil
}

// streamFailed reports whether work queued on st is known to have failed,
// without waiting.
func streamFailed(sb device.Streams, st device.Stream) bool {
	ev, err := sb.Record(st)
	if err != nil {
		return true
	}
	defer ev.Close()
	_, err = ev.Done()
	return err != nil
}

// close closes the stream, once its work is done.
func (d *deltaStream) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.st == nil {
		return nil
	}
	err := d.st.Close()
	d.st = nil
	return err
}
