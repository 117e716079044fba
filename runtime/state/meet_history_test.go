package state

import (
	"errors"
	"runtime"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// Regression tests for where history (checkpoints, reconstruction, the
// cost model, rollback) meets the rest of the runtime.

// cpLayout is a mutable two-column layout with checkpoints every few
// versions.
func cpLayout(ret Retention) *Layout {
	l := kv(Mutable, 64, Invalidate)
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 4}
	l.Retention = ret
	return l
}

// TestAtFailureLeaksNothing fails the copy At makes to seed a block it
// copies on write, and checks that the failed reconstruction gave back
// every block it took: the pool's blocks in use are as before.
func TestAtFailureLeaksNothing(t *testing.T) {
	fb := newFaultBackend(device.Host())
	p, err := NewPool(fb, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	fixedModel(p)
	h := must[*Head](t)(p.NewHead(cpLayout(Mandatory), "me"))
	var vs []Version
	for i := range 3 {
		check(t, h.Write(i, kvRows(1, byte(i+1))))
		vs = append(vs, h.Version())
	}
	before := p.Stats()
	fb.arm(opCopy, 0) // the seed copy of the first block the delta writes
	if _, err := h.At(vs[1]); !errors.Is(err, errInjected) {
		t.Fatalf("At with a failing copy: %v, want the injected fault", err)
	}
	if !fb.disarm() {
		t.Fatal("the fault did not fire")
	}
	after := p.Stats()
	if after.Blocks != before.Blocks || after.PhysicalBytes != before.PhysicalBytes {
		t.Fatalf("a failed At kept blocks: %d blocks (%d bytes) in use, %d (%d) before",
			after.Blocks, after.PhysicalBytes, before.Blocks, before.PhysicalBytes)
	}
	s := must[*Snap](t)(h.At(vs[1]))
	check(t, s.Release())
	check(t, h.Release())
	if st := p.Stats(); st.Blocks != 0 {
		t.Fatalf("%d blocks in use after every handle is released", st.Blocks)
	}
}

// TestRebuildFailureLeaksNothing evicts a reconstructable head, fails the
// rebuild its next call makes, and checks that the blocks the rebuild took
// went back.
func TestRebuildFailureLeaksNothing(t *testing.T) {
	fb := newFaultBackend(device.Host())
	p, err := NewPool(fb, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	fixedModel(p)
	h := must[*Head](t)(p.NewHead(cpLayout(Reconstructable), "me"))
	for i := range 3 {
		check(t, h.Write(i, kvRows(1, byte(i+1))))
	}
	if _, ok := h.evict(); !ok {
		t.Fatal("the reconstructable head was not evicted")
	}
	before := p.Stats()
	fb.arm(opCopy, 0)
	dst := [][]byte{make([]byte, 16), make([]byte, 8)}
	if err := h.Read(0, 1, dst); !errors.Is(err, errInjected) {
		t.Fatalf("Read with a failing rebuild: %v, want the injected fault", err)
	}
	fb.disarm()
	if after := p.Stats(); after.Blocks != before.Blocks {
		t.Fatalf("a failed rebuild kept blocks: %d in use, %d before", after.Blocks, before.Blocks)
	}
	check(t, h.Read(0, 1, dst))
	check(t, h.Release())
	if st := p.Stats(); st.Blocks != 0 {
		t.Fatalf("%d blocks in use after every handle is released", st.Blocks)
	}
}

// fixedModel gives p a cost model without measuring, so that the faults
// a test arms meet the reconstruction, not the calibration.
func fixedModel(p *Pool) {
	p.calib.mu.Lock()
	p.calib.model = CostModel{CopyFixed: 200, CopyPerByte: 0.1, Block: 300, PerDelta: 250, Fixed: 300}
	p.calib.done = true
	p.calib.mu.Unlock()
}

// TestPlanCalibrationEvictsNothing calls Plan first on a pool that
// optional state nearly fills: the calibration Plan's first call makes
// takes only the room there is, so no handle is evicted, and it does not
// make a buffer of its own (a pool's calibration allocates little on the
// host).
func TestPlanCalibrationEvictsNothing(t *testing.T) {
	warm := newPool(t, PoolOptions{BlockBytes: 256})
	must[CostModel](t)(warm.CostModel()) // the process's shared buffers exist now

	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 64 << 10})
	opt := must[*Head](t)(p.NewHead(wide("Cache", Optional), "cache"))
	defer func() { opt.Release() }()
	rows := make([]byte, 256)
	for opt.Append([][]byte{rows}) == nil {
	}
	// Room for a few blocks, far fewer than a calibration would like.
	check(t, opt.Release())
	opt = must[*Head](t)(p.NewHead(wide("Cache", Optional), "cache"))
	n := int(p.Stats().ReservedBytes/256) - 24
	check(t, opt.Append([][]byte{make([]byte, n*256)}))
	h := must[*Head](t)(p.NewHead(cpLayout(Mandatory), "me"))
	defer h.Release()
	check(t, h.Write(0, kvRows(1, 1)))
	v := h.Version()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := h.Plan(v); err != nil {
		t.Fatalf("Plan: %v", err)
	}
	runtime.ReadMemStats(&after)
	if st := p.Stats(); st.EvictedBytes != 0 {
		t.Fatalf("Plan evicted %d bytes of optional state", st.EvictedBytes)
	}
	if got := opt.Len(); got != n {
		t.Fatalf("the optional head has %d rows after Plan, want %d", got, n)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 4<<20 {
		t.Fatalf("Plan's calibration allocated %d bytes on the host", a)
	}
}
