package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestModelOnHostMemory: TestModel's pools are over a Faults wrapper,
// which is not the host backend, so its blocks are never host-mapped and
// none of the built-in copy paths (hostcopy.go, hostInPlace,
// visibleOnHost, readHost, the history's copies) run there. This runs the
// same model over device.Host() itself.
func TestModelOnHostMemory(t *testing.T) {
	steps := modelSteps(t, 1000)
	seeds := []uint64{1, 2, 3, 4, 5, 6}
	if n, ok := statetest.Seed(); ok {
		seeds = []uint64{n}
	} else if testing.Short() {
		seeds = seeds[:2]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModelOnHost(t, seed, steps, 0) })
		t.Run(fmt.Sprint("pressure/", seed), func(t *testing.T) { runModelOnHost(t, seed, steps, 48+16*int64(seed%3)) })
		t.Run(fmt.Sprint("rowsized/", seed), func(t *testing.T) { runModelOnHost(t, seed, steps, -int64(64+32*(seed%3))) })
	}
}

// runModelOnHost is runModel over the host backend unwrapped. runModel runs one seed; maxBlocks, when not zero, caps the pool; when
// negative, the pool's blocks follow the rows (BlockBytes 0) and its cap is
// -maxBlocks KiB.
func runModelOnHost(t *testing.T, seed uint64, steps int, maxBlocks int64) {
	// Odd seeds run on the host backend, even ones on an arena whose
	// allocations lie back to back.
	// The pool is over the host backend itself, so that its blocks are
	// host-mapped (Block.Host) and every copy takes the built-in path;
	// fb wraps the same backend for the model's span writes, and its
	// faults never fire (the pool does not call it).
	base := device.Host()
	fb := statetest.NewFaults(base)
	blockBytes := []int{256, 512, 1024}[seed%3]
	if maxBlocks == 0 {
		maxBlocks = int64(800 + seed%3*400)
	}
	opt := PoolOptions{BlockBytes: blockBytes, MaxBytes: int64(blockBytes) * maxBlocks}
	if maxBlocks < 0 {
		opt = PoolOptions{MaxBytes: -maxBlocks << 10}
	}
	p, err := NewPool(base, opt)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	m := &model{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), fb: fb, pool: p, other: other,
		owners: []Owner{"alice", "bob"}, counts: map[string]int{}}
	// A foreign snapshot per owner, from another pool.
	for _, o := range m.owners {
		l := &Layout{Type: "Foreign", Columns: []Column{{Name: "A", ElemSize: 4, Width: 1}}}
		h, err := other.NewHead(l, o)
		if err != nil {
			t.Fatal(err)
		}
		s, err := h.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		m.foreign = append(m.foreign, NewRefLineage(o, l).Snap(s, 0, [][]byte{{}}))
		h.Release()
	}
	ops := []struct {
		name   string
		weight int
		f      func()
	}{
		{"new head", 2, m.newHead},
		{"append", 10, m.appendRows},
		{"write", 10, m.writeRows},
		{"append device", 4, m.appendDevice},
		{"write device", 4, m.writeDevice},
		{"snapshot", 6, m.snapshot},
		{"branch", 3, m.branch},
		{"merge", 3, m.merge},
		{"rollback", 5, m.rollback},
		{"release", 4, m.release},
		{"trim", 1, m.trim},
		{"read head", 3, func() {
			if x := m.pick(m.heads); x != nil {
				m.read(x)
			}
		}},
		{"read snapshot", 3, func() {
			if x := m.pick(m.snaps); x != nil {
				m.read(x)
			}
		}},
		{"read rows", 3, func() {
			if x := m.pick(append(m.heads[:len(m.heads):len(m.heads)], m.snaps...)); x != nil {
				m.readRows(x)
			}
		}},
	}
	releaseOp := slices.IndexFunc(ops, func(o struct {
		name   string
		weight int
		f      func()
	}) bool {
		return o.name == "release"
	})
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	for m.step = 0; m.step < steps; m.step++ {
		k := m.rng.IntN(total)
		i := 0
		for k >= ops[i].weight {
			k -= ops[i].weight
			i++
		}
		if len(m.heads)+len(m.snaps) > 60 {
			i = releaseOp // keep the population, and the cost of a step, bounded
		}
		m.lastOp = ops[i].name
		// Now and then a backend call fails: the step must then change
		// nothing, which verify checks against the unchanged model.
		armed := m.rng.IntN(4) == 0
		if armed {
			fb.Arm(statetest.Op(1+m.rng.IntN(int(statetest.OpAll))), m.rng.IntN(4))
		}
		before := p.Stats()
		m.failed = false
		ops[i].f()
		if fired := fb.Disarm(); fired && m.failed {
			after := p.Stats()
			if after.EvictedBytes != before.EvictedBytes {
				// Eviction took optional state before the fault: a change
				// verify checks handle by handle.
			} else if after.PhysicalBytes != before.PhysicalBytes || after.LogicalBytes != before.LogicalBytes || after.Live != before.Live {
				m.fatalf("a failed call changed the pool: physical %d -> %d, logical %d -> %d, live %d -> %d",
					before.PhysicalBytes, after.PhysicalBytes, before.LogicalBytes, after.LogicalBytes, before.Live, after.Live)
			}
		}
		m.verify()
	}
	keys := make([]string, 0, len(m.counts))
	for k := range m.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-40s %d", k, m.counts[k])
	}
	for _, list := range [][]*RefHandle{m.heads, m.snaps} {
		for _, x := range list {
			if x.Head != nil {
				x.Head.Release()
			} else {
				x.Snap.Release()
			}
		}
	}
	st := p.Stats()
	if st.PhysicalBytes != 0 || st.LogicalBytes != 0 || st.Live != 0 {
		t.Fatalf("seed %d: after releasing everything: %+v", seed, st)
	}
	if _, err := p.Trim(); err != nil {
		t.Fatalf("seed %d: trim: %v", seed, err)
	}
	if st := p.Stats(); st.ReservedBytes != 0 || st.Slabs != 0 || st.FreeBlocks != 0 {
		t.Fatalf("seed %d: after releasing everything and Trim: %+v", seed, st)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, x := range m.foreign {
		x.Snap.Release()
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
}
