package state

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestAppendAsync: rows appended on a stream arrive in order with later
// work on it, are seen by host reads and snapshots, and a foreign stream
// appends nothing.
func TestAppendAsync(t *testing.T) {
	for _, c := range []struct {
		name string
		rig  func(*testing.T) *streamRig
	}{{"host", hostStreamRig}, {"fakecuda", fakeStreamRig}} {
		t.Run(c.name, func(t *testing.T) {
			r := c.rig(t)
			p, err := NewPool(r.b, PoolOptions{BlockBytes: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			h, err := p.NewHead(kv(Append, 0, Keep), "a")
			if err != nil {
				t.Fatal(err)
			}
			defer h.Release()
			st, err := r.streams().NewStream()
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			batch := kvRows(40, 3)
			r.hold(t, st)
			if err := h.AppendAsync(st, batch); err != nil {
				t.Fatal(err)
			}
			clear(batch[0]) // staged: the caller may reuse the batch at once
			if err := h.AppendAsync(st, kvRows(10, 4)); err != nil {
				t.Fatal(err)
			}
			keys, _ := r.streams().HostAlloc(50 * 16)
			vals, _ := r.streams().HostAlloc(50 * 8)
			defer r.streams().HostFree(keys)
			defer r.streams().HostFree(vals)
			if err := h.ReadAsync(st, 0, 50, [][]byte{keys, vals}); err != nil {
				t.Fatal(err)
			}
			ev, _ := r.streams().Record(st)
			defer ev.Close()
			if done, _ := ev.Done(); done {
				t.Fatal("the held copies completed")
			}
			r.release()
			if err := ev.Wait(); err != nil {
				t.Fatal(err)
			}
			want := [][]byte{append(kvRows(40, 3)[0], kvRows(10, 4)[0]...), append(kvRows(40, 3)[1], kvRows(10, 4)[1]...)}
			if !bytes.Equal(keys, want[0]) || !bytes.Equal(vals, want[1]) {
				t.Error("ReadAsync on the stream did not see the rows AppendAsync queued before it")
			}
			s, err := h.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release()
			got := [][]byte{make([]byte, 50*16), make([]byte, 50*8)}
			if err := s.Read(0, 50, got); err != nil || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
				t.Errorf("a snapshot after AppendAsync reads other rows (%v)", err)
			}
			other := device.Host()
			defer other.Close()
			ost, _ := other.(device.Streams).NewStream()
			if err := h.AppendAsync(ost, kvRows(1, 5)); !errors.Is(err, device.ErrStreamClosed) || h.Len() != 50 {
				t.Errorf("AppendAsync on a foreign stream: %v, %d rows; want ErrStreamClosed, 50", err, h.Len())
			}
		})
	}
}
