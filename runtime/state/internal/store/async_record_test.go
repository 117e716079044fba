package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestAppendAsyncOneRecord: on a backend with device.BatchRecorder, an
// AppendAsync queues its copies and their event in one call (no separate
// batch, copy or event); one whose call fails changes nothing (rows,
// version, stats, the pool's bytes), and a retry stores the rows once.
func TestAppendAsyncOneRecord(t *testing.T) {
	c := statetest.NewRecordCounts(statetest.Host(t))
	p, err := NewPool(c, PoolOptions{})
	check(t, err)
	defer p.Close()
	l := kvCacheLayout(128)
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	st := must[device.Stream](t)(c.NewStream())
	defer st.Close()
	var want [][]byte
	for i, n := range []int{1, 1, 40, 1} {
		rows := seqKV(l, n, byte(i))
		c.Reset()
		check(t, h.AppendAsync(st, rows))
		if c.Calls("CopiesHtoDAsyncRecord") != 1 || c.Calls("CopiesHtoDAsync")+c.Calls("CopyHtoDAsync")+c.Calls("Record") != 0 {
			t.Fatalf("call %d: %d batch records, %d batches, %d copies, %d events; want one batch record alone",
				i, c.Calls("CopiesHtoDAsyncRecord"), c.Calls("CopiesHtoDAsync"), c.Calls("CopyHtoDAsync"), c.Calls("Record"))
		}
		if want == nil {
			want = rows
		} else {
			for k := range want {
				want[k] = append(want[k], rows[k]...)
			}
		}
	}
	rows := seqKV(l, 3, 99)
	v, hs, ps := h.Version(), h.Stats(), p.Stats()
	c.Faults.Arm(statetest.OpCopy, 0) // the next batch, any kind, fails
	if err := h.AppendAsync(st, rows); !errors.Is(err, statetest.ErrInjected) {
		t.Fatalf("a failing batch record answered %v", err)
	}
	if h.Version() != v || h.Stats() != hs {
		t.Fatalf("the failed call changed the head: %+v, was %+v", h.Stats(), hs)
	}
	if got := p.Stats(); got.PhysicalBytes != ps.PhysicalBytes || got.Blocks != ps.Blocks {
		t.Fatalf("the failed call changed the pool: %+v, was %+v", got, ps)
	}
	check(t, h.AppendAsync(st, rows))
	for k := range want {
		want[k] = append(want[k], rows[k]...)
	}
	got := zeroRows(l, h.Len())
	check(t, h.Read(0, h.Len(), got))
	for k := range got {
		if !bytes.Equal(got[k], want[k]) {
			t.Fatalf("column %d differs from the rows appended", k)
		}
	}
}
