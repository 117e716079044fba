package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestFaults fails, one at a time, every backend call each operation makes
// (allocations, copies, memsets) and checks that the failed call changed
// nothing: not the rows, the version, the handle's stats, nor the pool's
// physical and logical bytes; the structure's invariants hold throughout.
func TestFaults(t *testing.T) {
	type setup struct {
		p    *Pool
		fb   *statetest.Faults
		h    *Head
		keep []*Snap
	}
	// prepare makes a head with rows in several blocks, a snapshot sharing
	// them when shared, and dirty blocks of another owner in the pool.
	prepare := func(t *testing.T, g Growth, shared bool, maxBytes int64) *setup {
		fb := statetest.NewFaults(device.Host())
		p, err := NewPool(fb, PoolOptions{BlockBytes: 256, MaxBytes: maxBytes})
		check(t, err)
		other := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "other"))
		check(t, other.Append(kvRows(40, 7)))
		check(t, other.Release())
		h := must[*Head](t)(p.NewHead(kv(g, 100, Keep), "me"))
		s := &setup{p: p, fb: fb, h: h}
		if g == Append {
			check(t, h.Append(kvRows(37, 1)))
		} else {
			check(t, h.Write(0, kvRows(100, 1)))
		}
		if shared {
			snap := must[*Snap](t)(h.Snapshot())
			s.keep = append(s.keep, snap)
			if g == Append {
				// A row appended past the snapshot's, snapshotted and
				// rolled back: the shared tail block holds rows past the
				// head's that the draft's snapshot reads, so the next
				// append copies it.
				check(t, h.Append(kvRows(1, 5)))
				s.keep = append(s.keep, must[*Snap](t)(h.Snapshot()))
				check(t, h.Rollback(snap))
			}
		}
		return s
	}
	ops := []struct {
		name   string
		growth Growth
		shared bool
		run    func(h *Head) error
	}{
		{"append in place", Append, false, func(h *Head) error { return h.Append(kvRows(30, 2)) }},
		{"append over a shared block", Append, true, func(h *Head) error { return h.Append(kvRows(30, 2)) }},
		{"device append", Append, true, func(h *Head) error { return second(h.AppendDevice(30)) }},
		{"write in place", Mutable, false, func(h *Head) error { return h.Write(5, kvRows(40, 2)) }},
		{"write whole blocks", Mutable, false, func(h *Head) error { return h.Write(0, kvRows(96, 2)) }},
		{"write shared", Mutable, true, func(h *Head) error { return h.Write(5, kvRows(40, 2)) }},
		{"device write shared", Mutable, true, func(h *Head) error { return second(h.WriteDevice(3, 70)) }},
		{"read", Mutable, true, func(h *Head) error {
			return h.Read(0, 100, [][]byte{make([]byte, 1600), make([]byte, 800)})
		}},
		{"new mutable head", Mutable, false, func(h *Head) error {
			// Use up the clean blocks, so that the new head gets blocks
			// another owner dirtied, zeroed one by one.
			clean := len(h.pool.mem.Clean(h.pool.own))
			l := &Layout{Type: "Filler", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}}
			f, err := h.pool.NewHead(l, "filler")
			if err != nil {
				return err
			}
			defer f.Release()
			if _, err := f.AppendDevice(clean); err != nil {
				return err
			}
			c, err := h.pool.NewHead(kv(Mutable, 50, Keep), "third")
			if err == nil {
				c.Release()
			}
			return err
		}},
	}
	for _, op := range ops {
		for _, maxBytes := range []int64{0, 256 * 120} {
			t.Run(fmt.Sprintf("%s/max=%d", op.name, maxBytes), func(t *testing.T) {
				for k := 0; ; k++ {
					s := prepare(t, op.growth, op.shared, maxBytes)
					before, st := readAll(t, s.h), s.h.Stats()
					pst := s.p.Stats()
					s.fb.Arm(statetest.OpAll, k)
					err := op.run(s.h)
					fired := s.fb.Disarm()
					if !fired {
						if err != nil && !errors.Is(err, ErrNoMemory) {
							t.Fatalf("with no fault: %v", err)
						}
						if err := checkInvariants(s.p); err != nil {
							t.Fatal(err)
						}
						s.p.Close()
						if k == 0 && op.name != "read" {
							t.Fatal("the operation made no backend call")
						}
						return
					}
					if err == nil {
						t.Fatalf("call %d failed, the operation succeeded", k)
					}
					if !errors.Is(err, statetest.ErrInjected) {
						t.Fatalf("call %d: error %v does not wrap the backend's", k, err)
					}
					if errors.Is(err, device.ErrOutOfMemory) != errors.Is(err, ErrNoMemory) {
						t.Fatalf("call %d: out of memory reported as %v", k, err)
					}
					after, st2 := readAll(t, s.h), s.h.Stats()
					if !equalCols(before, after) || st != st2 {
						t.Fatalf("call %d failed and changed the head: stats %+v -> %+v", k, st, st2)
					}
					pst2 := s.p.Stats()
					if pst2.PhysicalBytes != pst.PhysicalBytes || pst2.LogicalBytes != pst.LogicalBytes || pst2.Live != pst.Live {
						t.Fatalf("call %d failed and changed the pool: %+v -> %+v", k, pst, pst2)
					}
					if err := checkInvariants(s.p); err != nil {
						t.Fatalf("call %d: %v", k, err)
					}
					// The head still works.
					for _, x := range s.keep {
						check(t, x.Release())
					}
					if op.growth == Append {
						check(t, s.h.Append(kvRows(1, 3)))
					} else {
						check(t, s.h.Write(0, kvRows(1, 3)))
					}
					check(t, s.h.Release())
					check(t, s.p.Close())
				}
			})
		}
	}
}

// A write that covers whole blocks replaces them with new ones, but writes
// in place when the pool has no room for new ones.
func TestWriteInPlaceAtTheCap(t *testing.T) {
	p, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256, MaxBytes: 256 * 10})
	check(t, err)
	defer p.Close()
	l := &Layout{Type: "Grid", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}, Growth: Mutable, Bound: 10}
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	rows := kvRows(160, 5)[0] // 2560 bytes
	check(t, h.Write(0, [][]byte{rows}))
	dst := [][]byte{make([]byte, 2560)}
	check(t, h.Read(0, 10, dst))
	if string(dst[0]) != string(rows) {
		t.Fatal("rows written in place at the cap differ")
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}
