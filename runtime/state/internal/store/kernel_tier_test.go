package store

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestKernelRowsTierMoveOut: the kernel's stream was recorded
// on the head before AppendDevice (before it held any block); the call
// after (Prefetch here) records it on the kernel's block. A move to the
// host tier under memory pressure then copies the head's blocks after the
// kernel and frees them only after it, so another owner's rows never meet
// the kernel's writes, and the head, brought back, reads the kernel's
// rows.
func TestKernelRowsTierMoveOut(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes, MaxBytes: 2 * keepRows * keepRowBytes, HostTier: 64 << 10}))
	defer p.Close()
	l := keepLayout(false, Append)
	l.Retention = Optional
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	st := must[device.Stream](t)(r.Streams().NewStream())
	defer st.Close()
	check(t, h.RecordStream(st))
	r.Hold(t, st)
	var once sync.Once
	release := func() { once.Do(r.Release) }
	defer release()
	time.AfterFunc(100*time.Millisecond, release) // the move out waits for the kernel
	fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
	check(t, h.Prefetch()) // the call after: the kernel is queued
	if !h.async.kernel.overlaps(0, 3) {
		t.Fatalf("the head keeps kernel rows %+v, want [0, 3)", h.async.kernel)
	}
	// Memory pressure: another state takes the pool's every block.
	ol := keepLayout(false, Append)
	ol.Bound = 2 * keepRows
	o := must[*Head](t)(p.NewHead(ol, "o"))
	defer o.Release()
	for i := 0; i < 2*keepRows; i++ {
		check(t, o.Append(oneRow(0x77)))
	}
	st0 := p.Stats()
	t.Logf("tier out %d bytes, evictions %d", st0.TierOut, st0.Evictions)
	if st0.TierOut == 0 {
		t.Fatal("the head did not move to the tier")
	}
	release()
	check(t, st.Sync())
	ow := bytes.Repeat([]byte{0x77}, o.Len())
	ow2 := make([]byte, o.Len())
	got := make([]byte, o.Len()*keepRowBytes)
	check(t, o.Read(0, o.Len(), [][]byte{got}))
	for i := range ow2 {
		ow2[i] = got[i*keepRowBytes]
	}
	if !bytes.Equal(ow, ow2) {
		t.Errorf("another owner's rows read %x: the kernel wrote the blocks the move freed", ow2)
	}
	check(t, o.Release())
	keptRows(t, h, 0x5a, 0x5a, 0x5a)
}
