package store

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// FuzzStore reads a program from the input: each step an operation on one
// of a few handles with arguments taken from the input, out of range and
// malformed as often as not. No call may panic, every error must wrap a
// sentinel (or come from the pool running out), and the structure's
// invariants must hold after every step.
func FuzzStore(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	f.Add([]byte{0, 5, 0, 0, 1, 9, 2, 200, 3, 1, 4, 0, 6, 0, 7, 1, 11, 0, 12})
	f.Add([]byte{1, 0, 0, 8, 1, 8, 3, 1, 9, 0, 0, 10, 255, 255, 4, 3})
	f.Add([]byte{0, 3, 0, 1, 0, 1, 0, 1, 0, 1, 0, 14, 0, 0, 1, 0, 5, 0, 32, 16, 9, 0, 0, 0, 12, 0, 14, 0})
	sentinels := []error{ErrBound, ErrShape, ErrRange, ErrReleased, ErrNotAncestor, ErrOwner,
		ErrDiverged, ErrInvalidated, ErrNotRetained, ErrNoMemory, ErrExpired}
	f.Fuzz(func(t *testing.T, prog []byte) {
		p, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256, MaxBytes: 256 * 64})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		// A fixed cost model: calibration measures for a while, and the
		// fuzzer wants many programs a second.
		p.calib.model = CostModel{CopyFixed: 200, CopyPerByte: 0.1, Block: 300, PerDelta: 250, Fixed: 300, NewKnown: true}
		p.calib.done = true
		next := func() int {
			if len(prog) == 0 {
				return 0
			}
			b := prog[0]
			prog = prog[1:]
			return int(int8(b))
		}
		arg := func() int {
			if len(prog) < 2 {
				return next()
			}
			v := int(int16(binary.LittleEndian.Uint16(prog)))
			prog = prog[2:]
			return v
		}
		layouts := []*Layout{kv(Append, 40, Invalidate), kv(Mutable, 30, Keep), kv(Append, 0, Keep)}
		layouts[1].Checkpoint = &CheckpointPolicy{Every: 2, Keep: 2}
		ring := kv(Append, 0, Invalidate)
		ring.Window, ring.BlockRows = 6, 4
		layouts = append(layouts, ring)
		var heads []*Head
		var snaps []*Snap
		pickHead := func() *Head {
			if len(heads) == 0 {
				return nil
			}
			return heads[uint(next())%uint(len(heads))]
		}
		pickSnap := func() *Snap {
			if len(snaps) == 0 {
				return nil
			}
			return snaps[uint(next())%uint(len(snaps))]
		}
		batch := func() [][]byte {
			n := arg()
			if n < 0 || n > 100 {
				return [][]byte{make([]byte, uint(n)%37), nil}
			}
			cols := kvRows(n, byte(n))
			if next()%5 == 0 {
				cols[1] = cols[1][:len(cols[1])/2]
			}
			return cols
		}
		for step := 0; len(prog) > 0 && step < 200; step++ {
			var err error
			h := pickHead()
			switch uint(next()) % 15 {
			case 0:
				var x *Head
				x, err = p.NewHead(layouts[uint(next())%uint(len(layouts))], Owner([]string{"a", "b"}[uint(next())%2]))
				if err == nil {
					heads = append(heads, x)
				}
			case 1:
				if h != nil {
					err = h.Append(batch())
				}
			case 2:
				if h != nil {
					err = h.Write(arg(), batch())
				}
			case 3:
				if h != nil {
					_, err = h.AppendDevice(arg())
				}
			case 4:
				if h != nil {
					_, err = h.WriteDevice(arg(), arg())
				}
			case 5:
				if h != nil {
					var s *Snap
					if s, err = h.Snapshot(); err == nil {
						snaps = append(snaps, s)
					}
				}
			case 6:
				if h != nil {
					var c *Head
					if c, err = h.Branch(); err == nil {
						heads = append(heads, c)
					}
				}
			case 7:
				if h != nil {
					err = h.Merge(pickHead())
				}
			case 8:
				if h != nil {
					err = h.Rollback(pickSnap())
				}
			case 9:
				from, to := arg(), arg()
				dst := [][]byte{make([]byte, uint(to-from)%4096), make([]byte, uint(to-from)%4096)}
				if h != nil {
					err = h.Read(from, to, dst)
				} else if s := pickSnap(); s != nil {
					err = s.Read(from, to, dst)
				}
			case 10:
				if h != nil {
					_, err = h.Spans(arg(), arg())
				}
			case 11:
				if h != nil {
					err = h.Release()
				} else if s := pickSnap(); s != nil {
					err = s.Release()
				}
			case 12:
				if h != nil {
					var s *Snap
					if s, err = h.At(Version(uint(arg()))); err == nil {
						snaps = append(snaps, s)
					}
				}
			case 13:
				if h != nil {
					_, err = h.Plan(Version(uint(arg())))
				}
			case 14:
				idx := []int{arg(), arg(), arg()}
				dst := [][]byte{make([]byte, uint(next())%64), make([]byte, uint(next())%32)}
				if h != nil {
					err = h.ReadRows(idx, dst)
				} else if s := pickSnap(); s != nil {
					err = s.ReadRows(idx, dst)
				}
			}
			if err != nil {
				known := false
				for _, s := range sentinels {
					known = known || errors.Is(err, s)
				}
				if !known {
					t.Fatalf("step %d: error wraps no sentinel: %v", step, err)
				}
			}
			if err := checkInvariants(p); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		for _, h := range heads {
			h.Release()
		}
		for _, s := range snaps {
			s.Release()
		}
		if st := p.Stats(); st.PhysicalBytes != 0 || st.Live != 0 || st.LogicalBytes != 0 {
			t.Fatalf("after releasing everything: %+v", st)
		}
	})
}
