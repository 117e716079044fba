package store

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestKernelRowsGroup: a group's member writes rows by a held kernel;
// the group branches, the branch's member copies the block on write, the
// branch's own member kernel is merged back into the group, and the
// group rolls back and is released: every version keeps the kernels'
// rows, and every event is closed (the pool drains).
func TestKernelRowsGroup(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		defer p.Close()
		g := must[*Group](t)(NewGroup(p, "s", keepLayout(false, Mutable), keepLayout(false, Append)))
		m := g.Head(0)
		check(t, m.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
		check(t, g.Head(1).Append(oneRow(0x01)))
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		hold := func() {
			r.Hold(t, st)
			time.AfterFunc(30*time.Millisecond, r.Release)
		}
		hold()
		fillOn(t, r, st, must[[][]device.Span](t)(m.WriteDevice(2, 4)), 0x5a)
		check(t, m.RecordStream(st))
		cut := must[*GroupSnap](t)(g.Snapshot())
		b := must[*Group](t)(g.Branch())
		check(t, b.Head(0).Write(0, oneRow(0x22))) // copies the block the kernel writes
		hold()
		fillOn(t, r, st, must[[][]device.Span](t)(b.Head(0).WriteDevice(5, 6)), 0x6b)
		check(t, b.Head(0).RecordStream(st))
		check(t, g.Merge(b))
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); check(t, b.Head(0).Write(7, oneRow(0x33))) }()
		check(t, g.Head(0).Write(1, oneRow(0x44))) // copies: b shares the block
		wg.Wait()
		check(t, st.Sync())
		keptRows(t, g.Head(0), 0x22, 0x44, 0x5a, 0x5a, 0x11, 0x6b, 0x11, 0x11)
		keptRows(t, b.Head(0), 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x6b, 0x11, 0x33)
		check(t, b.Release())
		check(t, g.Rollback(cut))
		check(t, g.Head(0).Write(0, oneRow(0x55)))
		keptRows(t, g.Head(0), 0x55, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
		check(t, cut.Release())
		check(t, g.Release())
		if ps := p.Stats(); ps.PhysicalBytes != 0 {
			t.Errorf("after every release: %+v", ps)
		}
	})
}
