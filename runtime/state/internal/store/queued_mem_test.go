package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

const queuedTableSnoop = "queued_table_snoop"

func init() {
	// args: table ptr, idx uint64, n uint64, id uint64: reads entry idx
	// of the table when it runs, then n bytes at that block.
	if err := device.RegisterHostKernel(queuedTableSnoop, func(mem device.HostMemory, _, _ device.Dim3, args []any) error {
		e, err := mem.Bytes(args[0].(device.Ptr)+device.Ptr(8*args[1].(uint64)), 8)
		if err != nil {
			return err
		}
		b, err := mem.Bytes(device.Ptr(binary.LittleEndian.Uint64(e)), int(args[2].(uint64)))
		if err != nil {
			return err
		}
		queued.Lock()
		queued.snoops[args[3].(uint64)] = bytes.Clone(b)
		queued.Unlock()
		return nil
	}); err != nil {
		panic(err)
	}
}

func (r *queuedRig) tableSnoopOn(t *testing.T, st device.Stream, table device.Ptr, idx, n int) func() []byte {
	t.Helper()
	m := must[device.Module](t)(r.b.(device.Kernels).LoadModule(queuedModule))
	fn := must[device.Function](t)(m.Function(queuedTableSnoop))
	queued.Lock()
	queued.next++
	id := queued.next
	queued.Unlock()
	if err := r.b.(device.Kernels).Launch(st, fn, device.Dim3{}, device.Dim3{}, 0, table, uint64(idx), uint64(n), id); err != nil {
		t.Fatal(err)
	}
	return func() []byte {
		queued.Lock()
		defer queued.Unlock()
		return queued.snoops[id]
	}
}

func winLayout(w int) *Layout {
	return &Layout{Type: "Win", Columns: []Column{{Name: "X", ElemSize: 8, Width: 32}}, Growth: Append, Window: w, BlockRows: 1}
}

// A window head appends, on a held stream, more rows than its
// window: the blocks of rows that expire within the call are written by
// the queued copies. Another owner allocating right after must not get
// them (or must not see them overwritten).
func TestQueuedWindowAsyncExpiredBlocksReused(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 16 * 256, PendingWait: 20 * time.Millisecond}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	a := must[*Head](t)(p.NewHead(winLayout(2), "a"))
	open := r.hold(t, st)
	rows := make([]byte, 8*256)
	for i := range rows {
		rows[i] = byte(i/256) + 1
	}
	for i := 0; i < 4; i++ {
		check(t, a.AppendAsync(st, [][]byte{rows[i*512 : i*512+512]}))
	}
	b := must[*Head](t)(p.NewHead(wide("B", Mandatory), "b"))
	var mb []byte
	for i := 0; i < 14; i++ {
		if err := b.Append(wideRow(byte(0xA0 + i))); err != nil {
			if !errors.Is(err, ErrNoMemory) {
				t.Fatal(err)
			}
			break
		}
		mb = append(mb, wideRow(byte(0xA0 + i))[0]...)
	}
	open()
	check(t, st.Sync())
	if got := readWide(t, b); !bytes.Equal(got, mb) {
		for i := 0; i < len(mb)/256; i++ {
			if got[i*256] != mb[i*256] {
				t.Errorf("b's row %d reads %x, want %x: a queued copy of a's expired rows landed in b's block", i, got[i*256], mb[i*256])
				break
			}
		}
	}
	got := make([]byte, 2*256)
	check(t, a.Read(6, 8, [][]byte{got}))
	if !bytes.Equal(got, rows[6*256:]) {
		t.Errorf("a's window reads %x.., want %x..", got[0], rows[6*256])
	}
	check(t, a.Release())
	check(t, b.Release())
	qwLeaks(t, p)
}

// An optional head with a held AppendAsync is evicted by another
// owner's pressure (no tier): the victim's blocks must stay pending, not
// go to the other owner under the queued copies.
func TestQueuedEvictWithAsyncInFlight(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256, PendingWait: 20 * time.Millisecond}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	a := must[*Head](t)(p.NewHead(wide("A", Optional), "a"))
	fill(t, a, 2, 1)
	open := r.hold(t, st)
	check(t, a.AppendAsync(st, [][]byte{bytes.Repeat([]byte{0x33}, 4*256)}))
	b := must[*Head](t)(p.NewHead(wide("B", Mandatory), "b"))
	var mb []byte
	for i := 0; i < 8; i++ {
		if err := b.Append(wideRow(byte(0xB0 + i))); err != nil {
			break
		}
		mb = append(mb, wideRow(byte(0xB0 + i))[0]...)
	}
	t.Logf("b holds %d rows, evictions %d", len(mb)/256, p.Stats().Evictions)
	open()
	check(t, st.Sync())
	if got := readWide(t, b); !bytes.Equal(got, mb) {
		t.Errorf("b's rows changed under a's queued copies")
	}
	if err := a.Read(0, 1, [][]byte{make([]byte, 256)}); err == nil {
		got := readWide(t, a)
		want := append(catWide(wideRow(1), wideRow(2)), bytes.Repeat([]byte{0x33}, 4*256)...)
		if !bytes.Equal(got, want) {
			t.Error("a, not evicted, reads other rows")
		}
	} else if !errors.Is(err, ErrEvicted) {
		t.Error(err)
	}
	check(t, a.Release())
	check(t, b.Release())
	qwLeaks(t, p)
}

// A kernel reads a head's block through its block table, queued
// on a held stream (RecordStream after); the head rolls back past that
// block and appends again, another owner allocates; the kernel must see
// the rows of the version it was queued at.
func TestQueuedTableRollbackReuse(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256, PendingWait: 20 * time.Millisecond}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	l := wide("A", Mandatory)
	l.Descendants = Invalidate
	a := must[*Head](t)(p.NewHead(l, "a"))
	fill(t, a, 2, 1)
	s := must[*Snap](t)(a.Snapshot())
	fill(t, a, 2, 0x41)
	tb := must[*BlockTable](t)(a.BlockTable())
	col := must[TableColumn](t)(tb.Column(0))
	open := r.hold(t, st)
	got := r.tableSnoopOn(t, st, col.Ptr, 3, 256)
	check(t, a.RecordStream(st))
	check(t, a.Rollback(s))
	fill(t, a, 3, 0x70)
	b := must[*Head](t)(p.NewHead(wide("B", Mandatory), "b"))
	for i := 0; i < 8; i++ {
		if err := b.Append(wideRow(byte(0xC0 + i))); err != nil {
			break
		}
	}
	open()
	check(t, st.Sync())
	if g := got(); !bytes.Equal(g, wideRow(0x42)[0]) {
		t.Errorf("the kernel queued at version 2 read %x.. through the table, want %x..", g[:1], 0x42)
	}
	col2 := must[TableColumn](t)(tb.Column(0))
	if col2.Blocks != 5 {
		t.Errorf("table after rollback+3 appends: %d blocks, want 5", col2.Blocks)
	}
	check(t, tb.Release())
	check(t, s.Release())
	check(t, a.Release())
	check(t, b.Release())
	qwLeaks(t, p)
}

// The same with eviction: an optional head with a block table,
// a kernel queued through it (RecordStream), evicted by pressure; the
// table's memory and the blocks must stay valid for the kernel.
func TestQueuedTableEvictReuse(t *testing.T) {
	for _, tier := range []int64{0, 64 << 10} {
		t.Run(map[bool]string{false: "drop", true: "tier"}[tier > 0], func(t *testing.T) {
			r := newQueuedRig(t)
			p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256, PendingWait: 20 * time.Millisecond, HostTier: tier}))
			t.Cleanup(func() { p.Close() })
			st := r.stream(t)
			a := must[*Head](t)(p.NewHead(wide("A", Optional), "a"))
			fill(t, a, 3, 1)
			tb := must[*BlockTable](t)(a.BlockTable())
			col := must[TableColumn](t)(tb.Column(0))
			open := r.hold(t, st)
			got := r.tableSnoopOn(t, st, col.Ptr, 2, 256)
			check(t, a.RecordStream(st))
			b := must[*Head](t)(p.NewHead(wide("B", Mandatory), "b"))
			var mb []byte
			for i := 0; i < 8; i++ {
				if err := b.Append(wideRow(byte(0xC0 + i))); err != nil {
					break
				}
				mb = append(mb, wideRow(byte(0xC0 + i))[0]...)
			}
			t.Logf("b %d rows; stats %+v", len(mb)/256, p.Stats())
			open()
			if err := st.Sync(); err != nil {
				t.Errorf("the stream of the kernel reading through the table failed: %v", err)
			}
			if g := got(); !bytes.Equal(g, wideRow(3)[0]) {
				t.Errorf("kernel read %x through the table, want %x", g, wideRow(3)[0][:1])
			}
			if !bytes.Equal(readWide(t, b), mb) {
				t.Error("b's rows changed")
			}
			check(t, tb.Release())
			check(t, a.Release())
			check(t, b.Release())
			qwLeaks(t, p)
		})
	}
}

// A head in the host tier: a snoop kernel queued on a held
// stream reads its block, RecordStream recorded it; pressure moves it
// out; another owner reallocates; the snoop must see the original rows
// and the head comes back with them.
func TestQueuedTierMoveUnderQueuedRead(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256, PendingWait: 20 * time.Millisecond, HostTier: 64 << 10}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	a := must[*Head](t)(p.NewHead(wide("A", Optional), "a"))
	fill(t, a, 3, 1)
	sp := must[[][]device.Span](t)(a.Spans(0, 3))
	open := r.hold(t, st)
	got := r.snoopOn(t, st, sp[0][2].Ptr, 256)
	r.fillOn(t, st, sp[0][1].Ptr, 0x99, 256) // a kernel writes row 1
	check(t, a.RecordStream(st))
	b := must[*Head](t)(p.NewHead(wide("B", Mandatory), "b"))
	var mb []byte
	for i := 0; i < 8; i++ {
		if err := b.Append(wideRow(byte(0xD0 + i))); err != nil {
			break
		}
		mb = append(mb, wideRow(byte(0xD0 + i))[0]...)
	}
	t.Logf("b %d rows; tier out %d", len(mb)/256, p.Stats().TierOut)
	open()
	check(t, st.Sync())
	if g := got(); !bytes.Equal(g, wideRow(3)[0]) {
		t.Errorf("queued read saw %x", g[:1])
	}
	if !bytes.Equal(readWide(t, b), mb) {
		t.Error("b's rows changed")
	}
	check(t, b.Release())
	want := catWide(wideRow(1), [][]byte{bytes.Repeat([]byte{0x99}, 256)}, wideRow(3))
	if got := readWide(t, a); !bytes.Equal(got, want) {
		t.Errorf("a after the tier reads %x %x %x, want 01 99 03", got[0], got[256], got[512])
	}
	check(t, a.Release())
	qwLeaks(t, p)
}

var _ = sync.Mutex{}

// A block table outlives its head: Column after the head's
// release must not panic; the table's release gives everything back.
func TestQueuedTableOutlivesHead(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256}))
	t.Cleanup(func() { p.Close() })
	st := r.stream(t)
	a := must[*Head](t)(p.NewHead(wide("A", Optional), "a"))
	fill(t, a, 3, 1)
	tb := must[*BlockTable](t)(a.BlockTable())
	col := must[TableColumn](t)(tb.Column(0))
	open := r.hold(t, st)
	got := r.tableSnoopOn(t, st, col.Ptr, 1, 256)
	check(t, a.RecordStream(st))
	check(t, a.Release())
	b := must[*Head](t)(p.NewHead(wide("B", Mandatory), "b"))
	for i := 0; i < 8; i++ {
		if b.Append(wideRow(byte(0xC0+i))) != nil {
			break
		}
	}
	_, err := tb.Column(0)
	t.Logf("Column after the head's release: %v", err)
	open()
	check(t, st.Sync())
	if g := got(); !bytes.Equal(g, wideRow(2)[0]) {
		t.Errorf("kernel read %x through the table", g[:1])
	}
	check(t, tb.Release())
	check(t, b.Release())
	qwLeaks(t, p)
}
