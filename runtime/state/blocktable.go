package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/gpustate/gpustate/runtime/device"
)

// BlockTable is a device-resident table of a head's or snapshot's blocks,
// per column: an array of the blocks' base addresses (little-endian u64,
// one per block, in row order), so that a kernel finds logical row r of a
// column at table[r / RowsPerBlock] + (r % RowsPerBlock) * RowBytes with no
// host round trip (the block tables of paged attention). A snapshot's table
// never changes; a head's is rewritten, where its blocks changed, by every
// write, rollback and merge of the head (the call that changes the head
// copies the changed entries to the device before it returns). Release it
// when done; releasing its head or snapshot releases it too.
type BlockTable struct {
	pool *Pool
	// streams returns the streams recorded on the table's handle: frees of
	// table memory wait for them as block frees do.
	streams func() []device.Stream

	mu       sync.Mutex
	cols     []tableCol
	err      error // the first failure to bring the table up to date
	released bool
}

type tableCol struct {
	ptr      device.Ptr // nil until the column has a block
	capacity int        // entries the allocation at ptr holds
	host     []uint64   // what the device table holds
	perBlock int
	rowBytes int
}

// TableColumn locates one column's table.
type TableColumn struct {
	// Ptr is the table's device address (0 while the column has no block).
	Ptr device.Ptr
	// Blocks is the number of entries; RowsPerBlock and RowBytes place
	// rows inside a block.
	Blocks, RowsPerBlock, RowBytes int
}

// Column returns column i's table as it stands. The error is the first
// failure to bring the table up to date, ErrReleased after Release, or
// ErrRange for a column the layout lacks.
func (t *BlockTable) Column(i int) (TableColumn, error) {
	if t == nil {
		return TableColumn{}, errNil("BlockTable", "Column")
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
	return TableColumn{Ptr: c.ptr, Blocks: len(c.host), RowsPerBlock: c.perBlock, RowBytes: c.rowBytes}, nil
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
	t.pool.mu.Lock()
	delete(t.pool.tables, t)
	t.pool.mu.Unlock()
	var ptrs []device.Ptr
	for _, c := range t.cols {
		if c.ptr != 0 {
			ptrs = append(ptrs, c.ptr)
		}
	}
	t.cols = nil
	return t.pool.freeLater(ptrs, t.streams())
}

// sync brings the table up to date with r: it rewrites the entries that
// differ, in runs, and grows a column's allocation (doubling it) when r has
// more blocks than it holds.
func (t *BlockTable) sync(r *root) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.released || t.err != nil {
		return
	}
	if err := t.syncLocked(r); err != nil {
		t.err = fmt.Errorf("state: block table: %w", err)
	}
}

func (t *BlockTable) syncLocked(r *root) error {
	b := t.pool.b
	for ci := range t.cols {
		c := &t.cols[ci]
		tr := &r.cols[ci]
		n := tr.n
		if n > c.capacity {
			capacity := max(2*c.capacity, n, 8)
			ptr, err := b.Alloc(8 * capacity)
			if err != nil {
				return err
			}
			if c.ptr != 0 {
				if err := t.pool.freeLater([]device.Ptr{c.ptr}, t.streams()); err != nil {
					return err
				}
			}
			c.ptr, c.capacity = ptr, capacity
			c.host = c.host[:0] // every entry is written below
		}
		old := c.host
		c.host = make([]uint64, n)
		// Entries of expired blocks (below tr.lo) keep what the device
		// holds: no reader of this version reads them, and a kernel queued
		// at an earlier one may; a new table holds 0 there.
		copy(c.host, old[:min(tr.lo, len(old), n)])
		var buf []byte
		start := -1
		flush := func(end int) error {
			if start < 0 {
				return nil
			}
			buf = buf[:0]
			for i := start; i < end; i++ {
				buf = binary.LittleEndian.AppendUint64(buf, c.host[i])
			}
			err := b.CopyHtoD(c.ptr+device.Ptr(8*start), buf)
			start = -1
			return err
		}
		for i := 0; i < n; i++ {
			if i >= tr.lo {
				c.host[i] = uint64(tr.held(i).ptr)
			}
			if i < len(old) && old[i] == c.host[i] {
				if err := flush(i); err != nil {
					return err
				}
				continue
			}
			if start < 0 {
				start = i
			}
		}
		if err := flush(n); err != nil {
			return err
		}
	}
	return nil
}

func (p *Pool) newTable(sh *shape, r *root, streams func() []device.Stream) (*BlockTable, error) {
	t := &BlockTable{pool: p, streams: streams}
	for i := range r.cols {
		t.cols = append(t.cols, tableCol{perBlock: sh.perBlock[i], rowBytes: sh.rowBytes[i]})
	}
	if err := t.syncLocked(r); err != nil {
		return nil, errors.Join(err, t.releaseLocked())
	}
	p.mu.Lock()
	if p.tables == nil {
		p.tables = make(map[*BlockTable]struct{})
	}
	p.tables[t] = struct{}{}
	p.mu.Unlock()
	return t, nil
}

// releaseLiveTables frees the device memory of every table still live, for
// Close: a table is a backend allocation of its own, not a slab's block.
func (p *Pool) releaseLiveTables() error {
	p.mu.Lock()
	live := make([]*BlockTable, 0, len(p.tables))
	for t := range p.tables {
		live = append(live, t)
	}
	p.mu.Unlock()
	var errs []error
	for _, t := range live {
		errs = append(errs, t.Release())
	}
	return errors.Join(errs...)
}

// freeLater frees backend allocations once the streams' work queued so
// far is done, without waiting; Close and WaitPending wait for it.
func (p *Pool) freeLater(ptrs []device.Ptr, streams []device.Stream) error {
	if len(ptrs) == 0 {
		return nil
	}
	if len(streams) == 0 {
		var errs []error
		for _, ptr := range ptrs {
			errs = append(errs, p.b.Free(ptr))
		}
		return errors.Join(errs...)
	}
	p.mu.Lock()
	done := p.addBatchLocked()
	p.mu.Unlock()
	wait := p.fence(streams)
	go func() {
		wait()
		for _, ptr := range ptrs {
			p.b.Free(ptr) // nobody is left to tell of a failure
		}
		p.mu.Lock()
		delete(p.batches, done)
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// BlockTable returns a device-resident table of the head's blocks, kept
// current by the head's writes, rollbacks and merges until it or the head
// is released.
//
//state:acquire
func (h *Head) BlockTable() (*BlockTable, error) {
	unlock, err := h.lock("BlockTable")
	if err != nil {
		return nil, err
	}
	defer unlock()
	t, err := h.pool.newTable(&h.shape, h.r, h.recordedStreams)
	if err != nil {
		return nil, h.errorf("BlockTable", "%w", err)
	}
	h.tables = append(h.tables, t)
	return t, nil
}

// BlockTable returns a device-resident table of the snapshot's blocks. It
// never changes; it is freed by its Release or the snapshot's.
//
//state:acquire
func (s *Snap) BlockTable() (*BlockTable, error) {
	unlock, err := s.rlock("BlockTable")
	if err != nil {
		return nil, err
	}
	defer unlock()
	t, err := s.pool.newTable(&s.shape, s.r, s.recordedStreams)
	if err != nil {
		return nil, s.errorf("BlockTable", "%w", err)
	}
	s.tmu.Lock()
	s.tables = append(s.tables, t)
	s.tmu.Unlock()
	return t, nil
}

// syncTables brings the head's live tables up to date; h.mu is held.
func (h *Head) syncTables() {
	live := h.tables[:0]
	for _, t := range h.tables {
		t.mu.Lock()
		rel := t.released
		t.mu.Unlock()
		if !rel {
			t.sync(h.r)
			live = append(live, t)
		}
	}
	clear(h.tables[len(live):])
	h.tables = live
}

func releaseTables(ts []*BlockTable) {
	for _, t := range ts {
		t.Release() // frees that fail have no caller left to tell
	}
}
