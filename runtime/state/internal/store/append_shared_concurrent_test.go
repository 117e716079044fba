package store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestBranchesAppendConcurrently: many branches of one version, on
// goroutines of their own, append past the shared tail at once (one wins
// each block's fill, the others copy), while a snapshot of the version is
// read; then every branch, the snapshot and the parent read their own
// rows, and releasing everything gives every block back. Run it with
// -race.
func TestBranchesAppendConcurrently(t *testing.T) {
	l := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 4096, BlockRows: 8, Descendants: Keep}
	p := newPool(t, PoolOptions{})
	for round := range 20 {
		h := must[*Head](t)(p.NewHead(l, "me"))
		var base []uint32
		for i := range 3 + round%8 {
			x := uint32(1000*round + i)
			check(t, h.Append(tokRow(x)))
			base = append(base, x)
		}
		s := must[*Snap](t)(h.Snapshot())
		const nb = 6
		objs := []*tailObj{{h: h, toks: append([]uint32(nil), base...), name: "parent"}, {s: s, toks: base, name: "snapshot"}}
		var st device.Stream
		if round%2 == 1 {
			st = must[device.Stream](t)(p.Backend().(device.Streams).NewStream())
		}
		for b := range nb {
			br := must[*Head](t)(h.Branch())
			objs = append(objs, &tailObj{h: br, toks: append([]uint32(nil), base...), name: fmt.Sprint("branch", b)})
		}
		var wg sync.WaitGroup
		errs := make([]error, len(objs))
		for i, o := range objs {
			if o.s != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 13 {
					x := uint32(1000*round+100*(i+1)) + uint32(k)
					var err error
					switch (i + k) % 4 {
					case 0:
						err = o.h.Append(tokRow(x))
					case 1:
						w := tailWant([]uint32{x, x + 50})
						err = o.h.Append([][]byte{w[0], w[1]})
						if err == nil {
							o.toks = append(o.toks, x)
							x += 50
						}
					case 2:
						var spans [][]device.Span
						spans, err = o.h.AppendDevice(1)
						if err == nil {
							w := tokRow(x)
							for c := range spans {
								err = p.Backend().CopyHtoD(spans[c][0].Ptr, w[c])
							}
						}
					case 3:
						if st != nil {
							err = o.h.AppendAsync(st, tokRow(x))
						} else {
							err = o.h.Append(tokRow(x))
						}
					}
					if err != nil {
						errs[i] = err
						return
					}
					o.toks = append(o.toks, x)
				}
			}()
		}
		// The snapshot's reader reads meanwhile.
		for range 50 {
			tailCheck(t, round, objs[1])
		}
		wg.Wait()
		if st != nil {
			check(t, st.Sync())
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %s: %v", round, objs[i].name, err)
			}
		}
		for _, o := range objs {
			tailCheck(t, round, o)
		}
		if err := checkInvariants(p); err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.h != nil {
				check(t, o.h.Release())
			} else {
				check(t, o.s.Release())
			}
		}
		if st != nil {
			check(t, st.Close())
		}
		if ps := p.Stats(); ps.Live != 0 || ps.PhysicalBytes != 0 {
			t.Fatalf("round %d: after releasing everything: %d live, %d physical bytes", round, ps.Live, ps.PhysicalBytes)
		}
	}
}
