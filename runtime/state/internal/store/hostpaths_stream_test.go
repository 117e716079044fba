package store

import (
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Queued stream work against host writes on host memory: work queued
// before a write reads the rows as of when it was queued.

func kvDst(n int) [][]byte { return [][]byte{make([]byte, n*16), make([]byte, n*8)} }

// TestHostQueuedReadKeepsRowsOverWrite: a head's ReadAsync queued behind
// held work, then a Write covering every block, or a few rows inside one:
// the queued read reads the rows before the write (the block is copied,
// not written in place), and the head reads the write's.
func TestHostQueuedReadKeepsRowsOverWrite(t *testing.T) {
	for _, c := range []struct {
		name     string
		at, rows int
	}{{"covering", 0, 64}, {"partial", 3, 5}} {
		t.Run(c.name, func(t *testing.T) {
			rig := statetest.HostStreamRig(t)
			p := must[*Pool](t)(NewPool(rig.Backend, PoolOptions{BlockBytes: 256}))
			h := must[*Head](t)(p.NewHead(kv(Mutable, 64, Keep), "me"))
			check(t, h.Write(0, kvRows(64, 1)))
			st := must[device.Stream](t)(rig.Streams().NewStream())
			rig.Hold(t, st)
			dst := kvDst(64)
			check(t, h.ReadAsync(st, 0, 64, dst))
			check(t, h.Write(c.at, kvRows(c.rows, 9)))
			rig.Release()
			check(t, st.Sync())
			if !equalCols(dst, kvRows(64, 1)) {
				t.Error("the queued read read rows written after it was queued")
			}
			want := kvRows(64, 1)
			for i, col := range kvRows(c.rows, 9) {
				rb := len(col) / c.rows
				copy(want[i][c.at*rb:], col)
			}
			if !equalCols(readAll(t, h), want) {
				t.Error("the head reads other rows")
			}
			check(t, st.Close())
			check(t, h.Release())
			check(t, p.Close())
		})
	}
}

// TestHostSnapQueuedReadThenCoveringWrite: a snapshot's ReadAsync queued
// behind held work, the snapshot released, then the head (its blocks its
// own again) writes every block whole: the queued read keeps its rows.
func TestHostSnapQueuedReadThenCoveringWrite(t *testing.T) {
	rig := statetest.HostStreamRig(t)
	p := must[*Pool](t)(NewPool(rig.Backend, PoolOptions{BlockBytes: 256}))
	h := must[*Head](t)(p.NewHead(kv(Mutable, 64, Keep), "me"))
	check(t, h.Write(0, kvRows(64, 1)))
	st := must[device.Stream](t)(rig.Streams().NewStream())
	rig.Hold(t, st)
	s := must[*Snap](t)(h.Snapshot())
	dst := kvDst(40)
	check(t, s.ReadAsync(st, 10, 50, dst))
	check(t, s.Release())
	check(t, h.Write(0, kvRows(64, 2)))
	check(t, h.Write(0, kvRows(64, 3)))
	rig.Release()
	check(t, st.Sync())
	want := kvRows(64, 1)
	if !equalCols(dst, [][]byte{want[0][10*16 : 50*16], want[1][10*8 : 50*8]}) {
		t.Error("the snapshot's queued read read rows written after it was queued")
	}
	check(t, st.Close())
	check(t, h.Release())
	check(t, p.Close())
}

// TestKernelDeltaOverLaterWrite: a head recorded on a stream takes rows
// from a device write (into new blocks: a snapshot held the old ones);
// its delta is queued on that stream at the next call (history.prepare),
// behind other work on it. A host Write (covering the blocks whole, or a
// few rows of them) follows at once: At of the device write's version
// must read the device write's rows. The queued delta copy reads the
// head's blocks when the stream reaches it: the stream is recorded on
// them (recordRows), so the write copies them rather than write over them
// in place, and frees them only behind the copy.
func TestKernelDeltaOverLaterWrite(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, rig *statetest.StreamRig) {
		for _, c := range []struct {
			name     string
			at, rows int
			hold     bool
		}{{"covering", 0, 64, false}, {"covering/held", 0, 64, true}, {"partial", 0, 1, false}, {"partial/held", 0, 1, true}} {
			t.Run(c.name, func(t *testing.T) { kernelDeltaOverLaterWrite(t, rig, c.at, c.rows, c.hold, false) })
			// The documented order: the stream recorded after the
			// kernel's rows (its RecordStream takes the delta).
			t.Run(c.name+"/recorded-after", func(t *testing.T) { kernelDeltaOverLaterWrite(t, rig, c.at, c.rows, c.hold, true) })
		}
	})
}

func kernelDeltaOverLaterWrite(t *testing.T, rig *statetest.StreamRig, from, n int, hold, recordAfter bool) {
	p := must[*Pool](t)(NewPool(rig.Backend, PoolOptions{BlockBytes: 256}))
	l := kv(Mutable, 64, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 1000, Keep: 2}
	h := must[*Head](t)(p.NewHead(l, "me"))
	check(t, h.Write(0, kvRows(64, 1)))
	st := must[device.Stream](t)(rig.Streams().NewStream())
	check(t, h.RecordStream(st))
	s := must[*Snap](t)(h.Snapshot())
	spans := must[[][]device.Span](t)(h.WriteDevice(0, 64))
	want := kvRows(64, 7)
	for c, rb := range []int{16, 8} {
		at := 0
		for _, sp := range spans[c] {
			check(t, rig.Backend.CopyHtoD(sp.Ptr, want[c][at:at+sp.Rows*rb]))
			at += sp.Rows * rb
		}
	}
	v := h.Version()
	check(t, s.Release())
	held := false
	if recordAfter {
		if hold {
			rig.Hold(t, st)
			held = true
		}
		check(t, h.RecordStream(st)) // queues the delta's copies on st
	} else if hold {
		rig.Hold(t, st) // unrelated work, queued after the rows are final
		held = true
	}
	if held {
		// A write that keeps rows of the device write's blocks waits for
		// the streams a kernel may be writing them on: st is opened from
		// another goroutine while it does.
		time.AfterFunc(20*time.Millisecond, rig.Release)
	}
	check(t, h.Write(from, kvRows(n, 2)))
	check(t, st.Sync())
	at := must[*Snap](t)(h.At(v))
	if got := readAll(t, at); !equalCols(got, want) {
		t.Errorf("At of the device write's version reads other rows: row 0 %v, want %v", got[0][:16], want[0][:16])
	}
	check(t, at.Release())
	check(t, st.Close())
	check(t, h.Release())
	check(t, p.Close())
}
