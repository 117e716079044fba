package store

import (
	"cmp"
	"errors"
	"math/bits"
	"slices"

	"github.com/gpustate/gpustate/placement"
	"github.com/gpustate/gpustate/runtime/device"
)

// Checkpoints and deltas. A head whose layout has a checkpoint policy keeps
// a history of its own line: one entry per version, oldest first. An entry
// holds the version's delta (its write set: the rows it wrote, copied into
// pool blocks on the device) and, every Every versions or whenever the
// deltas since the last checkpoint pass Budget bytes, a checkpoint (a
// copy-on-write snapshot: one reference to the version's root). At most
// Keep checkpoints are kept; entries older than the oldest one are dropped,
// so history stays bounded. At(v) seeds from a checkpoint at or before v
// and applies the deltas after it; Plan(v) says which checkpoint, what it
// costs by the pool's calibrated cost model, and what the others cost.
//
// A delta that cannot be stored (the pool is full, the backend fails)
// leaves a gap: versions that would need it are reconstructed from a later
// checkpoint or answer ErrNotRetained; the write itself has succeeded.

// committed adds the version a write just made, with rows [w.from, w.to)
// as its delta: copied now when they are final, at the next call on h
// (prepare) when a kernel is writing them.
func (x *history) committed(h *Head, w written) {
	if w.device {
		x.pending = &pendingDelta{w.from, w.to, commitSeqs.Add(1)}
		return
	}
	x.capture(h, w.from, w.to, nil, commitSeqs.Add(1))
}

// prepare takes the delta of a device write (a kernel's, or an
// AppendAsync's) the version before left pending: in stream order, after
// the work queued on the streams the head was recorded on, on the one a
// RecordStream names (the kernel's) and on those of its copies in flight,
// so that the copy sees the rows without the call waiting for them.
func (x *history) prepare(h *Head, c call) error {
	if x.pending != nil {
		var buf [4]device.Stream
		on := buf[:0]
		if c.st != nil {
			on = append(on, c.st) // the kernel's: the one to copy on
		}
		for _, st := range h.async.streams.get() {
			if !hasStream(on, st) {
				on = append(on, st)
			}
		}
		// And the streams of the copies in flight (AppendAsync, a move
		// back from the host tier): the delta's rows may be theirs, not
		// landed yet.
		for _, f := range h.async.inflight {
			if !hasStream(on, f.st) {
				on = append(on, f.st)
			}
		}
		x.flush(h, on)
	}
	return nil
}

// branched gives c a copy of the history, sharing its deltas and
// checkpoints.
func (x *history) branched(_, c *Head) { c.hist = x.clone() }

// release drops the history with its head.
func (x *history) release(_ *Head, freed []*block) []*block {
	x.releaseAll(&freed)
	return freed
}

// changed and moved: a rollback or merge sets the history itself
// (move.moveOne).
func (x *history) changed(*Head) {}
func (x *history) moved(*Head)   {}

// flush takes the delta of h's pending device write, on streams on (see
// capture). h.mu is held.
func (x *history) flush(h *Head, on []device.Stream) {
	p := x.pending
	x.pending = nil
	x.capture(h, p.from, p.to, on, p.seq)
}

// capture appends an entry for h's version, with a copy of rows [from, to)
// as its delta, then takes a checkpoint when the policy says so and drops
// what is past Keep. With streams on, the copy is queued after their work
// (deltaStream). seq is the commit's (commitSeqs). h.mu is held.
func (x *history) capture(h *Head, from, to int, on []device.Stream, seq uint64) {
	e := entry{pos: h.pos, rows: h.r.rows, seq: seq}
	if d, err := x.copyDelta(h, h.r, from, to, on); err == nil {
		e.d = d
	}
	x.addEntry(h, e)
}

// addEntry appends e, the entry of h's version, then takes a checkpoint
// (of h's root) when the policy says so and drops what is past Keep. h.mu
// is held.
func (x *history) addEntry(h *Head, e entry) {
	if e.d != nil {
		x.sinceBytes += e.d.bytes
	}
	x.since++
	pol := x.policy
	if (pol.Every > 0 && x.since >= pol.Every) ||
		(pol.Every == 0 && (x.sinceBytes >= pol.Budget || x.since >= placement.MaxSpacing)) {
		e.cp = h.r.retain()
		x.since, x.sinceBytes = 0, 0
	}
	x.entries = append(x.entries, e)
	if e.cp == nil {
		// Only a checkpoint can put the history past Keep: trim would
		// walk every entry and drop nothing.
		return
	}
	freed := h.pool.takeFreed() // a list to reuse: a step's checkpoint allocates nothing
	x.trim(freed)
	h.pool.freeList(freed)
}

// copyDelta copies rows [from, to) of r, a root of h's, into new blocks
// of h's pool, packed: at once, or queued after the work on streams on
// where there are any and the backend queues device copies
// (device.StreamCopier).
func (x *history) copyDelta(h *Head, r *root, from, to int, on []device.Stream) (*delta, error) {
	d, buf := newDelta(from, to, len(h.rowBytes))
	for c, per := range h.perBlock {
		d.bytes += int64((to - from) * h.rowBytes[c])
		d.per[c] = per
	}
	if to <= from {
		return d, nil // an empty write: its delta holds no rows
	}
	var blks []*block
	var err error
	if h.rows > 0 {
		blks, err = h.allocDelta(d, buf)
	} else {
		counts := make([]int, len(h.perBlock))
		for c, per := range h.perBlock {
			counts[c] = (to - from + per - 1) / per
		}
		blks, err = h.allocCols(buf, counts, handDirty)
	}
	if err != nil {
		return nil, err
	}
	all := blks
	for c, per := range d.per {
		k := (to - from + per - 1) / per
		d.cols[c], blks = blks[:k:k], blks[k:]
	}
	st, err := x.deltaStream(h, all, r, from, to, on)
	if err != nil {
		d.release(h.pool)
		return nil, err
	}
	// The copies: queued on st; else gathered and made in one call where
	// the backend takes batches (a decode step's delta is a copy a
	// column); else made one by one.
	batch := x.copies[:0]
	bc, batched := h.pool.b.(device.DeviceBatchCopier)
	var copyFn blockCopy // nil: blockToBlock, the built-in copy on host memory
	switch {
	case st != nil:
		sc := h.pool.b.(device.StreamCopier)
		copyFn = func(dst *block, doff int, src *block, soff, n int) error {
			return sc.CopyDtoDAsync(st, dst.Ptr()+device.Ptr(doff), src.Ptr()+device.Ptr(soff), n)
		}
	case batched && all[0].Host(0, 0) == nil:
		copyFn = func(dst *block, doff int, src *block, soff, n int) error {
			batch = append(batch, device.DeviceCopy{Dst: dst.Ptr() + device.Ptr(doff), Src: src.Ptr() + device.Ptr(soff), Bytes: n})
			return nil
		}
	}
	for c := range h.rowBytes {
		if err := copyRows(treeLoc(&r.cols[c], h.perBlock[c], h.rowBytes[c]), deltaLoc(d, c, d.per[c], h.rowBytes[c]), from, to, h.rowBytes[c], h.pool.b, copyFn); err != nil {
			d.release(h.pool)
			return nil, err
		}
	}
	if len(batch) > 0 {
		err := bc.CopiesDtoD(batch)
		x.copies = batch[:0]
		if err != nil {
			d.release(h.pool)
			return nil, err
		}
	}
	if st != nil {
		ev, err := h.pool.b.(device.Streams).Record(st)
		if err != nil {
			d.release(h.pool)
			return nil, err
		}
		d.ready = &deltaReady{ev: ev}
		d.ready.refs.Store(1)
	}
	for _, col := range d.cols {
		x.held.Add(blockBytes(col))
	}
	return d, nil
}

// deltaStream returns the stream copyDelta queues the copies of rows
// [from, to) of r, h's version, into the delta's blocks bs on, after the
// work queued on every open stream of on, when the backend queues device
// copies (the blocks are recorded on it, the delta's and r's of those
// rows, so that none is reused or written over before the copies ran:
// recordRows); else nil, and the rows are copied at once. With one open
// stream the copies go on it, in its order. With several, they go on the
// pool's own stream (Pool.deltaSt), made to wait for each: a wait queued
// on one of the caller's streams would hold every later piece of work on
// it, another head's too, behind the others' work. A closed stream is
// passed over: its work has completed. A stream that fails otherwise
// fails the copy, as copying at once could read rows its kernel has not
// written.
func (x *history) deltaStream(h *Head, bs []*block, r *root, from, to int, on []device.Stream) (device.Stream, error) {
	p := h.pool
	_, ok := p.b.(device.StreamCopier)
	sb, ok2 := p.b.(device.Streams)
	if !ok || !ok2 {
		return nil, nil
	}
	var buf [4]device.Event
	evs := buf[:0]
	defer func() {
		for _, ev := range evs {
			ev.Close()
		}
	}()
	var st device.Stream
	for _, o := range on {
		ev, err := sb.Record(o)
		if errors.Is(err, device.ErrStreamClosed) {
			continue
		}
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
		if st == nil {
			st = o
		}
	}
	if len(evs) > 1 {
		var err error
		if st, err = p.deltaSt.after(sb, evs); err != nil {
			return nil, err
		}
	}
	if st != nil {
		p.rec.addAll(bs, st)
		recordRows(&p.rec, r, h.perBlock, from, to, st)
	}
	return st, nil
}

// recordRows records st on the blocks of rows [from, to) of r, columns of
// perBlock rows a block: the delta's copies queued on st read them there
// once the work before them is done, so a later write copies those blocks
// rather than write over them in place, and their release waits for the
// copies (Block.Uses).
func recordRows(rec *recorded, r *root, perBlock []int, from, to int, st device.Stream) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var added int64
	for c, per := range perBlock {
		for bi := from / per; bi*per < to; bi++ {
			if rec.addLocked(r.cols[c].get(bi), st) {
				added++
			}
		}
	}
	rec.n.Add(added)
}

// release gives the blocks of a delta that was never stored back to p.
func (d *delta) release(p *Pool) {
	var freed []*block
	for _, col := range d.cols {
		for _, b := range col {
			releaseBlock(b, &freed)
		}
	}
	p.free(freed)
}

// A locator gives, for a row, the block it lies in, its byte offset
// there, and how many rows follow it in the same block.
type locator func(row int) (*block, int, int)

func treeLoc(t *tree, per, rb int) locator {
	return func(row int) (*block, int, int) {
		bi := row / per
		return t.get(bi), (row - bi*per) * rb, (bi+1)*per - row
	}
}

func deltaLoc(d *delta, c, per, rb int) locator {
	return func(row int) (*block, int, int) {
		k := row - d.from
		return d.cols[c][k/per], (k % per) * rb, per - k%per
	}
}

// blockCopy copies n bytes of src from byte soff on into dst from doff on.
type blockCopy func(dst *block, doff int, src *block, soff, n int) error

// copyRows copies rows [from, to) of rb bytes from src to dst with cp, or
// where cp is nil on b (blockToBlock: the built-in copy on host memory),
// in as few copies as the block boundaries allow.
func copyRows(src, dst locator, from, to, rb int, b device.Backend, cp blockCopy) error {
	for row := from; row < to; {
		sb, so, sn := src(row)
		db, do, dn := dst(row)
		n := min(sn, dn, to-row)
		var err error
		if cp != nil {
			err = cp(db, do, sb, so, n*rb)
		} else {
			err = blockToBlock(b, db, do, sb, so, n*rb)
		}
		if err != nil {
			return err
		}
		row += n
	}
	return nil
}

// copies counts the device copies copyRows makes for rows [from, to) of a
// column whose blocks hold per rows, from a delta packed at from.
func copies(from, to, per int) int {
	n := 0
	for row := from; row < to; {
		k := row - from
		row += min(per-row%per, per-k%per, to-row)
		n++
	}
	return n
}

// A reconstruction builds a version of h's line from h's history: entry
// q's checkpoint with the deltas of entries q+1..t applied, copied back
// (apply) or run again (replayStep), in a root of its own
// (history.reconstructInto). It hands itself the blocks it copies on
// write: the caller's spares first, then one at a time while the pool has
// room, with no reclaim; at the first that finds none, every block the
// deltas still need (need, less those taken) in one allocation, all or
// none, which reclaims.
type reconstruction struct {
	h      *Head
	q, t   int
	taken  []classCount // the blocks taken one at a time, by class
	inline [4]classCount
	byCls  map[*sizeClass][]*block // the blocks taken in one allocation, left
	spare  []*block                // the caller's blocks, handed out first
}

// classCount counts blocks of one class.
type classCount struct {
	cls *sizeClass
	n   int
}

// take hands out a block of class c.
func (rc *reconstruction) take(c *sizeClass) (*block, error) {
	h := rc.h
	for i := len(rc.spare) - 1; i >= 0; i-- {
		if b := rc.spare[i]; b.Class() == c && b.Owner() == string(h.owner) {
			rc.spare = slices.Delete(rc.spare, i, i+1)
			b.SetRefs(1)
			return b, nil
		}
	}
	if rc.byCls == nil {
		b, err := h.pool.takeOne(c, h.owner)
		if err == nil {
			rc.count(c)
			return b, nil
		}
		if !errors.Is(err, ErrNoMemory) {
			return nil, err
		}
		if err := rc.reserve(); err != nil {
			return nil, err
		}
	}
	if l := rc.byCls[c]; len(l) > 0 {
		rc.byCls[c] = l[:len(l)-1]
		return l[len(l)-1], nil
	}
	return rc.takeNew(c) // past the count: one more, reclaiming
}

// count counts one block of class c taken.
func (rc *reconstruction) count(c *sizeClass) {
	for i := range rc.taken {
		if rc.taken[i].cls == c {
			rc.taken[i].n++
			return
		}
	}
	rc.taken = append(rc.taken, classCount{c, 1})
}

// reserve takes the blocks still needed, all or none.
func (rc *reconstruction) reserve() error {
	h := rc.h
	counts := rc.need()
	left := slices.Clone(rc.taken) // taken already, counted against the columns in turn
	for c := range counts {
		for i := range left {
			if left[i].cls == h.cls[c] {
				k := min(counts[c], left[i].n)
				left[i].n -= k
				counts[c] -= k
			}
		}
	}
	blks, err := h.allocCols(nil, counts, handDirty)
	if err != nil {
		return err
	}
	rc.byCls = make(map[*sizeClass][]*block)
	for _, b := range blks {
		rc.byCls[b.Class()] = append(rc.byCls[b.Class()], b)
	}
	return nil
}

// need returns, per column, the blocks applying the deltas of entries
// q+1..t to entry q's checkpoint takes: one for each block index any of
// them writes, the first time only (the checkpoint's blocks are shared,
// so the first write copies; past it the block is the reconstruction's
// own).
func (rc *reconstruction) need() []int {
	h := rc.h
	x := h.hist
	need := make([]int, len(h.perBlock))
	for c, per := range h.perBlock {
		var spans [][2]int // block indices [lo, hi) each delta writes
		for j := rc.q + 1; j <= rc.t; j++ {
			if d := x.entries[j].d; d.to > d.from {
				spans = append(spans, [2]int{d.from / per, (d.to + per - 1) / per})
			}
		}
		slices.SortFunc(spans, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
		end := 0 // the union's count, up to index end
		for _, s := range spans {
			lo := max(s[0], end)
			if s[1] > lo {
				need[c] += s[1] - lo
				end = s[1]
			}
		}
	}
	return need
}

// giveBack frees the reserved blocks nothing took.
func (rc *reconstruction) giveBack() {
	var freed []*block
	for _, l := range rc.byCls {
		for _, b := range l {
			releaseBlock(b, &freed)
		}
	}
	rc.h.pool.free(freed)
}

// takeNew takes one block of class c for h, reclaiming under pressure.
func (rc *reconstruction) takeNew(c *sizeClass) (*block, error) {
	h := rc.h
	// Into a buffer on the stack, not a slice per block: the Go heap's
	// new pages fault inside the reconstruction as the pool's do.
	var one [1]*block
	nb, err := h.pool.allocIn(one[:0], c, h.owner, 1, handDirty)
	if err != nil {
		return nil, err
	}
	return nb[0], nil
}

// apply writes d into r, a root of h's shape the caller holds a reference
// to and that nobody else changes, giving it rows rows, with the blocks it
// copies on write from take. It returns the root to hold (r itself, or r's
// copy); on failure the caller still holds a root to release. It reads
// only h's shape and pool: the cost model's calibration applies deltas
// with a reconstruction of a head of its own.
func (rc *reconstruction) apply(r *root, d *delta, rows int, take func(*sizeClass) (*block, error)) (*root, error) {
	h := rc.h
	var freed []*block
	r = r.own(&freed)
	// A closure, so that the blocks the failure paths below add are
	// freed too, not the slice as it was here.
	defer func() { h.pool.free(freed) }()
	for c, per := range h.perBlock {
		if d.to <= d.from {
			break // no rows written: nothing to copy on write
		}
		t := &r.cols[c]
		rb := h.rowBytes[c]
		for bi := d.from / per; bi*per < d.to; bi++ {
			if bi < t.n && t.writable(bi, string(h.owner)) {
				continue
			}
			nb, err := take(h.cls[c])
			if err != nil {
				return r, err
			}
			if bi < t.n {
				if used := min(r.rows, (bi+1)*per) - bi*per; used > 0 {
					seed := t.get(bi)
					seed.Touch() // its pages are mapped now (estimate.go)
					if err := blockToBlock(h.pool.b, nb, 0, seed, 0, used*rb); err != nil {
						releaseBlock(nb, &freed)
						return r, err
					}
				}
			}
			t.setNew(bi, nb, &freed)
		}
		if d.step != nil {
			continue // the step function writes the rows (replayStep)
		}
		if err := d.wait(); err != nil {
			return r, err
		}
		if err := copyRows(deltaLoc(d, c, d.per[c], rb), treeLoc(t, per, rb), d.from, d.to, rb, h.pool.b, nil); err != nil {
			return r, err
		}
	}
	r.rows = rows
	return r, nil
}

// allocDelta takes the blocks of a delta of rows [d.from, d.to), sized to
// the delta rather than to the columns: a delta smaller than a block takes
// a block of its own rows (rounded up by deltaRows, then to blockAlign),
// so that history costs about the bytes its deltas change. It sets d.per
// and returns the blocks in column order, appended to buf[:0]; all or
// none (allocColsOf: columns whose deltas share a class, as a decode
// step's one row of every column of a KV cache does, are one allocation).
func (sh *shape) allocDelta(d *delta, buf []*block) ([]*block, error) {
	n := d.to - d.from
	var cls, classes [8]*sizeClass
	var counts [8]int
	k := colClasses{cls: cls[:0], classes: classes[:0]}
	ns := counts[:0]
	for c, per := range sh.perBlock {
		rb := sh.rowBytes[c]
		cl := sh.cls[c]
		if k := deltaRows(n); k < per {
			bb := (k*rb + blockAlign - 1) &^ (blockAlign - 1)
			cl = sh.pool.mem.Class(bb)
			per = bb / rb
		}
		d.per[c] = per
		k.cls = append(k.cls, cl)
		if !slices.Contains(k.classes, cl) {
			k.classes = append(k.classes, cl)
		}
		ns = append(ns, (n+per-1)/per)
	}
	return sh.allocColsOf(&k, buf, ns, handDirty)
}

// deltaRows rounds a delta's rows up to one of few sizes, so that deltas
// of every length share few size classes (each keeps free lists of its
// own): exact up to 8 rows, then four sizes per doubling, at most 1.25
// times n.
func deltaRows(n int) int {
	if n <= 8 {
		return n
	}
	step := 1 << (bits.Len(uint(n)) - 3)
	return (n + step - 1) &^ (step - 1)
}
