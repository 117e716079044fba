package store

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestStepInputIsTheLayoutsAtCreation: a head keeps the Input of its
// layout as it was at NewHead (Layout.clone), as it keeps its columns.
func TestStepInputIsTheLayoutsAtCreation(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := recLayout(4, 2, Invalidate)
	l.Input = []Column{{Name: "X", ElemSize: 4, Width: 2}}
	h := must[*Head](t)(p.NewHead(l, "me"))
	defer h.Release()
	f := func([][]device.Span, [][]byte) error { return nil }
	check(t, h.Step([][]byte{make([]byte, 8)}, false, f))
	l.Input[0].ElemSize = 3 // the caller's Layout, changed after NewHead
	if err := h.Step([][]byte{make([]byte, 8)}, false, f); err != nil {
		t.Errorf("a well-shaped input (per the layout the head was made with) answered %v after the caller changed its Layout", err)
	}
}

// TestStepInputColumnsAreChecked: a layout whose Input column has a
// non-positive size is refused with ErrShape, as one of its columns is.
func TestStepInputColumnsAreChecked(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := recLayout(4, 2, Invalidate)
	l.Input = []Column{{Name: "X", ElemSize: 0, Width: 2}}
	h, err := p.NewHead(l, "me")
	if err == nil {
		defer h.Release()
		t.Errorf("a layout with an input column of element size 0 was accepted")
	}
	if !errors.Is(err, ErrShape) && err != nil {
		t.Errorf("answered %v", err)
	}
}
