package store

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpustate/gpustate/runtime/device"
)

// The write path. Append, Write, AppendDevice and WriteDevice each check
// their arguments and then make a writeTx and apply it: a plan of
// block operations, carried out in steps ordered so that the head reads as
// it was until the commit, which cannot fail. A step that fails undoes the
// steps before it and gives back every block the write took.

type writeKind int

const (
	hostAppend writeKind = iota
	hostWrite
	deviceAppend
	deviceWrite
	// stepWrite is a replayed step's (history.step): a device write whose
	// function writes the rows during the call, as a host write does, not
	// in stream order after it.
	stepWrite
)

// duringCall reports whether the rows are written before the call
// returns, out of stream order: over a block that queued stream work uses
// they would change what that work sees (inPlace).
func (k writeKind) duringCall() bool { return k == hostWrite || k == stepWrite }

// plan returns the block operations for rows [from, to) of every column,
// from the batch cols (nil for a device write). Rows of an in-place write
// a reader may see are marked visible.
func (tx *writeTx) plan(cols [][]byte) []blockOp {
	h, kind, from, to := tx.h, tx.kind, tx.from, tx.to
	ops := h.opsBuf(h.perBlock, from, to)
	rootUnique := h.r.unique()
	appends := kind == hostAppend || kind == deviceAppend
	for c := range h.rowBytes {
		rb, per, bb := h.rowBytes[c], h.perBlock[c], h.blockBytes[c]
		t := &h.r.cols[c]
		for row := from; row < to; {
			bi := row / per
			start, end := bi*per, min(to, (bi+1)*per)
			op := blockOp{col: c, idx: bi, off: (row - start) * rb}
			if cols != nil {
				op.src = cols[c][(row-from)*rb : (end-from)*rb]
			}
			if bi < t.n {
				op.old = t.get(bi)
			}
			used := min(h.r.rows, (bi+1)*per) - start // rows of the block in the version
			if appends {
				op.fill = (end - start) * rb
			}
			inPlace, claimed := false, false
			if op.old != nil {
				inPlace, claimed = tx.inPlace(t, bi, rootUnique, used*rb, op.fill)
			}
			switch {
			case op.old == nil:
				// A new block past the column's end.
			case inPlace && !claimed:
				if kind == hostWrite && row == start && end == start+used && !hostInPlace(op.old) {
					op.keep = -1 // covers the block: a new one, if memory allows
				}
				op.visible = kind == hostWrite
				if appends {
					op.old.SetFill(op.fill) // the block is this version's alone
					op.claimed, op.alone = used*rb+1, true
				}
			case inPlace:
				// Others hold the block; the rows go past all of theirs.
				op.claimed = used*rb + 1
			default:
				if kind == hostWrite && row == start && end == start+used {
					op.keep = 0
				} else {
					op.keep = used * rb
				}
				op.keep = min(op.keep, bb)
				op.nb = copyMark // filled by take
			}
			ops = append(ops, op)
			row = end
		}
	}
	return ops
}

// inPlace is the rule for writing block i of t, a column of the head's
// root, in place, which plan asks of every block a write touches and the
// short append path of its tail blocks (tailInPlace); alone says whether
// the head holds its root alone. The block may be the head's alone (held
// once, under a root the head alone holds: tree.writable) and used by no
// queued stream work (Block.Uses): a kernel's write (WriteDevice) is in
// stream order and goes in place all the same; any other write leaves a
// block such work uses to it, and no other holder records a stream on
// the block meanwhile. A host write or a replayed step then copies it,
// as the host's copy is not in stream order; an append goes in place only
// as below, since the work may be that of a version since released or
// rolled back, writing or reading the bytes past the head's rows (a
// branch's AppendAsync, a kernel on its spans). Or, for an append, others
// may hold the block, or work use it, whose rows all end at byte from,
// where the append's begin: it claims bytes [from, to) (tree.appendsInPlace),
// and claimed reports it; bytes a holder wrote past from keep the block's
// fill past it, and the append copies the block instead.
func (tx *writeTx) inPlace(t *tree, i int, alone bool, from, to int) (ok, claimed bool) {
	owner := string(tx.h.owner)
	if alone && t.writable(i, owner) && (tx.kind == deviceWrite || t.get(i).Uses() == nil) {
		return true, false
	}
	if (tx.kind == hostAppend || tx.kind == deviceAppend) && t.appendsInPlace(i, owner, from, to) {
		return true, true
	}
	return false, false
}

// copyMark stands in the plan for the new block of a copy on write until
// take hands it a real one: a block of its own per operation was most of
// what a copy on write of a whole state allocated.
var copyMark = new(block)

// maxKeptOps is the most block operations a head keeps a buffer for
// between writes: a decode step's plan reuses it, a bulk write's plan
// takes one of bulkOps.
const maxKeptOps = 64

// bulkOps holds the plan buffers of large writes between them, for any
// head: a head keeps only a small one (Head.ops).
var bulkOps sync.Pool

// opsBuf returns an empty buffer for the operations of a write of rows
// [from, to) of columns of perBlock rows a block, large enough that
// planning never regrows it: b's own for a small write, else one of
// bulkOps.
func (b *writeBufs) opsBuf(perBlock []int, from, to int) []blockOp {
	n := 0
	if from < to {
		for _, per := range perBlock {
			n += (to-1)/per - from/per + 1
		}
	}
	if n > maxKeptOps {
		if ops, ok := bulkOps.Get().(*[]blockOp); ok && cap(*ops) >= n {
			return (*ops)[:0]
		}
		return make([]blockOp, 0, n)
	}
	if cap(b.ops) < n {
		// Grown to what the head's writes need, no more: a new branch
		// that writes one row takes a buffer of one operation per column.
		b.ops = make([]blockOp, 0, min(max(n, 2*cap(b.ops)), maxKeptOps))
	}
	return b.ops[:0]
}

// doneOps drops what a finished write's operations reference (the
// caller's batch, blocks given back) and gives a large buffer back to
// bulkOps.
func (tx *writeTx) doneOps() {
	clear(tx.ops)
	if cap(tx.ops) > maxKeptOps {
		ops := tx.ops[:0]
		bulkOps.Put(&ops)
	}
}

// writeTx is one write in progress: rows [from, to) of the batch cols (nil
// for a device write), planned as ops, with the blocks taken for it.
type writeTx struct {
	h        *Head
	op       string
	kind     writeKind
	from, to int
	ops      []blockOp
	taken    []*block // every block alloc gave the write, for undo
	// tailClaims has bit c set when the short append path claimed the
	// fill of column c's tail block (takeTails).
	tailClaims uint8
}

// apply plans and performs the write tx and commits it as a new version
// with newRows rows. On failure it changes nothing and gives back the
// blocks it took. last, when not nil, is one more step before the
// commit: it gets the runs of device memory where the rows written lie in
// the new version (the async path queues its copies there), and its
// failure aborts the write; the spans are left to the caller then. A
// device write without last returns the spans its rows lie in.
func (tx *writeTx) apply(newRows int, cols [][]byte, last func([]copyRun) error) ([][]device.Span, error) {
	if err := tx.admit(); err != nil {
		return nil, err
	}
	tx.ops = tx.plan(cols)
	defer tx.doneOps()
	if err := tx.take(); err != nil {
		return nil, err
	}
	// New blocks and rows past the version's end first, then rows a
	// reader may see: each step changes nothing the steps before it could
	// not undo.
	if err := tx.fillNewBlocks(); err != nil {
		return nil, tx.abort(err)
	}
	if err := tx.writeVisible(); err != nil {
		return nil, tx.abort(err)
	}
	tx.touchOld() // for the cost model (estimate.go)
	if last != nil {
		if err := last(tx.runs()); err != nil {
			return nil, tx.abort(err)
		}
	}
	r := tx.commit(newRows)
	if last == nil && (tx.kind == deviceAppend || tx.kind == deviceWrite) {
		spans, _ := tx.h.spans(tx.op, r, tx.from, tx.to) // in range by construction
		return spans, nil
	}
	return nil, nil
}

// admit refuses, before anything is planned, appends of more rows than
// the pool could ever hold.
func (tx *writeTx) admit() error {
	if tx.kind != hostAppend && tx.kind != deviceAppend {
		return nil
	}
	h := tx.h
	rows := int64(tx.to - tx.from)
	if rows > 0 && rows > (1<<62)/h.rowSum {
		return h.errorf(tx.op, "%d rows: %w", rows, ErrNoMemory)
	}
	if err := h.pool.mem.FitsBytes(rows * h.rowSum); err != nil {
		return h.errorf(tx.op, "%w", err)
	}
	return nil
}

// wantsBlock reports whether o needs a new block: past the column's end,
// a copy on write, or a block the write covers whole.
func (o *blockOp) wantsBlock() bool { return o.old == nil || o.nb != nil || o.keep < 0 }

// take allocates the new blocks the plan needs and hands them to its
// operations. When the pool is out of memory it writes the unshared blocks
// the write covers whole in place, rather than replace them, and tries
// again with fewer.
func (tx *writeTx) take() error {
	h := tx.h
	counts := tx.counts()
	need := 0
	for _, k := range counts {
		need += k
	}
	blks, err := h.allocCols(h.scratch, counts, handDirty)
	if err != nil && errors.Is(err, ErrNoMemory) {
		if fewer := tx.coverInPlace(); fewer < need {
			blks, err = h.allocCols(h.scratch, tx.counts(), handDirty)
		}
	}
	if err != nil {
		tx.returnClaims()
		return h.errorf(tx.op, "%w", err)
	}
	h.scratch = blks[:0]
	tx.taken = blks
	for i := range tx.ops {
		if o := &tx.ops[i]; o.wantsBlock() {
			if o.keep < 0 {
				o.keep, o.visible = 0, false
			}
			o.nb, blks = blks[0], blks[1:]
		}
	}
	return nil
}

// returnClaims gives back the bytes the plan claimed of blocks others
// share (inPlace), or set as written on the head's own, for a write that
// fails before it writes them: their fills come back to where the
// versions' rows end, and the next append goes on in place there, as it
// would have without the call, after a snapshot too.
func (tx *writeTx) returnClaims() {
	for i := range tx.ops {
		switch o := &tx.ops[i]; {
		case o.claimed > 0 && o.alone:
			o.old.SetFill(o.claimed - 1) // still the head's alone: no one claimed past it
		case o.claimed > 0:
			o.old.ReturnFill(o.fill, o.claimed-1)
		}
		tx.ops[i].claimed = 0
	}
}

// counts returns, per column, the new blocks the plan needs.
func (tx *writeTx) counts() []int {
	counts := tx.h.countBuf[:0]
	for range tx.h.rowBytes {
		counts = append(counts, 0)
	}
	for i := range tx.ops {
		if tx.ops[i].wantsBlock() {
			counts[tx.ops[i].col]++
		}
	}
	tx.h.countBuf = counts
	return counts
}

// coverInPlace turns the replacements of blocks the write covers whole
// into writes in place, and returns how many blocks the plan needs then.
func (tx *writeTx) coverInPlace() int {
	n := 0
	for i := range tx.ops {
		if o := &tx.ops[i]; o.keep < 0 {
			o.keep = 0
		} else if o.wantsBlock() {
			n++
		}
	}
	return n
}

// fillNewBlocks writes every new block: the rows it keeps of the block it
// replaces, then the batch's rows, each in one copy per run of blocks that
// follow one another in memory; then it writes in place the rows past the
// version's end. Nothing a reader sees changes. The copies from the host
// go in one call where the backend takes a batch (device.BatchCopier).
func (tx *writeTx) fillNewBlocks() error {
	b := tx.h.pool.b
	if err := tx.h.async.awaitKernel(tx.h, tx.ops); err != nil {
		return err
	}
	for i := 0; i < len(tx.ops); i++ {
		if o := &tx.ops[i]; o.nb != nil && o.keep > 0 {
			n, last := tx.keptRun(i)
			if err := blockToBlock(b, o.nb, 0, o.old, 0, n); err != nil {
				return err
			}
			i = last
		}
	}
	cs := tx.h.copies[:0]
	for i := 0; i < len(tx.ops); i++ {
		o := &tx.ops[i]
		if o.nb == nil || o.src == nil {
			continue
		}
		src, last := tx.run(i, newBlock)
		cs = toBlock(cs, o.nb, o.off, src)
		i = last
	}
	for i := range tx.ops {
		if o := &tx.ops[i]; o.nb == nil && !o.visible && o.src != nil {
			cs = toBlock(cs, o.old, o.off, o.src)
		}
	}
	err := copiesHtoD(b, cs)
	clear(cs) // the caller's batch is not kept
	tx.h.copies = cs[:0]
	return err
}

// copiesHtoD makes the copies cs, in one call when b takes a batch.
func copiesHtoD(b device.Backend, cs []device.HostCopy) error {
	if bc, ok := b.(device.BatchCopier); ok && len(cs) > 1 {
		return bc.CopiesHtoD(cs)
	}
	for _, c := range cs {
		if err := b.CopyHtoD(c.Dst, c.Src); err != nil {
			return err
		}
	}
	return nil
}

// keptRun returns the bytes that ops[i] keeps of its old block joined
// with those of the operations after it that continue them in one device
// copy (whole blocks kept, old and new blocks each following one another
// in memory), and the index of the last operation joined.
func (tx *writeTx) keptRun(i int) (int, int) {
	n := tx.ops[i].keep
	for i+1 < len(tx.ops) {
		prev, next := &tx.ops[i], &tx.ops[i+1]
		bb := tx.h.blockBytes[prev.col]
		if next.nb == nil || next.keep <= 0 || next.col != prev.col || prev.keep != bb ||
			!next.nb.Follows(prev.nb) || !next.old.Follows(prev.old) {
			break
		}
		n += next.keep
		i++
	}
	return n, i
}

// Which block of an operation a run writes: the new one, or the old one
// in place.
const (
	newBlock = true
	oldBlock = false
)

// target returns the block o writes: its new one, or its old one.
func (o *blockOp) target(fresh bool) *block {
	if fresh {
		return o.nb
	}
	return o.old
}

// run returns the rows of ops[i] joined with those of the operations after
// it that continue them in one copy (blocks, new ones or old ones as fresh
// says, that follow one another in memory, written from their start by
// rows that follow one another in the batch's column), and the index of
// the last operation joined.
func (tx *writeTx) run(i int, fresh bool) ([]byte, int) {
	src := tx.ops[i].src
	for i+1 < len(tx.ops) {
		prev, next := &tx.ops[i], &tx.ops[i+1]
		bb := tx.h.blockBytes[prev.col]
		if (next.nb == nil) == fresh || next.visible != prev.visible || next.col != prev.col || next.off != 0 || next.src == nil ||
			prev.off+len(prev.src) != bb ||
			!next.target(fresh).Follows(prev.target(fresh)) ||
			len(src)+len(next.src) > cap(src) {
			break
		}
		src = src[:len(src)+len(next.src)] // next.src follows in the batch's column
		i++
	}
	return src, i
}

// hostInPlace reports whether a write that covers b, a block the writer
// holds alone and no queued stream work reads (plan), writes it in place
// rather than into a new block: where b is memory of the process
// (Block.Host), so that the copy cannot fail and needs nothing saved to
// undo (writeVisible). In place it costs the copy alone; a new block
// costs the copy, an allocation, a free and the tree's change.
func hostInPlace(b *block) bool { return b.Host(0, 0) != nil }

// writeVisible writes in place over rows a reader may see, one copy per
// run of blocks that follow one another, keeping what each write replaces
// (but the last's) so that a failure can put it back. Where the blocks
// are memory of the process a copy cannot fail: it copies, keeping nothing.
func (tx *writeTx) writeVisible() error {
	h := tx.h
	if tx.visibleOnHost() {
		return nil
	}
	var buf [8]visibleRun // a decode step's runs, on the stack
	runs := buf[:0]
	for i := 0; i < len(tx.ops); i++ {
		if o := &tx.ops[i]; o.visible && o.src != nil {
			src, last := tx.run(i, oldBlock)
			runs = append(runs, visibleRun{dst: o.old.Ptr() + device.Ptr(o.off), src: src})
			i = last
		}
	}
	n := 0 // the bytes to save
	for _, r := range runs[:max(0, len(runs)-1)] {
		n += len(r.src)
	}
	saved := h.saved
	if cap(saved) < n {
		saved = make([]byte, n)
	}
	if cap(saved) <= maxKeptSaved {
		h.saved = saved // short: kept for the next write
	}
	saved = saved[:n]
	b := h.pool.b
	for k := range runs {
		r := &runs[k]
		if k < len(runs)-1 {
			r.saved, saved = saved[:len(r.src):len(r.src)], saved[len(r.src):]
			if err := b.CopyDtoH(r.saved, r.dst); err != nil {
				return errors.Join(err, tx.restore(runs[:k]))
			}
		}
		if err := b.CopyHtoD(r.dst, r.src); err != nil {
			return errors.Join(err, tx.restore(runs[:k]))
		}
	}
	return nil
}

// visibleOnHost makes writeVisible's copies where the blocks are memory
// of the process (a pool's are all so or none), and reports whether they
// were.
func (tx *writeTx) visibleOnHost() bool {
	for i := range tx.ops {
		o := &tx.ops[i]
		if !o.visible || o.src == nil {
			continue
		}
		d := o.old.Host(o.off, len(o.src))
		if d == nil {
			return false
		}
		copy(d, o.src)
	}
	return true
}

// maxKeptSaved bounds the buffer a head keeps for what its next write in
// place overwrites (writeVisible): a decode step's, not a bulk write's.
const maxKeptSaved = 4 << 10

// visibleRun is one in-place copy over rows a reader may see: src to dst,
// and what dst held before.
type visibleRun struct {
	dst   device.Ptr
	src   []byte
	saved []byte
}

// restore puts back the rows saved before in-place writes runs.
func (tx *writeTx) restore(runs []visibleRun) error {
	var errs []error
	for _, r := range runs {
		if err := tx.h.pool.b.CopyHtoD(r.dst, r.saved); err != nil {
			errs = append(errs, fmt.Errorf("restoring rows after a failed write: %w", err))
		}
	}
	return errors.Join(errs...)
}

// abort undoes a write that failed before its commit: it gives back
// every block the write took (undo) and returns err with the call's
// context. A write whose caller wrote rows in place (Step) aborts with
// abortStep, which rebuilds the version before into those blocks.
func (tx *writeTx) abort(err error) error {
	tx.h.pool.free(tx.undo(nil))
	return tx.h.errorf(tx.op, "%w", err)
}

// undo drops the write's references to the blocks it took and appends to
// back those it held alone: every abort's first step.
func (tx *writeTx) undo(back []*block) []*block {
	for _, b := range tx.taken {
		releaseBlock(b, &back)
	}
	tx.taken = nil
	return back
}

// spans returns, per column, where rows [from, to) lie once the write
// commits: in the new block of each operation, else in the old one.
//
// The spans are the head's to reuse (a step a decode step, they were most
// of what it allocated): valid until the next call on h, which a step
// function, that must not call any state, never makes.
func (tx *writeTx) spans() [][]device.Span {
	h := tx.h
	ncols := len(h.rowBytes)
	if cap(h.stepCols) < ncols {
		h.stepCols = make([][]device.Span, ncols)
	}
	if cap(h.stepSpans) < len(tx.ops) {
		h.stepSpans = make([]device.Span, len(tx.ops))
	}
	out, flat := h.stepCols[:ncols], h.stepSpans[:0]
	for c := range out {
		start := len(flat)
		for i := range tx.ops {
			if o := &tx.ops[i]; o.col == c {
				b, rows := tx.lands(o)
				flat = append(flat, device.Span{Ptr: b.Ptr() + device.Ptr(o.off), Rows: rows})
			}
		}
		out[c] = flat[start:len(flat):len(flat)]
	}
	return out
}

// lands returns the block that o's rows lie in once the write commits (o's
// new block, else its old one) and how many of rows [from, to) it holds.
func (tx *writeTx) lands(o *blockOp) (*block, int) {
	b := o.nb
	if b == nil {
		b = o.old
	}
	per, rb := tx.h.perBlock[o.col], tx.h.rowBytes[o.col]
	row := o.idx*per + o.off/rb
	return b, min(tx.to, (o.idx+1)*per) - row
}

// copyRun is a range of device memory that one copy fills: rows that
// follow one another in blocks that follow one another in one allocation.
type copyRun struct {
	ptr   device.Ptr
	bytes int
	blk   *block // the block the run begins in
}

// runs returns where rows [from, to) lie once the write commits (in the
// new block of each operation, else in the old one), column after column
// in row order, neighbouring blocks joined into one run: across columns
// too, for a source that holds the columns one after another (the async
// path's staging buffer), when a column's last block ends where the next
// column's first begins.
func (tx *writeTx) runs() []copyRun {
	h := tx.h
	var out []copyRun
	var prev *block
	for i := range tx.ops {
		o := &tx.ops[i]
		b, rows := tx.lands(o)
		n := rows * h.rowBytes[o.col]
		ptr := b.Ptr() + device.Ptr(o.off)
		if k := len(out) - 1; k >= 0 && o.off == 0 && b.Follows(prev) &&
			out[k].ptr+device.Ptr(out[k].bytes) == ptr {
			out[k].bytes += n
		} else {
			out = append(out, copyRun{ptr: ptr, bytes: n, blk: b})
		}
		prev = b
	}
	return out
}

// commit puts the new blocks in the head's root (a copy of it when it is
// shared), as a new version of newRows rows, and frees what they replace.
// It cannot fail.
func (tx *writeTx) commit(newRows int) *root {
	h := tx.h
	freed := h.freeing()
	var leaf [fan]*block // wholeLeaf's
	r := h.r.own(&freed)
	for i := 0; i < len(tx.ops); i++ {
		o := &tx.ops[i]
		if o.nb == nil {
			continue
		}
		t := &r.cols[o.col]
		if tx.wholeLeaf(i, &leaf) {
			t.setLeaf(o.idx, &leaf, &freed)
			i += fan - 1
			continue
		}
		if o.fill > 0 {
			o.nb.SetFill(o.fill)
		}
		t.set(o.idx, o.nb, &freed)
		// The operations after it in the same leaf set their slots
		// there: the path from the root is the tree's alone now.
		for leaf := t.leafAt(o.idx); i+1 < len(tx.ops); i++ {
			next := &tx.ops[i+1]
			if next.nb == nil || next.col != o.col || next.idx != o.idx+1 || next.idx&(fan-1) == 0 {
				break
			}
			if next.fill > 0 {
				next.nb.SetFill(next.fill)
			}
			leaf.put(t, next.idx, next.nb, &freed)
			o = next
		}
	}
	r.rows = newRows
	h.expire(r, &freed)
	h.r = r
	h.writeFrom = tx.from // the rows before it keep their blocks
	h.commitVersion()
	h.free(h.pool, freed)
	return r
}

// maxKeptFreed is the longest list of freed blocks a head keeps for its
// next write (freeing).
const maxKeptFreed = 64

// freeing returns an empty list for a write to gather the blocks it gives
// back in, which free frees: the head's own, so that a decode step that
// replaces blocks allocates no list. h.mu is held.
func (b *writeBufs) freeing() []*block { return b.freed[:0] }

// free gives the blocks of freed, a list from freeing, back to p, and
// keeps the list when it is short. h.mu is held.
func (b *writeBufs) free(p *Pool, freed []*block) {
	p.free(freed)
	if cap(freed) <= maxKeptFreed {
		clear(freed)
		b.freed = freed[:0]
	}
}

// wholeLeaf reports whether ops[i] and the fan-1 operations after it
// replace one whole leaf of a column (indices [k*fan, (k+1)*fan), each
// with a new block), and puts their new blocks in leaf when they do.
func (tx *writeTx) wholeLeaf(i int, leaf *[fan]*block) bool {
	o := &tx.ops[i]
	if o.idx&(fan-1) != 0 || i+fan > len(tx.ops) {
		return false
	}
	for k := range fan {
		n := &tx.ops[i+k]
		if n.nb == nil || n.col != o.col || n.idx != o.idx+k {
			return false
		}
		leaf[k] = n.nb
	}
	for k := range fan {
		if n := &tx.ops[i+k]; n.fill > 0 {
			n.nb.SetFill(n.fill)
		}
	}
	return true
}

// touchOld says which old blocks a write read or wrote: those it copies
// rows of onto their new blocks (copy on write) and those it writes in
// place.
func (tx *writeTx) touchOld() {
	for i := range tx.ops {
		if o := &tx.ops[i]; o.old != nil && (o.nb == nil || o.keep > 0) {
			o.old.Touch()
		}
	}
}
