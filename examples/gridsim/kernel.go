package main

import (
	"fmt"

	"github.com/gpustate/gpustate/examples/gridsim/field"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

const (
	side     = field.Side
	cells    = side * side
	rowBytes = side * 4 // one grid row of float32 cells
	// alpha is the diffusion number of the explicit scheme (stable below
	// 0.25).
	alpha = 0.2
	// heat is the temperature the heater holds its cell at.
	heat = 100
)

// heater returns the cell the heater sits on during step t: it walks a
// square loop around the middle of the grid, one cell per step.
func heater(t int) (x, y int) {
	const lo, n = side / 4, side / 2 // the loop's corner and side
	k := t % (4 * n)
	switch {
	case k < n:
		return lo + k, lo
	case k < 2*n:
		return lo + n, lo + k - n
	case k < 3*n:
		return lo + n - (k - 2*n), lo + n
	default:
		return lo, lo + n - (k - 3*n)
	}
}

// stepCells computes step t of the simulation: next is cur after one
// explicit diffusion step with insulated edges, with the heater's cell
// held at heat. The kernel and the recomputation from scratch both call
// it, so they agree bit for bit.
func stepCells(next, cur []float32, t int) {
	at := func(x, y int) float32 {
		x = min(max(x, 0), side-1)
		y = min(max(y, 0), side-1)
		return cur[y*side+x]
	}
	for y := range side {
		for x := range side {
			c := cur[y*side+x]
			lap := at(x-1, y) + at(x+1, y) + at(x, y-1) + at(x, y+1) - 4*c
			next[y*side+x] = c + alpha*lap
		}
	}
	hx, hy := heater(t)
	next[hy*side+hx] = heat
}

// diffuse stands in for the simulation kernel: it reads the field where
// it lives, through the spans, computes step t, and writes the result back
// in place, as a CUDA kernel launched on the spans would.
//
//state:writes spans
func diffuse(b device.Backend, spans []device.Span, t int) error {
	cur := make([]float32, cells)
	buf := state.Bytes(cur)
	if err := eachSpan(spans, len(buf), func(sp device.Span, off, n int) error {
		return b.CopyDtoH(buf[off:off+n], sp.Ptr)
	}); err != nil {
		return err
	}
	next := make([]float32, cells)
	stepCells(next, cur, t)
	out := state.Bytes(next)
	if err := eachSpan(spans, len(out), func(sp device.Span, off, n int) error {
		return b.CopyHtoD(sp.Ptr, out[off:off+n])
	}); err != nil {
		return err
	}
	return b.Sync()
}

// eachSpan calls f for each span with the offset and length of its rows in
// a buffer of total bytes, which the spans must cover exactly.
func eachSpan(spans []device.Span, total int, f func(sp device.Span, off, n int) error) error {
	off := 0
	for _, sp := range spans {
		n := sp.Rows * rowBytes
		if off+n > total {
			return fmt.Errorf("diffuse: spans hold more than the %d bytes of the field", total)
		}
		if err := f(sp, off, n); err != nil {
			return err
		}
		off += n
	}
	if off != total {
		return fmt.Errorf("diffuse: spans hold %d bytes, the field %d", off, total)
	}
	return nil
}

// step launches the kernel for step t on the head: WriteDevice makes the
// new version and hands out the rows to write in place.
func step(b device.Backend, s *field.FieldState, t int) error {
	spans, err := s.WriteDevice(0, side)
	if err != nil {
		return err
	}
	return diffuse(b, spans.Cells, t)
}

// recompute runs steps 1..t from a cold field on the host, the reference a
// reconstructed version must equal.
func recompute(t int) []float32 {
	cur, next := make([]float32, cells), make([]float32, cells)
	for i := 1; i <= t; i++ {
		stepCells(next, cur, i)
		cur, next = next, cur
	}
	return cur
}
