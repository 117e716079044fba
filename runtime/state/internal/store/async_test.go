package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestAppendAsync: rows appended on a stream arrive in order with later
// work on it, are seen by host reads and snapshots, and a foreign stream
// appends nothing.
func TestAppendAsync(t *testing.T) {
	for _, c := range []struct {
		name string
		rig  func(*testing.T) *statetest.StreamRig
	}{{"host", statetest.HostStreamRig}, {"fakecuda", statetest.FakeStreamRig}} {
		t.Run(c.name, func(t *testing.T) {
			r := c.rig(t)
			p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			h, err := p.NewHead(kv(Append, 0, Keep), "a")
			if err != nil {
				t.Fatal(err)
			}
			defer h.Release()
			st, err := r.Streams().NewStream()
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			batch := kvRows(40, 3)
			r.Hold(t, st)
			if err := h.AppendAsync(st, batch); err != nil {
				t.Fatal(err)
			}
			clear(batch[0]) // staged: the caller may reuse the batch at once
			if err := h.AppendAsync(st, kvRows(10, 4)); err != nil {
				t.Fatal(err)
			}
			keys, _ := r.Streams().HostAlloc(50 * 16)
			vals, _ := r.Streams().HostAlloc(50 * 8)
			defer r.Streams().HostFree(keys)
			defer r.Streams().HostFree(vals)
			if err := h.ReadAsync(st, 0, 50, [][]byte{keys, vals}); err != nil {
				t.Fatal(err)
			}
			ev, _ := r.Streams().Record(st)
			defer ev.Close()
			if done, _ := ev.Done(); done {
				t.Fatal("the held copies completed")
			}
			r.Release()
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

// TestAppendAsyncEventsPerStream: a head that appends on a stream many
// times before anything waits holds one event a stream (the last: a
// stream runs in order), and a call that finds every staging buffer in
// use polls one event of a stream whose copies have not run, not each
// buffer's; the rows all land once the stream runs.
func TestAppendAsyncEventsPerStream(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{}))
		defer p.Close()
		h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "a"))
		defer h.Release()
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		other := must[device.Stream](t)(r.Streams().NewStream())
		defer other.Close()
		r.Hold(t, st)
		var polled int64
		if r.Polls != nil {
			polled = r.Polls()
		}
		const calls = 64
		for i := range calls {
			on := st
			if i%8 == 7 {
				on = other
			}
			check(t, h.AppendAsync(on, kvRows(1, byte(i))))
		}
		if n := len(h.async.inflight); n != 2 {
			t.Errorf("%d calls on two streams left %d events in flight, want 2", calls, n)
		}
		if r.Polls != nil {
			if n := r.Polls() - polled; n > 2*calls {
				t.Errorf("%d calls with their copies held polled %d events, want at most %d", calls, n, 2*calls)
			}
		}
		r.Release()
		got := [][]byte{make([]byte, calls*16), make([]byte, calls*8)}
		check(t, h.Read(0, calls, got))
		for i := range calls {
			want := kvRows(1, byte(i))
			if !bytes.Equal(got[0][i*16:(i+1)*16], want[0]) || !bytes.Equal(got[1][i*8:(i+1)*8], want[1]) {
				t.Fatalf("row %d: read %x %x, want %x %x", i, got[0][i*16:(i+1)*16], got[1][i*8:(i+1)*8], want[0], want[1])
			}
		}
		if n := len(h.async.inflight); n != 0 {
			t.Errorf("%d events in flight after a read landed the rows", n)
		}
	})
}

// TestAppendAsyncRowJoinsColumns: a decode step's AppendAsync copies the
// rows of columns whose blocks follow one another (keys and values, taken
// side by side) in one copy, as the staging buffer holds the columns one
// after another; the narrow columns, whose blocks hold 32 rows, take one
// each. The rows land where reads find them.
func TestAppendAsyncRowJoinsColumns(t *testing.T) {
	c := statetest.NewStreamCounts(statetest.Host(t))
	p := must[*Pool](t)(NewPool(c, PoolOptions{}))
	defer p.Close()
	l := kvCacheLayout(512)
	l.Growth = Append
	h := must[*Head](t)(p.NewHead(l, "a"))
	defer h.Release()
	st := must[device.Stream](t)(c.NewStream())
	defer st.Close()
	rows := make([][][]byte, 8)
	for i := range rows {
		rows[i] = zeroRows(l, 1)
		for k := range rows[i] {
			for j := range rows[i][k] {
				rows[i][k][j] = byte(i*7 + k*3 + j)
			}
		}
		c.Reset()
		check(t, h.AppendAsync(st, rows[i]))
		if c.Calls("CopyHtoDAsync") != 3 {
			t.Errorf("row %d: %d copies queued, want 3 (keys and values in one)", i, c.Calls("CopyHtoDAsync"))
		}
	}
	for i, want := range rows {
		got := zeroRows(l, 1)
		check(t, h.Read(i, i+1, got))
		for k := range got {
			if !bytes.Equal(got[k], want[k]) {
				t.Fatalf("row %d column %d: read other bytes than appended", i, k)
			}
		}
	}
}

// TestReadAsyncOtherStream: a ReadAsync on one stream of rows an
// AppendAsync queued on another reads them in stream order, without the
// caller waiting or recording an event: the read's stream waits for the
// append's copies.
func TestReadAsyncOtherStream(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		h, err := p.NewHead(kv(Append, 0, Keep), "a")
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		up, err := r.Streams().NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer up.Close()
		down, err := r.Streams().NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer down.Close()
		r.Hold(t, up)
		if err := h.AppendAsync(up, kvRows(20, 7)); err != nil {
			t.Fatal(err)
		}
		got := [][]byte{make([]byte, 20*16), make([]byte, 20*8)}
		if err := h.ReadAsync(down, 0, 20, got); err != nil {
			t.Fatal(err)
		}
		ev, err := r.Streams().Record(down)
		if err != nil {
			t.Fatal(err)
		}
		defer ev.Close()
		if done, _ := ev.Done(); done {
			t.Error("the read on the other stream completed before the append it reads")
		}
		r.Release()
		if err := ev.Wait(); err != nil {
			t.Fatal(err)
		}
		want := kvRows(20, 7)
		if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			t.Error("ReadAsync on another stream read other rows than AppendAsync queued before it")
		}
	})
}

// TestAppendAsyncAllocs: a one-row AppendAsync in steady state allocates
// only what the host backend's batch of copies and event take (one
// object a call); the store's own records of the call (its staging, its
// event's wrapper for the head and the staging) are kept and reused.
func TestAppendAsyncAllocs(t *testing.T) {
	if raceDetector {
		t.Skip("under the race detector, sync.Pool drops entries at random")
	}
	p := newPool(t, PoolOptions{})
	sb := p.Backend().(device.Streams)
	st, err := sb.NewStream()
	check(t, err)
	defer st.Close()
	l := kvCacheLayout(512)
	l.Growth = Append
	h := must[*Head](t)(p.NewHead(l, "a"))
	defer h.Release()
	row := zeroRows(l, 1)
	step := func() {
		for range 8 {
			check(t, h.AppendAsync(st, row))
		}
		check(t, st.Sync())
	}
	step()
	// AllocsPerRun rounds down: count eight calls at once.
	if n := testing.AllocsPerRun(50, step); n > 8 {
		t.Fatalf("%v allocations for 8 AppendAsync calls and a Sync, want at most the backend's 8", n)
	}
}
