package store

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gpustate/gpustate/runtime/device"
)

// shape is what a head and its snapshots know of their layout and pool.
type shape struct {
	pool   *Pool
	l      *Layout
	owner  Owner
	rowSum int64 // bytes of one row over every column
	rows   int   // rows per block; 0: the pool's one block size
	*columns
}

// columns is the per-column part of a shape. It never changes once
// newShape made it, so every head and snapshot of a line shares one:
// a branch or a snapshot copies a pointer, not five slices, which keeps
// Head and Snap small (docs/INTERNALS.md, "The store's map").
type columns struct {
	rowBytes []int // per column
	perBlock []int // rows per block, per column
	// blockBytes gives each column's block size, colClasses its class.
	blockBytes []int
	colClasses
}

// colClasses gives each column's block class (cls) and lists the distinct
// classes, in the order columns first use them (classes): a shape's, or
// a delta's, whose blocks are sized to its rows (allocDelta).
type colClasses struct {
	cls     []*sizeClass
	classes []*sizeClass
}

// shapeCacheMax bounds the layouts a pool remembers; past it, new layouts
// get a shape of their own.
const shapeCacheMax = 64

// cachedShape returns p's shape of l, with no owner, when p made one of a
// layout equal to l passed at the same address: generated code passes one
// package-level layout per state type, so that a new head of a type the
// pool has seen computes no shape and allocates none. The cached shape
// holds its own copy of the layout.
func cachedShape(p *Pool, l *Layout) (shape, bool) {
	if l == nil {
		return shape{}, false
	}
	p.shapes.Lock()
	sh, ok := p.shapes.m[l].(*shape)
	p.shapes.Unlock()
	if !ok || !sh.l.equal(l) {
		return shape{}, false
	}
	return *sh, true
}

// cacheShape makes the shape of a copy of l, a checked layout, and caches
// it while there is room.
func cacheShape(p *Pool, l *Layout) shape {
	sh := newShape(p, l.clone(), "")
	p.shapes.Lock()
	if p.shapes.m == nil {
		p.shapes.m = make(map[*Layout]any)
	}
	if _, ok := p.shapes.m[l]; ok || len(p.shapes.m) < shapeCacheMax {
		p.shapes.m[l] = &sh
	}
	p.shapes.Unlock()
	return sh
}

func newShape(p *Pool, l *Layout, owner Owner) shape {
	sh := shape{pool: p, l: l, owner: owner, rows: p.blockRows(l), columns: &columns{blockBytes: p.columnBlockBytes(l)}}
	for i, c := range l.Columns {
		rb := c.rowBytes()
		bb := sh.blockBytes[i]
		cl := p.mem.Class(bb)
		sh.cls = append(sh.cls, cl)
		if !slices.Contains(sh.classes, cl) {
			sh.classes = append(sh.classes, cl)
		}
		sh.rowBytes = append(sh.rowBytes, rb)
		per := bb / rb
		if l.BlockRows > 0 || l.ShareKey != "" {
			per = min(per, sh.rows) // the same rows in every column, even where alignment leaves room
		}
		sh.perBlock = append(sh.perBlock, per)
		sh.rowSum += int64(rb)
	}
	return sh
}

// allocCols returns, for each column c, counts[c] new blocks of its size
// for the owner, in column order, appended to buf[:0]; all or none
// (allocColsOf).
func (sh *shape) allocCols(buf []*block, counts []int, hand handing) ([]*block, error) {
	return sh.allocColsOf(&sh.colClasses, buf, counts, hand)
}

// allocColsOf returns, for each column c, counts[c] new blocks of class
// k.cls[c] for the owner, in column order, appended to buf[:0]; all or
// none. With several classes it takes each class's blocks into buf's
// first half, then puts them in column order in its second half and back:
// a buffer reused from one call to the next (Head.scratch) makes it
// allocate nothing. Several classes are taken with no reclaim first; only
// when eviction could make room for every one of them are they taken
// again with it, so that a call that fails anyway evicts nothing for the
// classes before the one that fails.
func (sh *shape) allocColsOf(k *colClasses, buf []*block, counts []int, hand handing) ([]*block, error) {
	p := sh.pool
	total := 0
	for _, n := range counts {
		total += n
	}
	if cl := k.soleClass(counts); cl != nil {
		// Every block asked for is of one class (a one-row append of
		// keys and values of one size): taken in address order, as the
		// columns come.
		return p.allocIn(buf, cl, sh.owner, total, hand)
	}
	var start [8]int // where each class's blocks start in out
	first := start[:0]
	if len(k.classes) > len(start) {
		first = make([]int, 0, len(k.classes))
	}
	out, first, err := sh.takeClasses(k, buf[:0], first, counts, hand, p.allocTry)
	if err != nil && errors.Is(err, ErrNoMemory) && sh.pool.roomForAll(k.classes, k.classCounts(counts), errors.Is(err, device.ErrOutOfMemory)) {
		out, first, err = sh.takeClasses(k, buf[:0], first[:0], counts, hand, p.allocIn)
	}
	if err != nil {
		return buf[:0], err
	}
	out = slices.Grow(out, total) // after the allocations, which refuse sizes beyond the pool
	ordered := out[total:total]
	for c, n := range counts {
		ci := slices.Index(k.classes, k.cls[c])
		ordered = append(ordered, out[first[ci]:first[ci]+n]...)
		first[ci] += n
	}
	copy(out, ordered)
	clear(ordered)
	return out[:total], nil
}

// takeClasses takes each class of k's blocks for counts with alloc,
// appended to out, and where each class's start in first; all or none.
func (sh *shape) takeClasses(k *colClasses, out []*block, first []int, counts []int, hand handing,
	alloc func([]*block, *sizeClass, Owner, int, handing) ([]*block, error)) ([]*block, []int, error) {
	for _, cl := range k.classes {
		first = append(first, len(out))
		blks, err := alloc(out[len(out):len(out)], cl, sh.owner, k.classCount(cl, counts), hand)
		if err != nil {
			var back []*block
			for _, b := range out {
				releaseBlock(b, &back)
			}
			sh.pool.free(back)
			return out[:0], first, err
		}
		out = append(out, blks...) // blks lies there already, unless alloc grew it
	}
	return out, first, nil
}

// soleClass returns the one class of the blocks counts asks for, or nil
// when it asks for blocks of two classes or for none.
func (k *colClasses) soleClass(counts []int) *sizeClass {
	if len(k.classes) == 1 {
		return k.classes[0]
	}
	var cl *sizeClass
	for c, n := range counts {
		switch {
		case n == 0:
		case cl == nil:
			cl = k.cls[c]
		case k.cls[c] != cl:
			return nil
		}
	}
	return cl
}

// classCounts returns, per class of k.classes, the blocks counts asks
// for.
func (k *colClasses) classCounts(counts []int) []int {
	ns := make([]int, len(k.classes))
	for i, cl := range k.classes {
		ns[i] = k.classCount(cl, counts)
	}
	return ns
}

// classCount returns the blocks of class cl that counts asks for.
func (k *colClasses) classCount(cl *sizeClass, counts []int) int {
	n := 0
	for c, m := range counts {
		if k.cls[c] == cl {
			n += m
		}
	}
	return n
}

// physical returns the bytes of the blocks r references.
func (sh *shape) physical(r *root) int64 {
	if r == nil {
		return 0
	}
	var n int64
	for c, t := range r.cols {
		n += int64(t.n-t.lo) * int64(sh.blockBytes[c])
	}
	return n
}

// errorf returns an error with the call's context: "state: T.op: ...".
func (sh *shape) errorf(op, format string, args ...any) error {
	return fmt.Errorf("state: %s.%s: "+format, append([]any{sh.l.Type, op}, args...)...)
}

// batchRows returns the rows in a batch: one []byte per column, each a
// whole number of rows, the same number in every column.
func (sh *shape) batchRows(op string, cols [][]byte) (int, error) {
	if len(cols) != len(sh.rowBytes) {
		return 0, sh.errorf(op, "batch has %d columns, the layout %d: %w", len(cols), len(sh.rowBytes), ErrShape)
	}
	n := 0
	for i, c := range cols {
		rb := sh.rowBytes[i]
		if len(c)%rb != 0 {
			return 0, sh.errorf(op, "column %s has %d bytes, not a multiple of its row size %d: %w",
				sh.l.Columns[i].Name, len(c), rb, ErrShape)
		}
		k := len(c) / rb
		if i == 0 {
			n = k
		} else if k != n {
			return 0, sh.errorf(op, "column %s holds %d rows, column %s %d: %w",
				sh.l.Columns[i].Name, k, sh.l.Columns[0].Name, n, ErrShape)
		}
	}
	return n, nil
}

// checkAppend checks an append of n rows after rows: the growth law, the
// bound and the window.
func (sh *shape) checkAppend(op string, rows, n int) error {
	if sh.l.Growth == Mutable {
		return sh.errorf(op, "a mutable state has exactly its bound of %d rows: %w", sh.l.Bound, ErrBound)
	}
	if n < 0 {
		return sh.errorf(op, "%d rows: %w", n, ErrRange)
	}
	if sh.l.Bound > 0 && n > sh.l.Bound-rows {
		return sh.errorf(op, "%d rows after %d exceed the bound of %d: %w", n, rows, sh.l.Bound, ErrBound)
	}
	if sh.l.Window > 0 && n > sh.l.Window {
		return sh.errorf(op, "%d rows are more than the window of %d: %w", n, sh.l.Window, ErrBound)
	}
	if sh.l.Bound <= 0 && n > maxInt/2-rows {
		return sh.errorf(op, "%d rows after %d: %w", n, rows, ErrBound)
	}
	return nil
}

// checkWrite checks a write over rows [from, to) of a state of rows rows:
// the growth law and the range.
func (sh *shape) checkWrite(op string, from, to, rows int) error {
	if sh.l.Growth != Mutable {
		return sh.errorf(op, "an append state's rows never change once written: %w", ErrRange)
	}
	if from < 0 || to < from || to > rows {
		return sh.errorf(op, "rows [%d, %d) outside [0, %d): %w", from, to, rows, ErrRange)
	}
	return nil
}

// checkRange checks 0 <= from <= to <= rows.
func (sh *shape) checkRange(op string, from, to, rows int) error {
	if from < 0 || to < from || to > rows {
		return sh.errorf(op, "rows [%d, %d) outside [0, %d): %w", from, to, rows, ErrRange)
	}
	return nil
}

// checkDst checks that dst has one column per field, each holding rows
// [from, to) exactly.
func (sh *shape) checkDst(op string, rows int, dst [][]byte) error {
	return sh.checkSomeDst(op, rows, dst, false)
}

// checkSomeDst is checkDst where, with some, a nil column is one not read.
func (sh *shape) checkSomeDst(op string, rows int, dst [][]byte, some bool) error {
	if len(dst) != len(sh.rowBytes) {
		return sh.errorf(op, "%d destination columns, the layout has %d: %w", len(dst), len(sh.rowBytes), ErrShape)
	}
	for i, d := range dst {
		if some && d == nil {
			continue
		}
		if want := rows * sh.rowBytes[i]; len(d) != want {
			return sh.errorf(op, "column %s: destination has %d bytes, %d rows need %d: %w",
				sh.l.Columns[i].Name, len(d), rows, want, ErrShape)
		}
	}
	return nil
}

// read copies rows [from, to) of r into dst; with some, the columns dst
// holds nil for are not read (ReadColumns). reads, when not nil, is a
// buffer its caller holds alone (a head's, under its lock): with it the
// copies of every column go to the backend in one call where it takes a
// batch (device.BatchReadCopier).
func (sh *shape) read(op string, r *root, from, to int, dst [][]byte, some bool, reads *[]device.HostRead) error {
	if err := sh.checkReadable(op, from, to, r.rows); err != nil {
		return err
	}
	if err := sh.checkSomeDst(op, to-from, dst, some); err != nil {
		return err
	}
	if sh.readHost(r, from, to, dst, some) {
		return nil
	}
	if reads != nil {
		if bc, ok := sh.pool.b.(device.BatchReadCopier); ok {
			return sh.readBatch(op, bc, r, from, to, dst, some, reads)
		}
	}
	for i, d := range dst {
		if d == nil && some {
			continue
		}
		if err := sh.copyColumn(r, i, from, to, d); err != nil {
			return sh.errorf(op, "column %s: %w", sh.l.Columns[i].Name, err)
		}
	}
	return nil
}

// readHost is read's copies where the pool's blocks are memory of the
// process (Block.Host; all are or none), and reports whether they are:
// a built-in copy a block, in order, which cannot fail, so that there is
// no batch to build, no runs to join (a copy a block costs what one a run
// does) and no failed copy to name. The range and dst are checked.
func (sh *shape) readHost(r *root, from, to int, dst [][]byte, some bool) bool {
	if from >= to {
		return false
	}
	if !sh.onHost(r, from) {
		return false
	}
	if sh.readInBlocks(r, from, to, dst, some) {
		return true
	}
	for i, d := range dst {
		if d == nil && some {
			continue
		}
		rb, per, t := sh.rowBytes[i], sh.perBlock[i], &r.cols[i]
		for row, at := from, 0; row < to; {
			bi := row / per
			end := min(to, (bi+1)*per)
			blk := t.get(bi)
			blk.Touch() // its pages are mapped now (estimate.go)
			n := (end - row) * rb
			copy(d[at:at+n], blk.Host((row-bi*per)*rb, n))
			row, at = end, at+n
		}
	}
	return true
}

// readInBlocks is readHost for rows that lie in one block of every
// column, as a decode step's reads of a row or two do, and reports false,
// having copied nothing, for others. It finds every column's source
// before it copies any, so that the columns' walks (the tree, the block,
// the rows), each a chain of loads that miss the cache, overlap instead
// of each waiting for the copy before it.
func (sh *shape) readInBlocks(r *root, from, to int, dst [][]byte, some bool) bool {
	if len(dst) > maxRowCols {
		return false
	}
	for i, d := range dst {
		if per := sh.perBlock[i]; (d != nil || !some) && (to-1)/per != from/per {
			return false // before any walk: none is wasted
		}
	}
	var src [maxRowCols][]byte
	for i, d := range dst {
		if d == nil && some {
			continue
		}
		bi := from / sh.perBlock[i]
		blk := r.cols[i].get(bi)
		blk.Touch() // its pages are mapped now (estimate.go)
		src[i] = blk.Host((from-bi*sh.perBlock[i])*sh.rowBytes[i], (to-from)*sh.rowBytes[i])
	}
	for i, d := range dst {
		copy(d, src[i])
	}
	return true
}

// onHost reports whether r's blocks are memory of the process: row, of r
// and readable, has its blocks.
func (sh *shape) onHost(r *root, row int) bool {
	return r.cols[0].get(row/sh.perBlock[0]).Host(0, 0) != nil
}

// readBatch is read's copies, every column's runs in one batch (one copy
// alone goes as CopyDtoH). The copies go in the order read makes them one
// by one, and the batch stops where they would: a copy that fails is
// named by its column, the columns before it read and those after it not.
func (sh *shape) readBatch(op string, bc device.BatchReadCopier, r *root, from, to int, dst [][]byte, some bool, reads *[]device.HostRead) error {
	rs := (*reads)[:0]
	if from < to {
		n := 0 // at most a run a block: the buffer grows once
		for i, d := range dst {
			if d != nil || !some {
				n += (to-1)/sh.perBlock[i] - from/sh.perBlock[i] + 1
			}
		}
		if cap(rs) < n {
			rs = make([]device.HostRead, 0, n)
		}
	}
	for i, d := range dst {
		if d == nil && some {
			continue
		}
		sh.columnRuns(r, i, from, to, func(at int, blk *block, off, n int) error {
			rs = fromBlock(rs, d[at:at+n], blk, off)
			return nil
		})
	}
	k, err := sh.copiesDtoH(bc, rs, reads)
	if err == nil {
		return nil
	}
	for i, d := range dst { // the column of copy k
		if d == nil && some {
			continue
		}
		for row := from; row < to; k-- {
			if k == 0 {
				return sh.errorf(op, "column %s: %w", sh.l.Columns[i].Name, err)
			}
			_, _, row = sh.run(r, i, row, to)
		}
	}
	return sh.errorf(op, "%w", err) // not reached: copy k is one of them
}

// maxKeptReads is the longest batch of copies to the host a head keeps
// its buffer of, as its spare buffers are kept (maxSpareLen): a gather of
// a minibatch makes a copy a row and column, and a head keeps no large
// buffer after a read of thousands of blocks.
const maxKeptReads = maxSpareLen

// copiesDtoH makes the copies rs, in one call where there are several
// (one alone goes as CopyDtoH), and keeps rs's array in *reads, emptied,
// for the next. It returns the index of the copy that failed, if any.
func (sh *shape) copiesDtoH(bc device.BatchReadCopier, rs []device.HostRead, reads *[]device.HostRead) (int, error) {
	var k int
	var err error
	switch len(rs) {
	case 0:
	case 1:
		err = sh.pool.b.CopyDtoH(rs[0].Dst, rs[0].Src)
	default:
		k, err = bc.CopiesDtoH(rs)
	}
	clear(rs) // the caller's columns are not kept
	*reads = rs[:0]
	if cap(rs) > maxKeptReads {
		*reads = nil
	}
	return k, err
}

// copyColumn copies rows [from, to) of column i of r, in range, into d,
// one copy a run of neighbouring blocks.
func (sh *shape) copyColumn(r *root, i, from, to int, d []byte) error {
	return sh.columnRuns(r, i, from, to, func(at int, blk *block, off, n int) error {
		if s := blk.Host(off, n); s != nil {
			copy(d[at:at+n], s)
			return nil
		}
		return sh.pool.b.CopyDtoH(d[at:at+n], blk.Ptr()+device.Ptr(off))
	})
}

// columnRuns calls f for each run of rows [from, to) of column i of r that
// lies in blocks following one another in one allocation: at is the run's
// byte offset from row from, src where it starts, n its bytes.
func (sh *shape) columnRuns(r *root, i, from, to int, f func(at int, blk *block, off, n int) error) error {
	rb := sh.rowBytes[i]
	for row := from; row < to; {
		blk, off, end := sh.run(r, i, row, to)
		if err := f((row-from)*rb, blk, off, (end-row)*rb); err != nil {
			return err
		}
		row = end
	}
	return nil
}

// run finds the run of rows of column i of r that starts at row, row < to:
// the rest of row's block and of the blocks after it that follow one
// another in one allocation, up to to. It returns where the run starts (a
// block and the offset in it) and the row after it, and marks its blocks
// touched (estimate.go).
func (sh *shape) run(r *root, i, row, to int) (*block, int, int) {
	rb, per, bb := sh.rowBytes[i], sh.perBlock[i], sh.blockBytes[i]
	t := &r.cols[i]
	bi := row / per
	end := min(to, (bi+1)*per)
	blk := t.get(bi)
	blk.Touch() // its pages are mapped now (estimate.go)
	for last := blk; end < to && per*rb == bb; end = min(to, end+per) {
		next := t.get(end / per)
		if !next.Follows(last) {
			break
		}
		next.Touch()
		last = next
	}
	return blk, (row - bi*per) * rb, end
}

// spans locates rows [from, to) of r: per column, one span per block.
func (sh *shape) spans(op string, r *root, from, to int) ([][]device.Span, error) {
	out, _, err := sh.spansInto(op, r, from, to, nil, nil)
	return out, err
}

// spansInto is spans in the caller's buffers, cols for the columns and
// all for every column's spans, each made anew where it is too small; it
// returns them, for the caller's next call.
func (sh *shape) spansInto(op string, r *root, from, to int, cols [][]device.Span, all []device.Span) ([][]device.Span, []device.Span, error) {
	if err := sh.checkReadable(op, from, to, r.rows); err != nil {
		return nil, all, err
	}
	if cap(cols) < len(sh.rowBytes) {
		cols = make([][]device.Span, len(sh.rowBytes))
	}
	out := cols[:len(sh.rowBytes)]
	clear(out)
	if from < to {
		n := 0
		for _, per := range sh.perBlock {
			n += (to-1)/per - from/per + 1
		}
		if cap(all) < n {
			all = make([]device.Span, 0, n) // every column's spans, in one allocation
		}
	}
	kept := all[:0]
	for i := range out {
		rb, per := sh.rowBytes[i], sh.perBlock[i]
		t := &r.cols[i]
		if from < to {
			// Capped at the column's spans, so that a caller's append to
			// one column does not write over the next.
			k := (to-1)/per - from/per + 1
			out[i], all = all[:0:k], all[k:k:cap(all)]
		}
		for row := from; row < to; {
			bi := row / per
			end := min(to, (bi+1)*per)
			b := t.get(bi)
			b.Touch() // the caller reads or writes it (estimate.go)
			out[i] = append(out[i], device.Span{Ptr: b.Ptr() + device.Ptr((row-bi*per)*rb), Rows: end - row})
			row = end
		}
	}
	return out, kept, nil
}

func (sh *shape) stats(r *root, v Version) Stats {
	if r == nil {
		return Stats{Version: v}
	}
	return Stats{
		Version:       v,
		Rows:          r.rows,
		LogicalBytes:  sh.logicalOf(r),
		PhysicalBytes: sh.physical(r),
	}
}

// floor returns the first readable row of a version of rows rows.
func (sh *shape) floor(rows int) int {
	if w := sh.l.Window; w > 0 && rows > w {
		return rows - w
	}
	return 0
}

// logicalOf returns the bytes of the readable rows of r.
func (sh *shape) logicalOf(r *root) int64 {
	return int64(r.rows-sh.floor(r.rows)) * sh.rowSum
}

// checkReadable checks 0 <= from <= to <= rows, and that a non-empty range
// starts at or above the window's floor.
func (sh *shape) checkReadable(op string, from, to, rows int) error {
	if err := sh.checkRange(op, from, to, rows); err != nil {
		return err
	}
	if f := sh.floor(rows); from < f && from < to {
		return sh.errorf(op, "rows [%d, %d): rows below %d left the window of %d rows: %w", from, to, f, sh.l.Window, ErrExpired)
	}
	return nil
}

// shareSig describes what a block of the head's layout holds: the layout's
// fields and, per column, its row and block sizes. Heads share blocks only
// when it is equal.
func (sh *shape) shareSig() string {
	l := sh.l
	s := fmt.Sprintf("%q %d %d %d %d %q", l.Type, l.Growth, l.Bound, l.Window, l.BlockRows, l.ShareKey)
	for i, c := range l.Columns {
		s += fmt.Sprintf(" %q:%d*%d/%d/%d", c.Name, c.ElemSize, c.Width, sh.blockBytes[i], sh.perBlock[i])
	}
	return s
}

// shareKey is the key of the table that a head made from the caller's
// layout l registers in, in domain d: l's identity, and what the layout
// held when the head copied it (shareSig). It is the one keying of the
// shared tables: a single head's prefix table has it, and a group's table
// has its members' (groupKeyOf), so that a Layout value reused after a
// change finds a table of its own in both.
func (sh *shape) shareKey(l *Layout, d Domain) tableKey {
	return tableKey{l: l, sig: sh.shareSig(), d: d}
}

// sameRows returns the rows before which roots a and b hold the same
// blocks in every column: the parts (block tables, streams recorded) keep
// their work for those when a head moves from a to b (Head.writeFrom).
func (sh *shape) sameRows(a, b *root) int {
	if a == nil || b == nil {
		return 0
	}
	rows := math.MaxInt
	for c, per := range sh.perBlock {
		rows = min(rows, firstDiff(&a.cols[c], &b.cols[c])*per)
	}
	return rows
}

// Window states (Layout.Window > 0). Row indices are stable: a root's rows
// counts every row ever appended, and only rows [floor, rows) are
// readable, floor being rows-Window (or 0). After each write the head drops
// from its own root the blocks that hold only rows below the floor; a
// block goes back to the pool when no snapshot, branch or other version
// holds it any more. So a head holds at most Window rows plus one block per
// column, beyond what its snapshots pin, and each snapshot keeps the
// readable range of its own version.

// expire drops from r, which its caller holds alone, the blocks of every
// column that hold only rows below the window's floor.
func (sh *shape) expire(r *root, freed *[]*block) {
	f := sh.floor(r.rows)
	if f == 0 {
		return
	}
	for i, per := range sh.perBlock {
		r.cols[i].drop(f/per, freed)
	}
}

// gather copies the rows of r at indices idx into dst. reads is as
// read's: with it, every column's runs go to the backend in one batch.
func (sh *shape) gather(op string, r *root, idx []int, dst [][]byte, reads *[]device.HostRead) error {
	for _, i := range idx {
		if err := sh.checkReadable(op, i, i+1, r.rows); err != nil {
			return err
		}
	}
	if err := sh.checkDst(op, len(idx), dst); err != nil {
		return err
	}
	if len(idx) == 0 {
		return nil
	}
	if sh.onHost(r, idx[0]) {
		sh.gatherHost(r, idx, dst)
		return nil
	}
	b := sh.pool.b
	if bc, ok := b.(device.BatchReadCopier); ok && reads != nil {
		return sh.gatherBatch(op, bc, r, idx, dst, reads)
	}
	for c, d := range dst {
		rb := sh.rowBytes[c]
		for k := 0; k < len(idx); {
			blk, off, n := sh.gatherRun(r, c, idx, k)
			if err := b.CopyDtoH(d[k*rb:(k+n)*rb], blk.Ptr()+device.Ptr(off)); err != nil {
				return sh.errorf(op, "column %s: %w", sh.l.Columns[c].Name, err)
			}
			k += n
		}
	}
	return nil
}

// gatherHost is gather's copies where the blocks are memory of the
// process: runs found a batch at a time, then copied, so that the walks
// to a batch's rows (the tree, the block, the rows), chains of loads that
// miss the cache in a sampled minibatch, overlap instead of each waiting
// for the copy before it, as readInBlocks does for a read. The indices
// and dst are checked.
func (sh *shape) gatherHost(r *root, idx []int, dst [][]byte) {
	const batch = 32
	type run struct {
		src []byte
		at  int // the run's first row in dst
	}
	var runs [batch]run
	for c, d := range dst {
		rb := sh.rowBytes[c]
		for k := 0; k < len(idx); {
			n := 0
			for ; n < batch && k < len(idx); n++ {
				blk, off, rows := sh.gatherRun(r, c, idx, k)
				runs[n] = run{blk.Host(off, rows*rb), k * rb}
				k += rows
			}
			for _, x := range runs[:n] {
				copy(d[x.at:x.at+len(x.src)], x.src)
			}
		}
	}
}

// gatherBatch is gather's copies in one batch, as readBatch makes read's.
func (sh *shape) gatherBatch(op string, bc device.BatchReadCopier, r *root, idx []int, dst [][]byte, reads *[]device.HostRead) error {
	rs := (*reads)[:0]
	for c, d := range dst {
		rb := sh.rowBytes[c]
		for k := 0; k < len(idx); {
			blk, off, n := sh.gatherRun(r, c, idx, k)
			rs = fromBlock(rs, d[k*rb:(k+n)*rb], blk, off)
			k += n
		}
	}
	k, err := sh.copiesDtoH(bc, rs, reads)
	if err == nil {
		return nil
	}
	for c := range dst { // the column of copy k
		for i := 0; i < len(idx); k-- {
			if k == 0 {
				return sh.errorf(op, "column %s: %w", sh.l.Columns[c].Name, err)
			}
			_, _, n := sh.gatherRun(r, c, idx, i)
			i += n
		}
	}
	return sh.errorf(op, "%w", err) // not reached: copy k is one of them
}

// gatherRun finds the run of idx[k:] in column c of r: the rows at idx[k]
// and after it while each index is the next row, in the same block or in
// the next one where it follows in memory. It returns where the run
// starts (a block and the offset in it) and its rows, and marks its
// blocks touched (estimate.go).
func (sh *shape) gatherRun(r *root, c int, idx []int, k int) (*block, int, int) {
	rb, per, bb := sh.rowBytes[c], sh.perBlock[c], sh.blockBytes[c]
	t := &r.cols[c]
	row := idx[k]
	bi := row / per
	n := 1
	first := t.get(bi)
	first.Touch() // its pages are mapped now (estimate.go)
	for last := first; k+n < len(idx) && idx[k+n] == row+n; n++ {
		if nb := (row + n) / per; nb != bi {
			next := t.get(nb)
			if per*rb != bb || !next.Follows(last) {
				break
			}
			next.Touch()
			bi, last = nb, next
		}
	}
	bi = row / per
	return first, (row - bi*per) * rb, n
}
