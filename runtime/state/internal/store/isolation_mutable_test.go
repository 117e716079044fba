package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Mutable states of several owners and row widths (several
// size classes) under a cap, written by Write and by WriteDevice (the
// spans handed to a kernel must hold the state's current rows: copy on
// write keeps them), with snapshots holding their blocks, rollbacks to
// them, and memset/copy/alloc faults at random. Every head and snapshot
// reads exactly its reference rows after every step (a failed call
// changes nothing); the invariants hold; everything released, nothing is
// in use.
func TestIsolationMutableOwnersFaults(t *testing.T) {
	const bound = 20
	for seed := range uint64(10) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 12))
			fb := statetest.NewFaults(device.Host())
			p, err := NewPool(fb, PoolOptions{MaxBytes: 160 << 10})
			check(t, err)
			defer p.Close()
			ls := isoLayouts(Mutable, bound, Mandatory)
			for _, l := range ls {
				l.Descendants = Keep
			}
			type snapRef struct {
				s   *Snap
				ref [][]byte
			}
			type mh struct {
				h     *Head
				l     *Layout
				ref   [][]byte
				snaps []snapRef
			}
			clone := func(c [][]byte) [][]byte {
				out := make([][]byte, len(c))
				for i := range c {
					out[i] = bytes.Clone(c[i])
				}
				return out
			}
			var hs []*mh
			for o := range 6 {
				l := ls[o%len(ls)]
				h := must[*Head](t)(p.NewHead(l, Owner(fmt.Sprint("o", o))))
				ref := make([][]byte, len(l.Columns))
				for c, col := range l.Columns {
					ref[c] = make([]byte, bound*col.ElemSize*col.Width)
				}
				hs = append(hs, &mh{h: h, l: l, ref: ref})
			}
			for step := range 300 {
				x := hs[r.IntN(len(hs))]
				from := r.IntN(bound)
				to := from + 1 + r.IntN(bound-from)
				v := byte(1 + r.IntN(250))
				if seed%2 == 1 && r.IntN(3) == 0 {
					fb.Arm([]statetest.Op{statetest.OpMemset, statetest.OpCopy, statetest.OpAlloc}[r.IntN(3)], r.IntN(3))
				}
				var what string
				switch op := r.IntN(5); op {
				case 0, 1:
					what = "write"
					rows := isoRows(x.l, to-from, v)
					if err := x.h.Write(from, rows); err == nil {
						for c, col := range x.l.Columns {
							rb := col.ElemSize * col.Width
							copy(x.ref[c][from*rb:], rows[c])
						}
					}
				case 2:
					what = "write device"
					spans, err := x.h.WriteDevice(from, to)
					fb.Disarm()
					if err != nil {
						break
					}
					got, err := isoSpanBytes(p.b, x.l, spans)
					check(t, err)
					for c, col := range x.l.Columns {
						rb := col.ElemSize * col.Width
						if !bytes.Equal(got[c], x.ref[c][from*rb:to*rb]) {
							t.Fatalf("step %d: WriteDevice's spans of column %d do not hold the state's rows %d..%d", step, c, from, to)
						}
						for _, sp := range spans[c] {
							check(t, p.b.Memset(sp.Ptr, v, sp.Rows*rb))
						}
						for i := from * rb; i < to*rb; i++ {
							x.ref[c][i] = v
						}
					}
				case 3:
					what = "snapshot"
					if s, err := x.h.Snapshot(); err == nil {
						x.snaps = append(x.snaps, snapRef{s, clone(x.ref)})
					}
				default:
					if len(x.snaps) == 0 {
						break
					}
					i := r.IntN(len(x.snaps))
					if r.IntN(2) == 0 {
						what = "rollback"
						if err := x.h.Rollback(x.snaps[i].s); err == nil {
							x.ref = clone(x.snaps[i].ref)
						}
					} else {
						what = "release snap"
						fb.Disarm()
						check(t, x.snaps[i].s.Release())
						x.snaps = append(x.snaps[:i], x.snaps[i+1:]...)
					}
				}
				fb.Disarm()
				for hi, y := range hs {
					got, err := isoRead(y.h, y.l, 0, bound)
					if err != nil {
						t.Fatalf("step %d (%s): read: %v", step, what, err)
					}
					for c := range got {
						if !bytes.Equal(got[c], y.ref[c]) {
							t.Fatalf("step %d (%s): head %d column %d reads other rows than its own", step, what, hi, c)
						}
					}
					for _, s := range y.snaps {
						got, err := isoRead(s.s, y.l, 0, bound)
						if err != nil {
							t.Fatalf("step %d: snapshot read: %v", step, err)
						}
						for c := range got {
							if !bytes.Equal(got[c], s.ref[c]) {
								t.Fatalf("step %d (%s): a snapshot of head %d, column %d, changed", step, what, hi, c)
							}
						}
					}
				}
				if err := checkInvariants(p); err != nil {
					t.Fatalf("step %d (%s): %v", step, what, err)
				}
			}
			for _, y := range hs {
				for _, s := range y.snaps {
					check(t, s.s.Release())
				}
				check(t, y.h.Release())
			}
			if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 || st.Blocks != 0 {
				t.Fatalf("all released, the pool counts %+v", st)
			}
		})
	}
}
