package store

import (
	"bytes"
	"errors"
	"testing"
)

// rbCols is a three-column layout whose columns hold 16, 8 and 4 rows
// a 256-byte block: a read lies in one block of one column and in two of
// another.
func rbCols(window int, ret Retention) *Layout {
	return &Layout{
		Type: "Three",
		Columns: []Column{
			{Name: "A", ElemSize: 16, Width: 1},
			{Name: "B", ElemSize: 8, Width: 4},
			{Name: "C", ElemSize: 64, Width: 1},
		},
		Growth:    Append,
		Window:    window,
		Retention: ret,
	}
}

func rbColRows(n, seed int) [][]byte {
	out := [][]byte{make([]byte, n*16), make([]byte, n*32), make([]byte, n*64)}
	for c, col := range out {
		for i := range col {
			col[i] = byte(seed + i*3 + c*101)
		}
	}
	return out
}

var rbRowBytes = []int{16, 32, 64}

// rbCheckReads reads every range [from, to) of x within [lo, n) with
// Read and with ReadColumns under every mask of nil columns, and compares
// with model.
func rbCheckReads(t *testing.T, x interface {
	Read(from, to int, dst [][]byte) error
	ReadColumns(from, to int, dst [][]byte) error
}, model [][]byte, lo, n int) {
	t.Helper()
	for from := lo; from < n; from++ {
		for to := from + 1; to <= n && to <= from+10; to++ {
			for mask := 0; mask < 8; mask++ {
				dst := make([][]byte, 3)
				for c := range dst {
					if mask&(1<<c) == 0 {
						dst[c] = bytes.Repeat([]byte{0xEE}, (to-from)*rbRowBytes[c])
					}
				}
				var err error
				if mask == 0 {
					err = x.Read(from, to, dst)
				} else {
					err = x.ReadColumns(from, to, dst)
				}
				if err != nil {
					t.Fatalf("[%d,%d) mask %b: %v", from, to, mask, err)
				}
				for c, d := range dst {
					if d == nil {
						continue
					}
					rb := rbRowBytes[c]
					if !bytes.Equal(d, model[c][from*rb:to*rb]) {
						t.Fatalf("[%d,%d) mask %b: column %d differs", from, to, mask, c)
					}
				}
			}
		}
	}
}

// TestReadInBlocks: reads of a row or a few, within one block of
// every column or not, of heads, snapshots and a head back from the
// tier, with and without nil columns, read the rows; expired rows and
// wrong destinations are errors, never a panic.
func TestReadInBlocks(t *testing.T) {
	p := tierPool(t, 64, 64<<10)
	h := headOf(t, p, rbCols(0, Optional), "a")
	model := rbColRows(37, 1)
	check(t, h.Append(rbColRows(5, 1)))
	// The rows in batches, so that some blocks are written in place.
	cols := func(from, to int) [][]byte {
		return [][]byte{model[0][from*16 : to*16], model[1][from*32 : to*32], model[2][from*64 : to*64]}
	}
	check(t, h.Append(cols(5, 6)))
	check(t, h.Append(cols(6, 20)))
	check(t, h.Append(cols(20, 37)))
	// the first five rows were rbColRows(5, 1), which equal model's.
	rbCheckReads(t, h, model, 0, 37)
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	rbCheckReads(t, s, model, 0, 37)

	// In the tier: a read of one row brings it back.
	if _, moved, err := (tierHead{h}).moveOut(); !moved && err == nil {
		// The snapshot shares every block: release it and retry.
		s.Release()
		if _, moved, err = (tierHead{h}).moveOut(); !moved || err != nil {
			t.Fatalf("move out: %v, %v", moved, err)
		}
	}
	if h.tier == nil {
		t.Fatal("not in the tier")
	}
	one := [][]byte{nil, make([]byte, 32), nil}
	check(t, h.ReadColumns(17, 18, one))
	if !bytes.Equal(one[1], model[1][17*32:18*32]) {
		t.Fatal("a row read from the tier differs")
	}
	rbCheckReads(t, h, model, 0, 37)

	// Wrong destinations: errors, never a panic.
	for _, dst := range [][][]byte{
		{make([]byte, 16), make([]byte, 31), make([]byte, 64)},
		{make([]byte, 15), make([]byte, 32), make([]byte, 64)},
		{make([]byte, 16), make([]byte, 32)},
		{make([]byte, 16), make([]byte, 32), make([]byte, 64), make([]byte, 8)},
		{nil, make([]byte, 32), make([]byte, 64)},
		{make([]byte, 32), make([]byte, 64), make([]byte, 128)},
	} {
		if err := h.Read(3, 4, dst); !errors.Is(err, ErrShape) {
			t.Errorf("Read of one row into %d columns %v: %v, want ErrShape", len(dst), lens(dst), err)
		}
	}
	for _, dst := range [][][]byte{
		{nil, make([]byte, 31), nil},
		{nil, nil, make([]byte, 65)},
		{nil, nil},
		{nil, nil, nil, nil},
	} {
		if err := h.ReadColumns(3, 4, dst); !errors.Is(err, ErrShape) {
			t.Errorf("ReadColumns of one row into %v: %v, want ErrShape", lens(dst), err)
		}
	}
	if err := h.ReadColumns(3, 4, [][]byte{nil, nil, nil}); err != nil {
		t.Errorf("ReadColumns with every column nil: %v", err)
	}
	for _, r := range [][2]int{{36, 38}, {37, 38}, {-1, 0}, {4, 3}} {
		dst := [][]byte{make([]byte, max(r[1]-r[0], 0)*16), make([]byte, max(r[1]-r[0], 0)*32), make([]byte, max(r[1]-r[0], 0)*64)}
		if err := h.Read(r[0], r[1], dst); err == nil {
			t.Errorf("Read [%d,%d) of 37 rows answered nil", r[0], r[1])
		}
	}
	checkInv(t, p)
}

func lens(dst [][]byte) []int {
	var n []int
	for _, d := range dst {
		n = append(n, len(d))
	}
	return n
}

// TestReadInBlocksWindow: a window state's reads of rows within one
// block read them, expired rows answer ErrExpired, whatever the nil
// columns.
func TestReadInBlocksWindow(t *testing.T) {
	p := tierPool(t, 64, 64<<10)
	h := headOf(t, p, rbCols(9, Mandatory), "w")
	model := rbColRows(40, 7)
	for at := 0; at < 40; at += 3 {
		end := min(at+3, 40)
		check(t, h.Append([][]byte{model[0][at*16 : end*16], model[1][at*32 : end*32], model[2][at*64 : end*64]}))
	}
	lo := h.Oldest()
	if lo != 31 {
		t.Fatalf("oldest %d, want 31", lo)
	}
	rbCheckReads(t, h, model, lo, 40)
	for _, r := range [][2]int{{30, 31}, {29, 32}, {0, 1}} {
		n := r[1] - r[0]
		if err := h.ReadColumns(r[0], r[1], [][]byte{nil, make([]byte, n*32), nil}); !errors.Is(err, ErrExpired) {
			t.Errorf("ReadColumns of [%d,%d) below the window: %v, want ErrExpired", r[0], r[1], err)
		}
		if err := h.Read(r[0], r[1], [][]byte{make([]byte, n*16), make([]byte, n*32), make([]byte, n*64)}); !errors.Is(err, ErrExpired) {
			t.Errorf("Read of [%d,%d) below the window: %v, want ErrExpired", r[0], r[1], err)
		}
	}
	checkInv(t, p)
}
