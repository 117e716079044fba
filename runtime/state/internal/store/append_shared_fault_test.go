package store

import (
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestFaultAfterClaim: an append past a shared tail that claims the
// block's fill and then fails (a copy, an allocation or a zeroing the
// backend refuses, at every point in turn) leaves the head, its snapshot
// and its branch reading as before; the branch and the head then append
// their own rows (the claim left behind makes one of them copy), and
// every one reads its own rows.
func TestFaultAfterClaim(t *testing.T) {
	l := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 1024, BlockRows: 4, Descendants: Keep}
	for _, kind := range []statetest.Op{statetest.OpCopy, statetest.OpAlloc, statetest.OpMemset} {
		for n := range 10 {
			for _, batch := range []bool{false, true} {
				t.Run(fmt.Sprintf("op%d/%d/batch=%v", kind, n, batch), func(t *testing.T) {
					f := statetest.NewFaults(device.Host())
					p := must[*Pool](t)(NewPool(f, PoolOptions{}))
					defer p.Close()
					h := must[*Head](t)(p.NewHead(l, "me"))
					defer h.Release()
					base := []uint32{1, 2, 3, 4, 5}
					for _, x := range base {
						check(t, h.Append(tokRow(x)))
					}
					s := must[*Snap](t)(h.Snapshot())
					defer s.Release()
					b := must[*Head](t)(h.Branch())
					defer b.Release()
					ho := &tailObj{h: h, toks: append([]uint32(nil), base...), name: "head"}
					bo := &tailObj{h: b, toks: append([]uint32(nil), base...), name: "branch"}
					so := &tailObj{s: s, toks: base, name: "snapshot"}
					more := []uint32{11, 12, 13, 14, 15, 16}
					f.Arm(kind, n)
					var err error
					if batch {
						w := tailWant(more)
						err = h.Append([][]byte{w[0], w[1]})
						if err == nil {
							ho.toks = append(ho.toks, more...)
						}
					} else {
						for _, x := range more {
							if err = h.Append(tokRow(x)); err != nil {
								break
							}
							ho.toks = append(ho.toks, x)
						}
					}
					f.Disarm()
					for _, o := range []*tailObj{ho, bo, so} {
						tailCheck(t, 0, o)
					}
					for i, o := range []*tailObj{bo, ho} {
						for k := range 3 {
							x := uint32(100*(i+1) + k)
							check(t, o.h.Append(tokRow(x)))
							o.toks = append(o.toks, x)
						}
					}
					for _, o := range []*tailObj{ho, bo, so} {
						tailCheck(t, 0, o)
					}
					if err := checkInvariants(p); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}
