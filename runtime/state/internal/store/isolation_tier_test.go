package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Optional heads of several owners move to a small host tier
// and back (the tier's own allocator swaps its blocks between owners, and
// drops images to make room), mandatory heads push them out, device
// appends land on heads brought back, and memset faults fire at random:
// every read of an owner finds its own byte or zeros, a head evicted
// answers ErrEvicted, and the invariants hold throughout.
func TestIsolationTierOwnersSwap(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 5))
			fb := statetest.NewFaults(device.Host())
			p, err := NewPool(fb, PoolOptions{BlockBytes: 256, MaxBytes: 24 * 256, HostTier: 10 * 256})
			check(t, err)
			defer p.Close()
			type th struct {
				h     *Head
				owner int
				l     *Layout
			}
			var hs []th
			lOpt, lMan := wide("Cache", Optional), wide("Session", Mandatory)
			for step := range 250 {
				o := r.IntN(5)
				mine := isoOwnerByte(o)
				if seed%2 == 1 && r.IntN(5) == 0 {
					fb.Arm(statetest.OpMemset, r.IntN(2))
				}
				switch op := r.IntN(6); {
				case op <= 1 || len(hs) == 0:
					l := lOpt
					if op == 1 {
						l = lMan
					}
					h, err := p.NewHead(l, Owner(fmt.Sprint("o", o)))
					if err != nil {
						break
					}
					hs = append(hs, th{h, o, l})
					_ = h.Append(isoRows(l, 1+r.IntN(3), mine))
				case op == 2:
					x := hs[r.IntN(len(hs))]
					spans, err := x.h.AppendDevice(1 + r.IntN(2))
					fb.Disarm()
					if err != nil {
						break
					}
					got, err := isoSpanBytes(p.b, x.l, spans)
					check(t, err)
					if s := isoForeign(got, isoOwnerByte(x.owner)); s != "" {
						t.Fatalf("step %d: a device append of o%d finds %s", step, x.owner, s)
					}
					for _, ss := range spans {
						for _, sp := range ss {
							check(t, p.b.Memset(sp.Ptr, isoOwnerByte(x.owner), sp.Rows*256))
						}
					}
				case op == 3:
					i := r.IntN(len(hs))
					fb.Disarm()
					check(t, hs[i].h.Release())
					hs = append(hs[:i], hs[i+1:]...)
				default:
					x := hs[r.IntN(len(hs))]
					_ = x.h.Append(isoRows(x.l, 1, isoOwnerByte(x.owner)))
				}
				fb.Disarm()
				for _, x := range hs {
					n := x.h.Len()
					got, err := isoRead(x.h, x.l, 0, n)
					if errors.Is(err, ErrEvicted) || errors.Is(err, ErrNoMemory) {
						continue
					}
					if err != nil {
						t.Fatalf("step %d: read: %v", step, err)
					}
					if s := isoForeign(got, isoOwnerByte(x.owner)); s != "" {
						t.Fatalf("step %d: a head of o%d reads %s", step, x.owner, s)
					}
				}
				if err := checkInvariants(p); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
			if st0 := p.Stats(); st0.TierOut == 0 {
				t.Fatalf("nothing moved to the tier: %+v", st0)
			}
			for _, x := range hs {
				check(t, x.h.Release())
			}
			if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 || st.TierBytes != 0 {
				t.Fatalf("all released, the pool counts %+v", st)
			}
		})
	}
}
