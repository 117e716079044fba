package store

import (
	"bytes"
	"testing"

	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Copies that span neighbouring blocks stop at the end of a slab, even
// when the next slab's first block follows it in memory.
func TestCopiesStayInSlabs(t *testing.T) {
	a := statetest.NewArena(8 << 20)
	p, err := NewPool(a, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	l := &Layout{Type: "Row", Columns: []Column{{Name: "A", ElemSize: 8, Width: 4}}}
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	// Three slabs' worth, in uneven batches, so that copies cross slabs.
	var want []byte
	for i := 0; p.Stats().Slabs < 3; i++ {
		batch := bytes.Repeat([]byte{byte(i)}, 32*(1+i%300))
		check(t, h.Append([][]byte{batch}))
		want = append(want, batch...)
	}
	got := [][]byte{make([]byte, len(want))}
	check(t, h.Read(0, h.Len(), got))
	if !bytes.Equal(got[0], want) {
		t.Fatal("rows read across slabs differ")
	}
}
