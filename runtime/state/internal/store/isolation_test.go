package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestEmptyOwner: a state needs an owner; the empty one is refused with
// ErrOwner and takes nothing from the pool.
func TestEmptyOwner(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	for _, g := range []Growth{Append, Mutable} {
		h, err := p.NewHead(kv(g, 10, Keep), "")
		if !errors.Is(err, ErrOwner) {
			t.Fatalf("%v head of the empty owner: %v, %v; want ErrOwner", g, h, err)
		}
	}
	if st := p.Stats(); st.Live != 0 || st.ReservedBytes != 0 {
		t.Fatalf("a refused head changed the pool: %+v", st)
	}
}

// TestIsolationAfterFailedAlloc: owner x's rows sit in free blocks that do
// not neighbour (owner w's lie between them, so that zeroing them takes a
// call each); an allocation for another owner takes them to zero them and
// fails (a memset fails at each block in turn, or the pool cannot grow);
// then a new mutable state of owner y reads as zeros, a device append of y
// finds no row of x, and every block on the clean list reads as zeros.
func TestIsolationAfterFailedAlloc(t *testing.T) {
	const xBlocks = 6
	grid := func(rows int) *Layout {
		return &Layout{Type: "Grid", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}, Growth: Mutable, Bound: rows}
	}
	type fault struct {
		name  string
		kinds statetest.Op
		n     int
		max   int64
	}
	var faults []fault
	for k := range xBlocks {
		faults = append(faults, fault{fmt.Sprintf("memset %d", k), statetest.OpMemset, k, 0})
	}
	faults = append(faults, fault{"slab alloc", statetest.OpAlloc, 0, 0}, fault{"cap", 0, -1, 256 * 300})
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			fb := statetest.NewFaults(device.Host())
			p, err := NewPool(fb, PoolOptions{BlockBytes: 256, MaxBytes: f.max})
			check(t, err)
			defer p.Close()
			// Owner x writes 0xAB over xBlocks blocks, each beside one of
			// owner w's, and gives them back.
			var ws []*Head
			for range xBlocks {
				x := must[*Head](t)(p.NewHead(grid(1), "x"))
				check(t, x.Write(0, [][]byte{bytes.Repeat([]byte{0xAB}, 256)}))
				check(t, x.Release())
				ws = append(ws, must[*Head](t)(p.NewHead(grid(1), "w")))
			}
			// A filler takes every clean block, so that the next
			// allocations must reuse x's.
			filler := must[*Head](t)(p.NewHead(&Layout{Type: "Filler", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}}, "filler"))
			clean := len(p.mem.Clean(p.own))
			must[[][]device.Span](t)(filler.AppendDevice(clean))
			// Owner z's allocation takes x's blocks and fails.
			if f.kinds != 0 {
				fb.Arm(f.kinds, f.n)
			}
			want := xBlocks
			if f.kinds != statetest.OpMemset {
				want = 300 // more than the pool has free: it must grow
			}
			z, err := p.NewHead(grid(want), "z")
			fired := fb.Disarm()
			if err == nil || (f.kinds != 0 && !fired) {
				t.Fatalf("z's allocation: %v (fault fired: %v), want a failure", err, fired)
			}
			_ = z
			if err := checkInvariants(p); err != nil {
				t.Fatal(err)
			}
			cleanNow := p.mem.Clean(p.own)
			for _, b := range cleanNow {
				buf := make([]byte, 256)
				check(t, p.b.CopyDtoH(buf, b.Ptr()))
				if !bytes.Equal(buf, make([]byte, 256)) {
					t.Fatalf("a clean block after the failed allocation holds %#x...", buf[:4])
				}
			}
			// Owner y gets x's blocks, zeroed.
			y := must[*Head](t)(p.NewHead(grid(xBlocks), "y"))
			got := make([]byte, xBlocks*256)
			check(t, y.Read(0, xBlocks, [][]byte{got}))
			if i := bytes.IndexByte(got, 0xAB); i >= 0 {
				t.Fatalf("a new mutable state of owner y reads owner x's rows at byte %d", i)
			}
			check(t, y.Release())
			ya := must[*Head](t)(p.NewHead(&Layout{Type: "Log", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}}, "y"))
			must[[][]device.Span](t)(ya.AppendDevice(xBlocks))
			check(t, ya.Read(0, xBlocks, [][]byte{got}))
			if i := bytes.IndexByte(got, 0xAB); i >= 0 {
				t.Fatalf("a device append of owner y finds owner x's rows at byte %d", i)
			}
			check(t, ya.Release())
			check(t, filler.Release())
			for _, w := range ws {
				check(t, w.Release())
			}
		})
	}
}
