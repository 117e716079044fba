package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// failNth is a backend whose copies to the host fail from the fail-th
// one on (counted from 0 since fail was set; -1: none fails), as a range
// the backend refuses would.
type failNth struct {
	device.Backend
	n, fail int
}

func (f *failNth) CopyDtoH(dst []byte, src device.Ptr) error {
	i := f.n
	f.n++
	if f.fail >= 0 && i >= f.fail {
		return fmt.Errorf("copy %d: %w", i, statetest.ErrInjected)
	}
	return f.Backend.CopyDtoH(dst, src)
}

// failNthBatch is failNth with device.BatchReadCopier: a batch makes its
// copies as failNth's one by one, stopping at the first that fails.
type failNthBatch struct {
	*failNth
	batches int
}

func (f *failNthBatch) CopiesDtoH(cs []device.HostRead) (int, error) {
	f.batches++
	for i, c := range cs {
		if err := f.failNth.CopyDtoH(c.Dst, c.Src); err != nil {
			return i, err
		}
	}
	return len(cs), nil
}

// TestReadBatchAsOneByOne: a head's read through a backend that takes a
// batch of copies to the host (device.BatchReadCopier) makes one call
// where the copies one by one are several, reads what they read, and
// where a copy fails answers the same error, naming the same column, with
// the same columns written before it, for Read and ReadRows; a snapshot's read, a released
// head's and a closed pool's answer alike too.
func TestReadBatchAsOneByOne(t *testing.T) {
	l := kvCacheLayout(64)
	l.BlockRows = 8
	want := seqKV(l, 40, 3)
	const from, to = 3, 37 // runs of several blocks in each column
	type side struct {
		f     *failNth
		batch *failNthBatch
		p     *Pool
		h     *Head
		s     *Snap
	}
	var sides [2]side
	for i := range sides {
		s := &sides[i]
		s.f = &failNth{Backend: statetest.Host(t), fail: -1}
		var b device.Backend = s.f
		if i == 1 {
			s.batch = &failNthBatch{failNth: s.f}
			b = s.batch
		}
		var err error
		s.p, err = NewPool(b, PoolOptions{})
		check(t, err)
		defer s.p.Close()
		s.h = must[*Head](t)(s.p.NewHead(l, "s"))
		defer s.h.Release()
		// Rows appended a few at a time, with another head's between,
		// so that a column's blocks do not all follow one another.
		o := must[*Head](t)(s.p.NewHead(l, "s"))
		defer o.Release()
		for r := 0; r < 40; r += 5 {
			cols := make([][]byte, len(want))
			for c := range cols {
				rb := l.Columns[c].RowBytes()
				cols[c] = want[c][r*rb : (r+5)*rb]
			}
			check(t, s.h.Append(cols))
			check(t, o.Append(cols))
		}
		s.s = new(Snap)
		check(t, s.h.SnapshotInto(s.s))
		defer s.s.Release()
	}
	fresh := func() [][]byte {
		d := zeroRows(l, to-from)
		for _, c := range d {
			for k := range c {
				c[k] = 0xee
			}
		}
		return d
	}
	sides[0].f.n = 0
	got := fresh()
	check(t, sides[0].h.Read(from, to, got))
	copies := sides[0].f.n
	if copies <= len(l.Columns) {
		t.Fatalf("the read made %d copies one by one; the test wants several in some column", copies)
	}
	sides[1].f.n = 0
	got = fresh()
	check(t, sides[1].h.Read(from, to, got))
	if sides[1].batch.batches != 1 || sides[1].f.n != copies {
		t.Fatalf("a batched read made %d batches of %d copies, want 1 of %d", sides[1].batch.batches, sides[1].f.n, copies)
	}
	for c := range got {
		rb := l.Columns[c].RowBytes()
		if !bytes.Equal(got[c], want[c][from*rb:to*rb]) {
			t.Fatalf("a batched read: column %d differs", c)
		}
	}
	for k := range copies {
		var errs [2]error
		var dsts [2][][]byte
		for i := range sides {
			s := &sides[i]
			s.f.n, s.f.fail = 0, k
			dsts[i] = fresh()
			errs[i] = s.h.Read(from, to, dsts[i])
			s.f.fail = -1
		}
		if !errors.Is(errs[1], statetest.ErrInjected) || errs[0].Error() != errs[1].Error() {
			t.Fatalf("copy %d failing: one by one %v, batched %v", k, errs[0], errs[1])
		}
		for c := range dsts[0] {
			if !bytes.Equal(dsts[0][c], dsts[1][c]) {
				t.Fatalf("copy %d failing: column %d written otherwise one by one and batched", k, c)
			}
		}
	}
	// ReadRows: runs of neighbouring rows and rows alone, in any order.
	idx := []int{5, 6, 7, 8, 9, 30, 2, 2, 17, 18, 19, 20, 21, 22, 39}
	gdst := zeroRows(l, len(idx))
	sides[0].f.n = 0
	check(t, sides[0].h.ReadRows(idx, gdst))
	gcopies := sides[0].f.n
	sides[1].f.n, sides[1].batch.batches = 0, 0
	check(t, sides[1].h.ReadRows(idx, gdst))
	if sides[1].batch.batches != 1 || sides[1].f.n != gcopies {
		t.Fatalf("a batched gather made %d batches of %d copies, want 1 of %d", sides[1].batch.batches, sides[1].f.n, gcopies)
	}
	for c := range gdst {
		rb := l.Columns[c].RowBytes()
		for k, i := range idx {
			if !bytes.Equal(gdst[c][k*rb:(k+1)*rb], want[c][i*rb:(i+1)*rb]) {
				t.Fatalf("a batched gather: column %d, row %d differs", c, i)
			}
		}
	}
	for k := range gcopies {
		var errs [2]error
		var dsts [2][][]byte
		for i := range sides {
			s := &sides[i]
			s.f.n, s.f.fail = 0, k
			dsts[i] = zeroRows(l, len(idx))
			errs[i] = s.h.ReadRows(idx, dsts[i])
			s.f.fail = -1
		}
		if !errors.Is(errs[1], statetest.ErrInjected) || errs[0].Error() != errs[1].Error() {
			t.Fatalf("gather, copy %d failing: one by one %v, batched %v", k, errs[0], errs[1])
		}
		for c := range dsts[0] {
			if !bytes.Equal(dsts[0][c], dsts[1][c]) {
				t.Fatalf("gather, copy %d failing: column %d written otherwise one by one and batched", k, c)
			}
		}
	}
	for i := range sides {
		sides[i].f.fail = 1 // a snapshot reads one copy at a time: its second fails
	}
	e0, e1 := sides[0].s.Read(from, to, fresh()), sides[1].s.Read(from, to, fresh())
	if !errors.Is(e1, statetest.ErrInjected) || e0.Error() != e1.Error() {
		t.Fatalf("a snapshot's read: one by one %v, batched %v", e0, e1)
	}
	for i := range sides {
		sides[i].f.fail = -1
		check(t, sides[i].h.Release())
	}
	e0, e1 = sides[0].h.Read(from, to, fresh()), sides[1].h.Read(from, to, fresh())
	if !errors.Is(e1, ErrReleased) || e0.Error() != e1.Error() {
		t.Fatalf("a released head's read: one by one %v, batched %v", e0, e1)
	}
	for i := range sides {
		sides[i].p.Close()
	}
	e0, e1 = sides[0].s.Read(from, to, fresh()), sides[1].s.Read(from, to, fresh())
	if !errors.Is(e1, ErrReleased) || e0.Error() != e1.Error() {
		t.Fatalf("a closed pool's read: one by one %v, batched %v", e0, e1)
	}
}

// TestReadRowAllocatesNothing: a head's read of a row of several columns
// on the host backend goes in one batch of copies and makes no
// allocation, and Len takes no lock of the pool's.
func TestReadRowAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	c := statetest.NewBatchCounts(statetest.Host(t))
	p, err := NewPool(c, PoolOptions{})
	check(t, err)
	defer p.Close()
	l := kvCacheLayout(128)
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	check(t, h.Append(seqKV(l, 40, 1)))
	dst := zeroRows(l, 1)
	c.Reset()
	check(t, h.Read(17, 18, dst))
	if c.Calls("CopiesDtoH") != 1 || c.Calls("CopyDtoH") != 0 {
		t.Fatalf("a read of a row of %d columns: %d batches and %d single copies, want 1 and 0", len(dst), c.Calls("CopiesDtoH"), c.Calls("CopyDtoH"))
	}
	row := 0
	if n := testing.AllocsPerRun(200, func() {
		row = (row + 7) % h.Len()
		check(t, h.Read(row, row+1, dst))
	}); n > 0 {
		t.Errorf("Len and a one-row Read: %.2f allocations a call; want none", n)
	}
}
