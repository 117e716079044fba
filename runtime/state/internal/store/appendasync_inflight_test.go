package store_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
	"github.com/gpustate/gpustate/runtime/state/internal/store"
)

// TestAppendAsyncKeepsRowsTheTierBringsBack: an AppendAsync on an optional
// head in the host tier brings it back with copies queued on the tier's
// stream, which it does not wait for, and then copies the partly filled
// tail block on write. On a device whose memory is not the process's,
// that copy used to read the block before the tier's copy landed, and the
// rows it kept read as zeros. It now appends in place, in stream order:
// the tier's stream is held here until the append has returned.
func TestAppendAsyncKeepsRowsTheTierBringsBack(t *testing.T) {
	be := newInteractionBackend() // not mapped: every copy is a device copy
	p, st := devicePool(t, deviceNamed{be}, store.PoolOptions{BlockBytes: 256, MaxBytes: 16 * 256, HostTier: 64 * 256})
	h, err := p.NewHead(layout64("Opt", store.Optional), "o")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if err := h.Append(rows64(0, 5)); err != nil { // the second block holds one row
		t.Fatal(err)
	}
	pushOut := func() { // mandatory heads until h moves to the tier, then released
		var fills []*store.Head
		for out := p.Stats().TierOut; p.Stats().TierOut == out; {
			f, err := p.NewHead(layout64("Fill", store.Mandatory), "f")
			if err != nil {
				t.Fatal(err)
			}
			fills = append(fills, f)
			if err := f.Append(rows64(0, 4)); err != nil {
				t.Fatalf("filling the pool (%d heads): %v", len(fills), err)
			}
		}
		// Then the rest of the pool, the blocks h gave up included, with
		// rows of another owner: h comes back in blocks that held them.
		for {
			f, err := p.NewHead(layout64("Fill", store.Mandatory), "f")
			if err != nil {
				t.Fatal(err)
			}
			fills = append(fills, f)
			if err := f.Append([][]byte{bytes.Repeat([]byte{0xee}, 4*64)}); err != nil {
				break // the pool is full
			}
		}
		for _, f := range fills {
			if err := f.Release(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Once out and back, so that the tier has made its stream, then out.
	pushOut()
	if err := h.Read(0, 5, [][]byte{make([]byte, 5*64)}); err != nil {
		t.Fatal(err)
	}
	pushOut()
	// Hold every stream but the caller's: the tier's copies back wait.
	be.smu.Lock()
	var held []*gate
	for _, s := range be.streams {
		if device.Stream(s) != st {
			held = append(held, s.gate())
		}
	}
	be.smu.Unlock()
	if len(held) == 0 {
		t.Fatal("no stream of the tier's to hold")
	}
	openAll := func() {
		for _, g := range held {
			g.open()
		}
	}
	defer openAll()
	// The append goes on in the tail in place, in stream order after the
	// tier's copies: it returns while they are held. (A copy on write of
	// the tail would wait for them.)
	done := make(chan error, 1)
	go func() { done <- h.AppendAsync(st, rows64(5, 4)) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		openAll()
		<-done
		t.Fatal("AppendAsync waited for the tier's copies: it copied the tail")
	}
	openAll()
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	got := [][]byte{make([]byte, 9*64)}
	if err := h.Read(0, 9, got); err != nil {
		t.Fatal(err)
	}
	want := append(rows64(0, 5)[0], rows64(5, 4)[0]...)
	if !bytes.Equal(got[0], want) {
		for r := range 9 {
			if !bytes.Equal(got[0][r*64:(r+1)*64], want[r*64:(r+1)*64]) {
				t.Errorf("row %d reads %v, want %v", r, got[0][r*64:r*64+4], want[r*64:r*64+4])
			}
		}
	}
}

// TestAppendAsyncAfterAFailedOneKeepsRowsInFlight: an AppendAsync that
// fails leaves the tail block's fill past the head's rows, so the next one
// copies the block on write. The rows it keeps include those an earlier
// AppendAsync on another stream is still copying: the copy on write waits
// for them, where it used to read the block before they landed.
func TestAppendAsyncAfterAFailedOneKeepsRowsInFlight(t *testing.T) {
	be := newInteractionBackend() // not mapped: every copy is a device copy
	p, st := devicePool(t, be, store.PoolOptions{BlockBytes: 256, MaxBytes: 64 * 256})
	slow, err := be.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	h, err := p.NewHead(layout64("S", store.Mandatory), "o")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if err := h.Append(rows64(0, 5)); err != nil { // the second block holds one row
		t.Fatal(err)
	}
	be.smu.Lock()
	var held *gate
	for _, s := range be.streams {
		if device.Stream(s) == slow {
			held = s.gate()
		}
	}
	be.smu.Unlock()
	opened := time.AfterFunc(50*time.Millisecond, held.open)
	defer opened.Stop()
	if err := h.AppendAsync(slow, rows64(5, 1)); err != nil { // held on slow
		t.Fatal(err)
	}
	be.arm(mAsync, 0)
	if err := h.AppendAsync(st, rows64(6, 1)); !errors.Is(err, statetest.ErrInjected) {
		t.Fatalf("the failing AppendAsync answered %v", err)
	}
	be.disarm()
	if err := h.AppendAsync(st, rows64(6, 1)); err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	got := [][]byte{make([]byte, 7*64)}
	if err := h.Read(0, 7, got); err != nil {
		t.Fatal(err)
	}
	want := rows64(0, 7)[0]
	for r := range 7 {
		if !bytes.Equal(got[0][r*64:(r+1)*64], want[r*64:(r+1)*64]) {
			t.Errorf("row %d reads %v, want %v", r, got[0][r*64:r*64+4], want[r*64:r*64+4])
		}
	}
}

// devicePool returns a pool over b with opt and a stream of b's, both
// closed when the test ends.
func devicePool(t *testing.T, b device.Backend, opt store.PoolOptions) (*store.Pool, device.Stream) {
	t.Helper()
	p, err := store.NewPool(b, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	st, err := b.(device.Streams).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return p, st
}

// layout64 is an append layout of 64-byte rows, 4 to a 256-byte block.
func layout64(typ string, r store.Retention) *store.Layout {
	return &store.Layout{Type: typ, Columns: []store.Column{{Name: "X", ElemSize: 8, Width: 8}}, Growth: store.Append, Bound: 64, Retention: r}
}

// rows64 returns n rows of layout64 from row from on, each byte
// numbered.
func rows64(from, n int) [][]byte {
	b := make([]byte, 64*n)
	for i := range b {
		b[i] = byte(from*64 + i + 1)
	}
	return [][]byte{b}
}

// deviceNamed is the interaction backend under another name than the host
// backend's, so that the host tier copies on a stream, as it does to a
// GPU, rather than at once.
type deviceNamed struct{ *interactionBackend }

func (deviceNamed) Name() string { return "device" }
