package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/gpustate/gpustate/runtime/device"
)

// Column returns column i's table as it stands. The error is the failure
// to bring the table up to date (after one more try), ErrReleased after
// Release, or ErrRange for a column the layout lacks.
func (t *BlockTable) Column(i int) (TableColumn, error) {
	if t == nil {
		return TableColumn{}, errNil("BlockTable", "Column")
	}
	t.mu.Lock()
	stale := t.err != nil && !t.released && t.refresh != nil
	t.mu.Unlock()
	if stale {
		t.refresh() // takes the head's lock, then t.mu
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.released {
		return TableColumn{}, fmt.Errorf("state: block table: %w", ErrReleased)
	}
	if t.err != nil {
		return TableColumn{}, t.err
	}
	if i < 0 || i >= len(t.cols) {
		return TableColumn{}, fmt.Errorf("state: block table column %d of %d: %w", i, len(t.cols), ErrRange)
	}
	c := t.cols[i]
	return TableColumn{Ptr: c.ptr, First: c.first, Blocks: c.n, RowsPerBlock: c.perBlock, RowBytes: c.rowBytes}, nil
}

// Release frees the table's device memory (once the streams recorded on
// its handle are done with it). Releasing twice does nothing.
//
//state:release
func (t *BlockTable) Release() error {
	if t == nil {
		return errNil("BlockTable", "Release")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.releaseLocked()
}

func (t *BlockTable) releaseLocked() error {
	if t.released {
		return nil
	}
	t.released = true
	t.pool.tables.remove(t)
	var mem []tableMem
	for _, c := range t.cols {
		if c.ptr != 0 {
			mem = append(mem, tableMem{c.ptr, 8 * c.capacity})
		}
	}
	t.cols = nil
	return t.pool.tables.freeLater(t.pool, mem, t.streams())
}

// sync brings the table up to date with r, whose rows before from are
// those of the version the table stood for (a write's first row; 0 when
// any may differ). A failure leaves each column as it was (a table of the
// version before) and is reported by Column until a later sync succeeds.
func (t *BlockTable) sync(r *root, from int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.released {
		return
	}
	if t.err != nil {
		from = 0 // the table stands for an older version
	}
	if err := t.syncFrom(r, from); err != nil {
		t.err = fmt.Errorf("state: block table: %w", err)
		return
	}
	t.err = nil
}

func (t *BlockTable) syncLocked(r *root) error { return t.syncFrom(r, 0) }

// syncFrom is sync with t.mu held: the entries of the blocks that hold
// rows before from are left unexamined, so that a decode step's append
// costs the entries of its own blocks, not every entry of the table.
func (t *BlockTable) syncFrom(r *root, from int) error {
	var old []tableMem // allocations columns moved from, freed together
	var err error
	for ci := range t.cols {
		c := &t.cols[ci]
		if err = t.syncColumn(c, &r.cols[ci], from/c.perBlock, &old); err != nil {
			break
		}
	}
	// Nothing to report from the free: the new allocations are in place.
	_ = t.pool.tables.freeLater(t.pool, old, t.streams())
	return err
}

// syncColumn brings c up to date with tr, whose entries below start are
// those c holds already. Entries past those the allocation ever held are
// written in place; when an entry it held changes, or the column outgrows
// it, every entry goes to a new allocation and the old one is freed after
// the recorded streams, so a kernel queued with the old one reads the
// blocks of its version. A new allocation starts at the tree's first
// block held (tr.lo): a window's expired blocks are left behind, and a
// window that slides moves its table once in as many appends as the
// allocation has room for past the window's blocks. A column rolled back
// below that block moves its table back.
func (t *BlockTable) syncColumn(c *tableCol, tr *tree, start int, old *[]tableMem) error {
	n := tr.n
	end := c.first + len(c.dev) // past the entries the allocation ever held
	start = max(min(start, n, end), c.first)
	// A column that fell below the allocation's first entry (a rollback
	// to before the window moved the table) moves too: its table must not
	// say blocks [First, Blocks) with Blocks below First.
	moved := n < c.first || n-c.first > c.capacity || (tr.lo < c.first && tr.lo < n)
	for i := start; i < min(n, end) && !moved; i++ {
		moved = i >= tr.lo && uint64(tr.held(i).Ptr()) != c.dev[i-c.first]
	}
	if !moved {
		if n > end {
			k := len(c.dev)
			c.dev = slices.Grow(c.dev, n-end)[:n-c.first]
			clear(c.dev[k:])
			fillEntries(c.dev[k:], tr, end, n)
			t.buf = entryBytes(t.buf[:0], c.dev[k:])
			if err := t.pool.b.CopyHtoD(c.ptr+device.Ptr(8*k), t.buf); err != nil {
				c.dev = c.dev[:k]
				return err
			}
		}
		c.n = n
		return nil
	}
	// Room for half as many entries again: appends write theirs in place
	// until then, so a decode step moves the table once in many. No kernel
	// reads an expired block's entry through the new allocation: those
	// queued before read the old one.
	first := min(tr.lo, n)
	live := n - first
	capacity := max(c.capacity, 8)
	for capacity < live+live/2 {
		capacity *= 2
	}
	want := make([]uint64, live, capacity)
	fillEntries(want, tr, first, n)
	ptr, err := t.pool.tables.alloc(t.pool.b, 8*capacity)
	if err != nil {
		return err
	}
	if err := t.pool.b.CopyHtoD(ptr, entryBytes(nil, want)); err != nil {
		return errors.Join(err, t.pool.b.Free(ptr))
	}
	if c.ptr != 0 {
		*old = append(*old, tableMem{c.ptr, 8 * c.capacity})
	}
	c.ptr, c.capacity, c.first, c.n, c.dev = ptr, capacity, first, n, want
	return nil
}

// fillEntries sets dst[i-from] to the address of tr's block i for i in
// [from, to) past the expired ones (tr.lo), a leaf at a time; the others
// are left as they are (0 in a new table: a block that expired before a
// table held it).
func fillEntries(dst []uint64, tr *tree, from, to int) {
	for i := max(from, tr.lo); i < to; {
		end := min(to, i&^(fan-1)+fan) // the end of i's leaf
		if leaf := tr.leafAt(i); leaf != nil {
			for ; i < end; i++ {
				if b := leaf.blks[i&(fan-1)]; b != nil {
					dst[i-from] = uint64(b.Ptr())
				}
			}
		}
		i = end
	}
}

// entryBytes appends the entries es to buf as the device holds them.
func entryBytes(buf []byte, es []uint64) []byte {
	buf = slices.Grow(buf, 8*len(es))
	for _, e := range es {
		buf = binary.LittleEndian.AppendUint64(buf, e)
	}
	return buf
}

// newTable returns a new table of pool p, of r's blocks, as shape sh lays
// them out, whose frees wait for the streams that streams returns.
func (pt *poolTables) newTable(p *Pool, sh *shape, r *root, streams func() []device.Stream) (*BlockTable, error) {
	t := &BlockTable{pool: p, streams: streams}
	for i := range r.cols {
		t.cols = append(t.cols, tableCol{perBlock: sh.perBlock[i], rowBytes: sh.rowBytes[i]})
	}
	if err := t.syncLocked(r); err != nil {
		return nil, errors.Join(err, t.releaseLocked())
	}
	pt.mu.Lock()
	if pt.live == nil {
		pt.live = make(map[releaser]struct{})
	}
	pt.live[t] = struct{}{}
	pt.mu.Unlock()
	return t, nil
}

// remove forgets t, released.
func (pt *poolTables) remove(t releaser) {
	pt.mu.Lock()
	delete(pt.live, t)
	pt.mu.Unlock()
}

// releaseLive frees the device memory of every table still live, for
// Close.
func (pt *poolTables) releaseLive() error {
	pt.mu.Lock()
	live := make([]releaser, 0, len(pt.live))
	for t := range pt.live {
		live = append(live, t)
	}
	pt.mu.Unlock()
	var errs []error
	for _, t := range live {
		errs = append(errs, t.Release())
	}
	return errors.Join(errs...)
}

// maxTableMem bounds the allocations the pool keeps for the next tables
// (poolTables.alloc).
const maxTableMem = 16

// alloc returns device memory of bytes bytes of backend b for a table's
// column: a kept allocation of that size, else a new one. A decode loop
// that snapshots each step moves the tables of the columns whose shared
// tail block it copies each step; a backend Alloc and Free a step (mmap
// and munmap on the host, cuMemAlloc and cuMemFree on a device) cost more
// than the entries.
func (pt *poolTables) alloc(b device.Backend, bytes int) (device.Ptr, error) {
	pt.mu.Lock()
	for i, m := range pt.kept {
		if m.bytes == bytes {
			pt.kept = slices.Delete(pt.kept, i, i+1)
			pt.mu.Unlock()
			return m.ptr, nil
		}
	}
	pt.mu.Unlock()
	return b.Alloc(bytes)
}

// freeLater gives back table memory of pool p once the streams' work
// queued so far is done, without waiting (Close and WaitPending wait for
// it): kept for the next tables while fewer than maxTableMem are kept and
// the pool is open, else freed.
func (pt *poolTables) freeLater(p *Pool, mem []tableMem, streams []device.Stream) error {
	if len(mem) == 0 {
		return nil
	}
	if len(streams) == 0 {
		return pt.keep(p.b, mem)
	}
	p.mem.Later(fence(p.b, streams), func() {
		pt.keep(p.b, mem) // nobody is left to tell of a failure
	})
	return nil
}

// keep keeps what of mem there is room for and frees the rest to backend
// b.
func (pt *poolTables) keep(b device.Backend, mem []tableMem) error {
	pt.mu.Lock()
	k := 0
	if !pt.closed {
		k = min(len(mem), maxTableMem-len(pt.kept))
		pt.kept = append(pt.kept, mem[:k]...)
	}
	pt.mu.Unlock()
	var errs []error
	for _, m := range mem[k:] {
		errs = append(errs, b.Free(m.ptr))
	}
	return errors.Join(errs...)
}

// close frees the table memory kept, to backend b, for Pool.Close: memory
// given back later is freed at once.
func (pt *poolTables) close(b device.Backend) error {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.closed = true
	var errs []error
	for _, m := range pt.kept {
		errs = append(errs, b.Free(m.ptr))
	}
	pt.kept = nil
	return errors.Join(errs...)
}

// add makes a new table of h's blocks, which h's writes keep current, and
// joins the table part to h's parts. h.mu is held.
func (tp *tablePart) add(h *Head) (*BlockTable, error) {
	t, err := h.pool.tables.newTable(h.pool, &h.shape, h.r, h.async.streams.get)
	if err != nil {
		return nil, err
	}
	t.refresh = func() {
		if h.pool.enterAt(h.gate) != nil {
			return // closed: the table is released
		}
		defer h.pool.leaveAt(h.gate)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.evicted && !h.released {
			// Evicted, or in the host tier: a call rebuilds it or
			// brings it back (or answers why not), and the tables
			// follow the blocks it comes back to.
			// land: a kernel handed the entries next reads the rows.
			if err := h.prepareLocked(call{op: "BlockTable", land: true}); err != nil {
				t.mu.Lock()
				t.err = fmt.Errorf("state: block table: %w", err)
				t.mu.Unlock()
				return
			}
		}
		if !h.released && h.r != nil {
			t.sync(h.r, 0)
		}
	}
	tp.list = append(tp.list, t)
	h.parts |= partTables
	return t, nil
}

// gone says to the tables that the blocks they stand for were freed
// (evicted, or moved to the host tier): Column answers err until a call
// brings the head back, or its refresh does. The head's mu is held.
func (tp *tablePart) gone(err error) {
	for _, t := range tp.list {
		t.mu.Lock()
		t.err = err
		t.mu.Unlock()
	}
}

// changed brings h's tables up to date with its new root, from the first
// row the change touched (Head.writing).
func (tp *tablePart) changed(h *Head) {
	if len(tp.list) > 0 {
		tp.sync(h.r, h.writeFrom)
	}
}

// release frees h's tables with h.
func (tp *tablePart) release(_ *Head, freed []*block) []*block {
	releaseTables(tp.list)
	tp.list = nil
	return freed
}

// sync brings the live tables up to date with r, the head's root, from
// row from (BlockTable.sync); the head's mu is held.
func (tp *tablePart) sync(r *root, from int) {
	live := tp.list[:0]
	for _, t := range tp.list {
		t.mu.Lock()
		rel := t.released
		t.mu.Unlock()
		if !rel {
			t.sync(r, from)
			live = append(live, t)
		}
	}
	clear(tp.list[len(live):])
	tp.list = live
}

func releaseTables(ts []*BlockTable) {
	for _, t := range ts {
		t.Release() // frees that fail have no caller left to tell
	}
}
