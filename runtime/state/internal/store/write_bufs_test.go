package store

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestSpareBuffersAcrossLayouts: heads of a wide layout (four
// columns, bulk appends that grow their plan and copy buffers) are
// released on some goroutines while branches and heads of a one-column
// layout, and of the two-column token layout past shared tails, take
// their buffers on others. Every head reads its own rows; releasing
// everything gives every block back. Run it with -race.
func TestSpareBuffersAcrossLayouts(t *testing.T) {
	p := newPool(t, PoolOptions{})
	wide4 := &Layout{Type: "Wide", Columns: []Column{{Name: "A", ElemSize: 4, Width: 3}, {Name: "B", ElemSize: 8, Width: 1}, {Name: "C", ElemSize: 2, Width: 5}, {Name: "D", ElemSize: 1, Width: 7}}, Growth: Append, Bound: 4096, BlockRows: 8}
	one := &Layout{Type: "One", Columns: []Column{{Name: "X", ElemSize: 4, Width: 1}}, Growth: Append, Bound: 4096, BlockRows: 4}
	tok := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 4096, BlockRows: 4, Descendants: Keep}
	readAllOf := func(h *Head, l *Layout) [][]byte {
		cols, err := readLayoutRows(h, l)
		check(t, err)
		return cols
	}
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				l := []*Layout{wide4, one}[(g+i)%2]
				h, err := p.NewHead(l, Owner(fmt.Sprint("o", g)))
				if err != nil {
					errc <- err
					return
				}
				var want [][]byte
				for k := range 3 {
					n := 1 + (i*7+k*11)%40
					r := layoutRows(l, n, byte(g*50+i+k))
					if err := h.Append(r); err != nil {
						errc <- err
						return
					}
					if want == nil {
						want = make([][]byte, len(r))
					}
					for c := range r {
						want[c] = append(want[c], r[c]...)
					}
				}
				b, err := h.Branch()
				if err != nil {
					errc <- err
					return
				}
				h.Release()
				r := layoutRows(l, 3, byte(g+i))
				if err := b.Append(r); err != nil {
					errc <- err
					return
				}
				for c := range r {
					want[c] = append(want[c], r[c]...)
				}
				got := readAllOf(b, l)
				for c := range want {
					if !bytes.Equal(got[c], want[c]) {
						errc <- fmt.Errorf("goroutine %d round %d: %s column %d reads other rows", g, i, l.Type, c)
						return
					}
				}
				// A token head's branches past the shared tail.
				th, _ := p.NewHead(tok, Owner(fmt.Sprint("o", g)))
				for k := range 5 {
					th.Append(tokRow(uint32(k)))
				}
				tb, _ := th.Branch()
				th.Append(tokRow(99))
				tb.Append(tokRow(77))
				b.Release()
				for _, x := range []struct {
					h    *Head
					toks []uint32
				}{{th, []uint32{0, 1, 2, 3, 4, 99}}, {tb, []uint32{0, 1, 2, 3, 4, 77}}} {
					got := [][]byte{make([]byte, 24), make([]byte, 48)}
					if err := x.h.Read(0, 6, got); err != nil {
						errc <- err
						return
					}
					w := tailWant(x.toks)
					if !bytes.Equal(got[0], w[0]) || !bytes.Equal(got[1], w[1]) {
						errc <- fmt.Errorf("goroutine %d round %d: a token head reads other rows", g, i)
						return
					}
				}
				th.Release()
				tb.Release()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
		t.Fatalf("after releasing everything: %d live, %d physical bytes", st.Live, st.PhysicalBytes)
	}
}

// TestFailedNewHeadGivesBuffersBack: a new mutable head that finds no
// room for its rows gives the write buffers it took back to its shard's
// spares, where the next head finds them.
func TestFailedNewHeadGivesBuffersBack(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 4 << 10})
	for range gateShards { // a spare in every shard's stock, the next head's included
		h := must[*Head](t)(p.NewHead(rec(Keep), "a"))
		check(t, h.Write(0, recRow(1))) // buffers of some size
		check(t, h.Release())
	}
	spares := func() int {
		n := 0
		for i := range p.spares {
			s := &p.spares[i]
			s.mu.Lock()
			n += len(s.bufs)
			s.mu.Unlock()
		}
		return n
	}
	before := spares()
	if before == 0 {
		t.Fatal("a released head left no spare buffers")
	}
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}, Growth: Mutable, Bound: 64}
	if _, err := p.NewHead(big, "b"); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("a head larger than the cap: %v, want ErrNoMemory", err)
	}
	if got := spares(); got != before {
		t.Errorf("%d spare buffers after a failed NewHead, %d before", got, before)
	}
}

// TestSparesFromTheShardBefore: a head whose shard's stock is empty takes
// the spare buffers the heads of the shard before it left, as a beam
// search's new root does those of the last query's beams.
func TestSparesFromTheShardBefore(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := kv(Append, 0, Invalidate)
	h := must[*Head](t)(p.NewHead(l, "a"))
	check(t, h.Append(kvRows(3, 1))) // buffers of some size
	k := h.gate
	check(t, h.Release())
	if p.spares[k].n.Load() == 0 {
		t.Fatal("a released head left no spare buffers in its shard")
	}
	next := must[*Head](t)(p.NewHead(l, "b"))
	defer next.Release()
	if next.gate == k {
		t.Fatalf("two heads made in turn in shard %d", k)
	}
	if next.writeBufs.empty() || p.spares[k].n.Load() != 0 {
		t.Errorf("the next head (shard %d) took no buffers; shard %d keeps %d", next.gate, k, p.spares[k].n.Load())
	}
}
