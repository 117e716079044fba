package store

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// A kernel queued on a stream writes rows whose spans a device write
// handed out; a later call copies the block that holds them on write (the
// block holds queued stream work, or a snapshot or branch shares it). The
// copy is not in stream order, so it waits for the kernel: the new
// version keeps the kernel's rows. Each case holds the stream back until
// the copying call has started, and opens it from another goroutine.

const keepRowBytes, keepRows = 256, 8

func keepLayout(ckpt bool, growth Growth) *Layout {
	l := &Layout{Type: "Rows", Columns: []Column{{Name: "B", ElemSize: 1, Width: keepRowBytes}}, Growth: growth, Bound: keepRows}
	if ckpt {
		l.Checkpoint = &CheckpointPolicy{Every: 100, Keep: 1}
	}
	return l
}

// keepPool returns a pool on r's backend of blocks of keepRows rows,
// closed when t ends, after the handles keepHead and recordedHead made.
func keepPool(t *testing.T, r *statetest.StreamRig) *Pool {
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
	t.Cleanup(func() { check(t, p.Close()) })
	return p
}

// reusedIntact has a new head of p's owner "s" append a block of 0x77
// rows, then lets the held kernel run (release, then st's Sync), and
// fails unless the head reads its own rows: the kernel wrote no block
// the pool handed it.
func reusedIntact(t *testing.T, p *Pool, release func(), st device.Stream) {
	t.Helper()
	o := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
	defer o.Release()
	check(t, o.Append([][]byte{bytes.Repeat([]byte{0x77}, keepRows*keepRowBytes)}))
	release()
	check(t, st.Sync())
	keptRows(t, o, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77)
}

// keepHead returns a head of p, its rows 0x11 (keepRows of them, or one
// for an append state), and a new stream; both go when t ends.
func keepHead(t *testing.T, r *statetest.StreamRig, p *Pool, ckpt bool, growth Growth) (*Head, device.Stream) {
	h := must[*Head](t)(p.NewHead(keepLayout(ckpt, growth), "s"))
	if growth == Append {
		check(t, h.Append([][]byte{bytes.Repeat([]byte{0x11}, keepRowBytes)}))
	} else {
		check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
	}
	st := must[device.Stream](t)(r.Streams().NewStream())
	t.Cleanup(func() {
		st.Close()
		h.Release()
	})
	return h, st
}

// holdFor holds st back and returns the func that lets it go on, which
// runs after d too, and when t ends, whichever is first.
func holdFor(t *testing.T, r *statetest.StreamRig, st device.Stream, d time.Duration) func() {
	r.Hold(t, st)
	var once sync.Once
	release := func() { once.Do(r.Release) }
	t.Cleanup(release)
	time.AfterFunc(d, release)
	return release
}

// fillRows queues the fill kernel over spans on st, behind a held gate
// the test opens after a while.
func fillRows(t *testing.T, r *statetest.StreamRig, st device.Stream, spans [][]device.Span, v byte) {
	t.Helper()
	holdFor(t, r, st, 20*time.Millisecond)
	fillOn(t, r, st, spans, v)
}

// keptRows fails unless x's rows read want, a byte a row.
func keptRows(t *testing.T, x reader, want ...byte) {
	t.Helper()
	got := make([]byte, x.Len()*keepRowBytes)
	check(t, x.Read(0, x.Len(), [][]byte{got}))
	var rows []byte
	for i := 0; i < len(got); i += keepRowBytes {
		if !bytes.Equal(got[i:i+keepRowBytes], bytes.Repeat(got[i:i+1], keepRowBytes)) {
			t.Fatalf("row %d is torn: %x...", i/keepRowBytes, got[i:i+8])
		}
		rows = append(rows, got[i])
	}
	if !bytes.Equal(rows, want) {
		t.Fatalf("rows read %x, want %x", rows, want)
	}
}

func TestKernelRowsKeptOverCopy(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, r *statetest.StreamRig, p *Pool, ckpt bool)
	}{
		{"host write of other rows", func(t *testing.T, r *statetest.StreamRig, p *Pool, ckpt bool) {
			h, st := keepHead(t, r, p, ckpt, Mutable)
			fillRows(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
			check(t, h.RecordStream(st))
			check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x22}, keepRowBytes)}))
			check(t, st.Sync())
			keptRows(t, h, 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
		}},
		{"stream recorded before, no call between", func(t *testing.T, r *statetest.StreamRig, p *Pool, ckpt bool) {
			// The kernel is on a stream recorded on the head before the
			// device write; the write is the next call.
			h, st := keepHead(t, r, p, ckpt, Mutable)
			check(t, h.RecordStream(st))
			fillRows(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
			check(t, h.Write(7, [][]byte{bytes.Repeat([]byte{0x22}, keepRowBytes)}))
			check(t, st.Sync())
			keptRows(t, h, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x22)
		}},
		{"device write after a snapshot", func(t *testing.T, r *statetest.StreamRig, p *Pool, ckpt bool) {
			h, st := keepHead(t, r, p, ckpt, Mutable)
			fillRows(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
			check(t, h.RecordStream(st))
			s := must[*Snap](t)(h.Snapshot())
			defer s.Release()
			spans := must[[][]device.Span](t)(h.WriteDevice(6, 7))
			check(t, st.Sync())
			for _, sp := range spans[0] {
				check(t, r.Backend.CopyHtoD(sp.Ptr, bytes.Repeat([]byte{0x33}, sp.Rows*keepRowBytes)))
			}
			keptRows(t, h, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x33, 0x11)
			keptRows(t, s, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
		}},
		{"branches append on a shared tail", func(t *testing.T, r *statetest.StreamRig, p *Pool, ckpt bool) {
			h, st := keepHead(t, r, p, ckpt, Append)
			fillRows(t, r, st, must[[][]device.Span](t)(h.AppendDevice(2)), 0x5a)
			check(t, h.RecordStream(st))
			a := must[*Head](t)(h.Branch())
			defer a.Release()
			b := must[*Head](t)(h.Branch())
			defer b.Release()
			// a claims the tail's free rows; b copies the tail.
			check(t, a.Append([][]byte{bytes.Repeat([]byte{0xaa}, keepRowBytes)}))
			check(t, b.Append([][]byte{bytes.Repeat([]byte{0xbb}, keepRowBytes)}))
			check(t, st.Sync())
			keptRows(t, a, 0x11, 0x5a, 0x5a, 0xaa)
			keptRows(t, b, 0x11, 0x5a, 0x5a, 0xbb)
			keptRows(t, h, 0x11, 0x5a, 0x5a)
		}},
		{"merged child's kernel rows", func(t *testing.T, r *statetest.StreamRig, p *Pool, ckpt bool) {
			h, st := keepHead(t, r, p, ckpt, Mutable)
			c := must[*Head](t)(h.Branch())
			defer c.Release()
			fillRows(t, r, st, must[[][]device.Span](t)(c.WriteDevice(2, 4)), 0x5a)
			check(t, c.RecordStream(st))
			check(t, h.Merge(c))
			check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x22}, keepRowBytes)}))
			check(t, st.Sync())
			keptRows(t, h, 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
			keptRows(t, c, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
		}},
	}
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		for _, c := range cases {
			for _, ckpt := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/checkpoint=%v", c.name, ckpt), func(t *testing.T) {
					p := keepPool(t, r)
					c.run(t, r, p, ckpt)
				})
			}
		}
	})
}

// TestKernelRowsWaitNotLater: a write that keeps rows a kernel wrote
// waits for that kernel, not for work queued on its stream after the call
// that followed it (a kernel reading the state, held back here): it
// returns while that work has not run. On the host backend, whose gate is
// a kernel queued behind the fill; the fake driver's hold would keep the
// fill from starting too.
func TestKernelRowsWaitNotLater(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p := keepPool(t, r)
	h, st := keepHead(t, r, p, false, Mutable)
	fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
	check(t, h.RecordStream(st))
	r.Hold(t, st) // later work: it reads the state
	done := make(chan error, 1)
	go func() { done <- h.Write(0, [][]byte{bytes.Repeat([]byte{0x22}, keepRowBytes)}) }()
	select {
	case err := <-done:
		check(t, err)
	case <-time.After(10 * time.Second):
		r.Release()
		<-done
		t.Fatal("the write waited for work queued after the kernel")
	}
	r.Release()
	check(t, st.Sync())
	keptRows(t, h, 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
}
