package store

import (
	"errors"

	"github.com/gpustate/gpustate/runtime/device"
)

// The short path of Append, AppendAsync and AppendDevice: an append whose
// rows, in every column, go on in the column's tail block and then in new
// blocks past the column's end, as a decode step's row and a prefill's
// batch do. The tail block takes them in place by the rule plan asks
// (tailInPlace): the head's alone, or shared with versions whose rows all
// end where the append begins, as a draft's snapshot's do. It skips the
// plan of write.go and makes the same version the general path would: the
// rows copied in one backend batch (or queued on a stream, with their
// event, in one; or left for a kernel), one copy per run of blocks that
// follow one another in memory; the new blocks set a leaf at a time; the
// window expired, the version committed (commitVersion: the lineage, the
// pool's logical bytes and the parts' changed hooks). The calls run the
// parts' committed hooks after either path (docs/INTERNALS.md, "The
// store's map").

// appendRows appends the rows of tx, past the head's last, on the short
// path: copied from cols, or, when q is not nil, queued from q's staging
// buffer (AppendAsync), or, with neither, left for a kernel to write
// (AppendDevice). It reports false, having done nothing (tx as it was),
// when the append does not have its shape; on failure it changes nothing
// and gives back the blocks it took.
func (tx *writeTx) appendRows(cols [][]byte, q *rowQueue) (bool, error) {
	h, r, from, to := tx.h, tx.h.r, tx.from, tx.to
	n := to - from
	if n <= 0 || len(h.rowBytes) > maxRowCols {
		return false, nil
	}
	var tails [maxRowCols]*block // per column: the tail block written in place, or nil for a new one
	var first [maxRowCols]int    // per column: the block the rows begin in
	at := noTails
	counts := h.countBuf[:0]
	need := 0
	for c, per := range h.perBlock {
		// One division a column: a call's divisions by a variable
		// were a twentieth of a one-row append's time.
		bi, t, k := from/per, &r.cols[c], 0
		first[c] = bi
		switch off := from - bi*per; {
		case to > (bi+1)*per:
			return tx.appendBulk(cols, q) // more than one block
		case off == 0 && bi == t.n:
			k = 1
		case off != 0 && bi < t.n:
			at[c] = bi
		default:
			return false, nil
		}
		counts = append(counts, k)
		need += k
	}
	h.countBuf = counts
	if !tx.takeTails(r, &at, &tails) {
		return false, nil
	}
	blks, err := tx.takeNew(counts, need)
	if err != nil {
		tx.returnTails(&tails)
		return true, err
	}
	for c, b := range tails[:len(counts)] {
		if b == nil {
			tails[c], blks = blks[0], blks[1:]
		}
	}
	switch {
	case q != nil:
		var runs [maxRowCols]copyRun
		q.landed, err = h.queueCopies(q.sb, q.st, tx.rowRuns(runs[:0], tails[:len(counts)]), q.buf)
	case cols != nil:
		cs := h.copies[:0]
		for c, b := range tails[:len(counts)] {
			rb := h.rowBytes[c]
			cs = toBlock(cs, b, (from-first[c]*h.perBlock[c])*rb, cols[c][:n*rb])
		}
		err = copiesHtoD(h.pool.b, cs)
		clear(cs) // the caller's batch is not kept
		h.copies = cs[:0]
	}
	if err != nil {
		return true, tx.abort(err)
	}
	if q != nil {
		q.record(h, tails[:len(counts)], nil)
	}
	freed := h.freeing()
	r = tx.ownRoot(&freed)
	for c, k := range counts {
		tails[c].SetFill((to - first[c]*h.perBlock[c]) * h.rowBytes[c]) // the head's, or claimed by it (see plan)
		if k == 1 {
			r.cols[c].set(first[c], tails[c], &freed)
		}
	}
	tx.commitAppend(r, freed)
	return true, nil
}

// noTails is a list of tail block indices with none: takeTails's input
// before the columns whose rows begin inside their tail block say which.
var noTails = [maxRowCols]int{-1, -1, -1, -1, -1, -1, -1, -1}

// takeTails sets tails[c] to block at[c] of column c of r, for every
// column with at[c] >= 0, when the append tx may write its rows there in
// place (tailInPlace), and reports whether every such column's may. When
// one's may not, it gives back the claims it made and sets no tail: the
// append takes the general path, which copies that block on write.
func (tx *writeTx) takeTails(r *root, at *[maxRowCols]int, tails *[maxRowCols]*block) bool {
	h := tx.h
	alone := r.unique()
	tx.tailClaims = 0
	for c := range h.perBlock {
		if at[c] < 0 {
			continue
		}
		ok, cl := tx.tailInPlace(r, c, at[c], alone)
		if !ok {
			tx.returnTails(tails)
			return false
		}
		tails[c] = r.cols[c].get(at[c])
		if cl {
			tx.tailClaims |= 1 << c
		}
	}
	return true
}

// returnTails gives back the claims takeTails made on the fills of
// tails, and forgets the tails, for an append that fails before it
// writes: every fill comes back to where the versions' rows end
// (writeTx.returnClaims).
func (tx *writeTx) returnTails(tails *[maxRowCols]*block) {
	for c, b := range tails {
		if b != nil && tx.tailClaims&(1<<c) != 0 {
			from, to := tx.tailBytes(c)
			b.ReturnFill(to, from)
		}
		tails[c] = nil
	}
	tx.tailClaims = 0
}

// tailBytes returns the bytes of column c's tail block, the block where
// the append tx's rows begin, that the append writes.
func (tx *writeTx) tailBytes(c int) (from, to int) {
	per, rb := tx.h.perBlock[c], tx.h.rowBytes[c]
	start := tx.from / per * per
	return (tx.from - start) * rb, (min(tx.to, start+per) - start) * rb
}

// tailInPlace reports whether the append tx may write its rows of column
// c in block i of r, where they begin, in place (inPlace, plan's rule),
// and whether it claimed the bytes.
func (tx *writeTx) tailInPlace(r *root, c, i int, alone bool) (ok, claimed bool) {
	from, to := tx.tailBytes(c)
	return tx.inPlace(&r.cols[c], i, alone, from, to)
}

// ownRoot makes the head's root its own to change (root.own), for an
// append on the short path that found it shared with a snapshot or a
// branch, and returns it: its nodes stay shared until the append sets a
// block under them, which copies them (tree.set).
func (tx *writeTx) ownRoot(freed *[]*block) *root {
	h := tx.h
	h.r = h.r.own(freed)
	return h.r
}

// takeNew admits the append tx and takes the need new blocks it writes,
// counts[c] for column c, in column order, their fills kept (handFilled):
// both paths set every new block's fill before the commit shares it.
func (tx *writeTx) takeNew(counts []int, need int) ([]*block, error) {
	h := tx.h
	if err := tx.admit(); err != nil {
		return nil, err
	}
	if need == 0 {
		return nil, nil
	}
	blks, err := h.allocCols(h.scratch, counts, handFilled)
	if err != nil {
		return nil, h.errorf(tx.op, "%w", err)
	}
	h.scratch = blks[:0]
	tx.taken = blks
	return blks, nil
}

// appendBulk is appendRows for rows that take more than one block in
// some column: in every column they go on in the tail block (held by the
// head alone), then in new blocks past the column's end, copied a run of
// neighbouring blocks at a time, and set a leaf at a time. It reports
// false, having done nothing, when the append does not have that shape.
func (tx *writeTx) appendBulk(cols [][]byte, q *rowQueue) (bool, error) {
	h, r := tx.h, tx.h.r
	var tails [maxRowCols]*block // per column: the tail block written in place, or nil
	counts, need, ok := tx.bulkCounts(r, &tails)
	if !ok {
		return false, nil
	}
	blks, err := tx.takeNew(counts, need)
	if err != nil {
		tx.returnTails(&tails)
		return true, err
	}
	switch {
	case q != nil:
		var runs [2 * maxRowCols]copyRun
		q.landed, err = h.queueCopies(q.sb, q.st, tx.appendRuns(runs[:0], tails[:len(counts)], blks, counts), q.buf)
	case cols != nil:
		err = tx.copyAppend(cols, tails[:len(counts)], blks, counts)
	}
	if err != nil {
		return true, tx.abort(err)
	}
	if q != nil {
		q.record(h, tails[:len(counts)], blks)
	}
	freed := h.freeing()
	r = tx.ownRoot(&freed)
	for c, k := range counts {
		if q != nil || cols != nil {
			tx.setFills(c, tails[c], nil) // the new blocks' with their runs
		} else {
			tx.setFills(c, tails[c], blks[:k])
		}
		r.cols[c].appendBlocks(blks[:k], &freed)
		blks = blks[k:]
	}
	tx.commitAppend(r, freed)
	return true, nil
}

// setFills records the fill of the blocks of column c the append tx
// wrote, the head's alone: its tail block (nil when the rows began a
// block) and the new blocks after it (see plan).
func (tx *writeTx) setFills(c int, tail *block, blks []*block) {
	from, to := tx.from, tx.to
	per, rb := tx.h.perBlock[c], tx.h.rowBytes[c]
	next := from / per
	if tail != nil {
		tail.SetFill((min(to, (next+1)*per) - next*per) * rb)
		next++
	}
	for j, b := range blks {
		i := next + j
		b.SetFill((min(to, (i+1)*per) - i*per) * rb)
	}
}

// bulkCounts returns, per column, the new blocks the append tx takes in
// r, and their sum, and sets tails[c] to the column's tail block when the
// rows begin inside it. It reports false when the append does not have
// the short path's shape: a tail block the append may not write in place
// (a copy on write: the general path), or blocks past a column's end.
func (tx *writeTx) bulkCounts(r *root, tails *[maxRowCols]*block) ([]int, int, bool) {
	h, from, to := tx.h, tx.from, tx.to
	counts := h.countBuf[:0]
	need := 0
	at := noTails
	for c, per := range h.perBlock {
		t := &r.cols[c]
		next := from / per // the index of the column's first new block
		if from%per != 0 {
			if next >= t.n {
				return nil, 0, false
			}
			at[c] = next
			next++
		}
		k := max(0, (to+per-1)/per-next)
		if k > 0 && next != t.n {
			return nil, 0, false
		}
		counts = append(counts, k)
		need += k
	}
	h.countBuf = counts
	if !tx.takeTails(r, &at, tails) {
		return nil, 0, false
	}
	return counts, need, true
}

// commitAppend makes r, with the append's rows, the head's new version:
// the window expired, the version committed, freed given back.
func (tx *writeTx) commitAppend(r *root, freed []*block) {
	h := tx.h
	h.writeFrom = r.rows // the rows before it keep their blocks
	r.rows = tx.to
	h.expire(r, &freed)
	h.commitVersion()
	h.free(h.pool, freed)
}

// copyAppend copies the append's rows of cols where appendRows puts
// them: per column, the rest of its tail block (tails[c], when not nil),
// then its counts[c] new blocks, taken in column order from blks; all in
// one backend batch.
func (tx *writeTx) copyAppend(cols [][]byte, tails, blks []*block, counts []int) error {
	h := tx.h
	cs := h.copies[:0]
	var buf [2]copyRun
	for c, k := range counts {
		runs, _ := tx.appendColumnRuns(buf[:0], nil, c, tails[c], blks[:k])
		blks = blks[k:]
		src := cols[c]
		for _, r := range runs {
			cs = toBlock(cs, r.blk, int(r.ptr-r.blk.Ptr()), src[:r.bytes])
			src = src[r.bytes:]
		}
	}
	err := copiesHtoD(h.pool.b, cs)
	clear(cs) // the caller's batch is not kept
	h.copies = cs[:0]
	return err
}

// appendRuns appends to runs where the append's rows go, as copyAppend
// writes them, column after column, a column's rows joined with the
// column's before when they begin where those end, in the block that
// follows in one allocation: the staging buffer holds the columns one
// after another, so one copy fills both (a key block and its value block,
// taken side by side).
func (tx *writeTx) appendRuns(runs []copyRun, tails, blks []*block, counts []int) []copyRun {
	var prev *block
	for c, k := range counts {
		runs, prev = tx.appendColumnRuns(runs, prev, c, tails[c], blks[:k])
		blks = blks[k:]
	}
	return runs
}

// rowRuns is appendRuns for rows that take one block in every column,
// dst[c]: the tail block or a new one.
func (tx *writeTx) rowRuns(runs []copyRun, dst []*block) []copyRun {
	var prev *block
	for c, b := range dst {
		runs, prev = tx.appendColumnRuns(runs, prev, c, b, nil)
	}
	return runs
}

// appendColumnRuns appends to runs where the append's rows of column c go:
// the rest of tail, when not nil, then the new blocks nb, neighbouring
// blocks joined into one run, the first also with the last of runs when
// that ends where it begins, at the end of prev; it returns the runs and
// the block the last one ends in. It sets the fills of the new blocks
// too, while their records are in the cache: the head holds them alone,
// in no version before the append commits, so the fill of one the
// append gives back on failure is read by nobody (Alloc resets it), and
// a bulk append's copy in between evicts them (docs/BENCHMARKS.md,
// "Serving paths"). The tail's, which its version holds, waits for the
// copy (setFills).
func (tx *writeTx) appendColumnRuns(runs []copyRun, prev *block, c int, tail *block, nb []*block) ([]copyRun, *block) {
	from, to := tx.from, tx.to
	rb, per := tx.h.rowBytes[c], tx.h.perBlock[c]
	row := from
	if tail != nil {
		k := min(to, (from/per+1)*per) - from
		runs = addRun(runs, prev, tail, tail.Ptr()+device.Ptr(from%per*rb), k*rb)
		prev, row = tail, from+k
	}
	for _, b := range nb {
		k := min(to-row, per)
		runs = addRun(runs, prev, b, b.Ptr(), k*rb)
		b.SetFill(k * rb) // the head's alone, in no version yet (see setFills)
		prev, row = b, row+k
	}
	return runs, prev
}

// addRun appends to runs the range [ptr, ptr+bytes) of block b, joined
// with the last run when that ends where it begins and b follows prev,
// the block the last run ends in, in one allocation.
func addRun(runs []copyRun, prev, b *block, ptr device.Ptr, bytes int) []copyRun {
	if k := len(runs) - 1; k >= 0 && prev != nil && runs[k].ptr+device.Ptr(runs[k].bytes) == ptr && b.Follows(prev) {
		runs[k].bytes += bytes
		return runs
	}
	return append(runs, copyRun{ptr: ptr, bytes: bytes, blk: b})
}

// rowQueue is where AppendAsync queues its copies: from buf, the staging
// buffer that holds the rows column after column, on st; landed is the
// event after them.
type rowQueue struct {
	sb     device.Streams
	st     device.Stream
	buf    []byte
	landed device.Event
	// recorded says the short path recorded st on the blocks it queued
	// copies to (record), which the caller then need not look up.
	recorded bool
}

// record records q's stream on the blocks the short path queued copies to,
// once they are queued: the tails where not nil, and the new blocks
// news. Before the commit, while their records are in the cache; a block
// the commit expires at once is then freed behind the stream's work.
func (q *rowQueue) record(h *Head, tails, news []*block) {
	h.pool.rec.addWritten(tails, news, q.st)
	q.recorded = true
}

// queueCopies queues on st the copies of buf's rows to runs (buf holds
// the columns one after another, as runs lists them), as one piece of work
// where the backend takes a batch (device.BatchCopier), then the event
// after them, which says both that the rows are on the device and that
// the staging buffer is free again; a backend with device.BatchRecorder
// takes the copies and the event in one call (on the host backend, one
// piece of work: docs/BENCHMARKS.md, "Serving paths"). On failure it
// waits for st (so no copy it queued lands later, in blocks the failed
// write gives back) and returns the error: the write is aborted before
// its commit, and changes nothing.
func (b *writeBufs) queueCopies(sb device.Streams, st device.Stream, runs []copyRun, buf []byte) (device.Event, error) {
	if br, ok := sb.(device.BatchRecorder); ok {
		cs := b.copies[:0]
		off := 0
		for _, r := range runs {
			cs = append(cs, device.HostCopy{Dst: r.ptr, Src: buf[off : off+r.bytes]})
			off += r.bytes
		}
		ev, err := br.CopiesHtoDAsyncRecord(st, cs)
		clear(cs)
		b.copies = cs[:0]
		if err != nil {
			return nil, errors.Join(err, st.Sync())
		}
		return ev, nil
	}
	if err := b.queueRuns(sb, st, runs, buf); err != nil {
		return nil, errors.Join(err, st.Sync())
	}
	ev, err := sb.Record(st)
	if err != nil {
		return nil, errors.Join(err, st.Sync())
	}
	return ev, nil
}

// queueRuns queues the copies of queueCopies.
func (b *writeBufs) queueRuns(sb device.Streams, st device.Stream, runs []copyRun, buf []byte) error {
	bc, batch := sb.(device.BatchCopier)
	if !batch || len(runs) == 1 {
		off := 0
		for _, r := range runs {
			if err := sb.CopyHtoDAsync(st, r.ptr, buf[off:off+r.bytes]); err != nil {
				return err
			}
			off += r.bytes
		}
		return nil
	}
	cs := b.copies[:0]
	off := 0
	for _, r := range runs {
		cs = append(cs, device.HostCopy{Dst: r.ptr, Src: buf[off : off+r.bytes]})
		off += r.bytes
	}
	err := bc.CopiesHtoDAsync(st, cs)
	clear(cs)
	b.copies = cs[:0]
	return err
}
