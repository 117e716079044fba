package store

import (
	"errors"
	"strings"
	"testing"
)

// TestRowLargerThanBlock: a layout whose row does not fit the pool's
// blocks is refused with an error that matches ErrShape and names the
// field, the row's and the block's sizes, and the remedy; with the block
// size it names, the same layout works.
func TestRowLargerThanBlock(t *testing.T) {
	l := &Layout{Type: "Big", Columns: []Column{{Name: "Small", ElemSize: 4, Width: 1}, {Name: "Wide", ElemSize: 4, Width: 100}}}
	p := newPool(t, PoolOptions{BlockBytes: 256})
	_, err := p.NewHead(l, "s")
	if !errors.Is(err, ErrShape) {
		t.Fatalf("got %v, want an error matching ErrShape", err)
	}
	msg := err.Error()
	for _, want := range []string{"Wide", "Big", "400 bytes", "blocks of 256 bytes", "PoolOptions.BlockBytes", "at least 512"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "batch") {
		t.Errorf("error %q speaks of a batch: there is none", msg)
	}
	if st := p.Stats(); st.Live != 0 || st.ReservedBytes != 0 {
		t.Fatalf("a refused layout changed the pool: %+v", st)
	}
	q := newPool(t, PoolOptions{BlockBytes: 512})
	h := must[*Head](t)(q.NewHead(l, "s"))
	check(t, h.Append([][]byte{make([]byte, 4*3), make([]byte, 400*3)}))
	check(t, h.Release())

	// Rows no block can hold: no remedy of block size, and no overflow.
	for _, c := range []Column{{Name: "Huge", ElemSize: 1 << 20, Width: 2 << 10}, {Name: "Absurd", ElemSize: 1 << 40, Width: 1 << 40}} {
		_, err := p.NewHead(&Layout{Type: "Big", Columns: []Column{c}}, "s")
		if !errors.Is(err, ErrShape) {
			t.Fatalf("%s: got %v, want an error matching ErrShape", c.Name, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, c.Name) || !strings.Contains(msg, "at most 1 GiB") || strings.Contains(msg, "at least") {
			t.Errorf("%s: error %q", c.Name, msg)
		}
	}
}
