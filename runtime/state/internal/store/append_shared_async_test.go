package store

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestAppendAsyncPastSharedTail: branches of one version append on
// streams of their own past the tail they share with a snapshot (one in
// place, the others copying), while the snapshot's rows are read on a
// third stream; after the streams sync every branch and the snapshot read
// their own rows, and releasing everything gives every block back. Run it
// with -race.
func TestAppendAsyncPastSharedTail(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 4096, BlockRows: 8, Descendants: Keep}
	streams := p.Backend().(device.Streams)
	for round := range 10 {
		h := must[*Head](t)(p.NewHead(l, "me"))
		base := []uint32{}
		for i := range 1 + round%7 {
			base = append(base, uint32(i+1))
			check(t, h.Append(tokRow(uint32(i+1))))
		}
		s := must[*Snap](t)(h.Snapshot())
		objs := []*tailObj{{h: h, toks: append([]uint32(nil), base...), name: "head"}}
		for b := range 3 {
			objs = append(objs, &tailObj{h: must[*Head](t)(h.Branch()), toks: append([]uint32(nil), base...), name: fmt.Sprint("branch", b)})
		}
		var wg sync.WaitGroup
		errs := make([]error, len(objs)+1)
		for i, o := range objs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := streams.NewStream()
				if err != nil {
					errs[i] = err
					return
				}
				defer st.Close()
				for k := range 11 {
					var toks []uint32
					for j := range 1 + (k+i)%5 {
						toks = append(toks, uint32(100*(i+1)+10*k+j))
					}
					w := tailWant(toks)
					if err := o.h.AppendAsync(st, [][]byte{w[0], w[1]}); err != nil {
						errs[i] = err
						return
					}
					o.toks = append(o.toks, toks...)
				}
				errs[i] = st.Sync()
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := streams.NewStream()
			if err != nil {
				errs[len(objs)] = err
				return
			}
			defer st.Close()
			w := tailWant(base)
			for range 30 {
				got := [][]byte{make([]byte, len(w[0])), make([]byte, len(w[1]))}
				if err := s.ReadAsync(st, 0, len(base), got); err != nil {
					errs[len(objs)] = err
					return
				}
				if err := st.Sync(); err != nil {
					errs[len(objs)] = err
					return
				}
				if !bytes.Equal(got[0], w[0]) || !bytes.Equal(got[1], w[1]) {
					errs[len(objs)] = fmt.Errorf("round %d: the snapshot reads other rows than its own while branches append", round)
					return
				}
			}
		}()
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range objs {
			tailCheck(t, round, o)
		}
		tailCheck(t, round, &tailObj{s: s, toks: base, name: "snapshot"})
		if err := checkInvariants(p); err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			check(t, o.h.Release())
		}
		check(t, s.Release())
		p.WaitPending()
		if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
			t.Fatalf("round %d: after releasing everything: %d live, %d physical bytes", round, st.Live, st.PhysicalBytes)
		}
	}
}
