package store

import (
	"bytes"
	"testing"

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
	check(t, h.Write(from, kvRows(n, 2)))
	if held {
		rig.Release()
	}
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

// TestHostWriteKeepsKernelRows: a kernel queued on a held stream writes
// the rows WriteDevice handed out, RecordStream names the stream, then a
// host Write of other rows of the same block: the write copies the block
// (queued work uses it), and the rows it keeps are copied after the
// kernel, in stream order, so that the head's version holds the write's
// row and the kernel's, with or without a history, while the write
// returns with the kernel still held.
func TestHostWriteKeepsKernelRows(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		for _, ckpt := range []bool{false, true} {
			const rowBytes, rows = 256, 8 // four rows a block
			l := &Layout{Type: "Rows", Columns: []Column{{Name: "B", ElemSize: 1, Width: rowBytes}}, Growth: Mutable, Bound: rows}
			if ckpt {
				l.Checkpoint = &CheckpointPolicy{Every: 100, Keep: 1}
			}
			p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{}))
			h := must[*Head](t)(p.NewHead(l, "s"))
			check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, rows*rowBytes)}))
			v := h.Version()
			st := must[device.Stream](t)(r.Streams().NewStream())
			spans := must[[][]device.Span](t)(h.WriteDevice(2, 4))
			kernel := h.Version()
			heldFill(t, r, h, st, spans, rowBytes)
			check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x22}, rowBytes)})) // returns with the kernel held
			r.Release()
			got := make([]byte, rows*rowBytes)
			check(t, h.Read(0, rows, [][]byte{got}))
			if got[0] != 0x22 || got[rowBytes] != 0x11 || got[2*rowBytes] != 0x5A || got[3*rowBytes] != 0x5A || got[5*rowBytes] != 0x11 {
				t.Fatalf("checkpoint %v: rows 0, 1, 2, 3, 5 read %x %x %x %x %x; want 22 (the write), 11, 5a 5a (the kernel), 11",
					ckpt, got[0], got[rowBytes], got[2*rowBytes], got[3*rowBytes], got[5*rowBytes])
			}
			if ckpt {
				for _, c := range []struct {
					v    Version
					row2 byte
				}{{v, 0x11}, {kernel, 0x5A}} {
					s := must[*Snap](t)(h.At(c.v))
					check(t, s.Read(0, rows, [][]byte{got}))
					if got[0] != 0x11 || got[2*rowBytes] != c.row2 {
						t.Fatalf("At(%d): rows 0, 2 read %x %x; want 11 %x", c.v, got[0], got[2*rowBytes], c.row2)
					}
					check(t, s.Release())
				}
			}
			check(t, h.Release())
			check(t, st.Sync())
			check(t, st.Close())
			check(t, p.Close())
		}
	})
}

// TestHostAppendKeepsKernelRows: a kernel queued on a held stream fills
// the rows AppendDevice handed out, RecordStream names the stream, a
// branch appends first into the shared tail block, then the head appends:
// its append copies the tail block, and the rows it keeps are copied
// after the kernel, in stream order, so that both the head and the branch
// hold the kernel's rows.
func TestHostAppendKeepsKernelRows(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		const rowBytes = 256 // four rows a block
		l := &Layout{Type: "Rows", Columns: []Column{{Name: "B", ElemSize: 1, Width: rowBytes}}, Growth: Append, Descendants: Keep}
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{}))
		h := must[*Head](t)(p.NewHead(l, "s"))
		check(t, h.Append([][]byte{bytes.Repeat([]byte{0x11}, rowBytes)}))
		st := must[device.Stream](t)(r.Streams().NewStream())
		spans := must[[][]device.Span](t)(h.AppendDevice(2))
		heldFill(t, r, h, st, spans, rowBytes)
		b := must[*Head](t)(h.Branch())
		check(t, b.Append([][]byte{bytes.Repeat([]byte{0x33}, rowBytes)})) // claims the tail's next row
		check(t, h.Append([][]byte{bytes.Repeat([]byte{0x22}, rowBytes)})) // copies the tail block
		r.Release()
		got := make([]byte, 4*rowBytes)
		for _, c := range []struct {
			name string
			x    *Head
			last byte
		}{{"head", h, 0x22}, {"branch", b, 0x33}} {
			check(t, c.x.Read(0, 4, [][]byte{got}))
			if got[0] != 0x11 || got[rowBytes] != 0x5A || got[2*rowBytes] != 0x5A || got[3*rowBytes] != c.last {
				t.Fatalf("%s: rows read %x %x %x %x; want 11 5a 5a (the kernel) %x", c.name, got[0], got[rowBytes], got[2*rowBytes], got[3*rowBytes], c.last)
			}
		}
		check(t, b.Release())
		check(t, h.Release())
		check(t, st.Sync())
		check(t, st.Close())
		check(t, p.Close())
	})
}

// heldFill queues r's fill kernel, held back (StreamRig.Hold), writing
// 0x5A over the rows of spans' first column on st, then records st on h:
// it returns with the kernel not yet run.
func heldFill(t *testing.T, r *statetest.StreamRig, h *Head, st device.Stream, spans [][]device.Span, rowBytes int) {
	t.Helper()
	r.Hold(t, st)
	for _, sp := range spans[0] {
		check(t, r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, sp.Ptr, uint32(0x5A), uint64(sp.Rows*rowBytes)))
	}
	check(t, h.RecordStream(st))
}
