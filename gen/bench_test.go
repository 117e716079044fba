package gen

import (
	"testing"

	"github.com/gpustate/gpustate/gen/testdata/src/grid"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/stateimpl"
)

// The generated handles are meant to add nothing but names: these
// benchmarks run the same writes and reads through grid.FieldState and
// through the store's Head with the same layout, side by side.

const benchRows = 16

func benchPool(b *testing.B) *state.Pool {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

// fieldLayout is grid.Field's layout, as stategen declares it.
var fieldLayout = stateimpl.Layout{
	Type:    "Field",
	Columns: []stateimpl.Column{{Name: "Cells", ElemSize: 8, Width: 4}},
	Growth:  stateimpl.Mutable,
	Bound:   4096,
}

func BenchmarkWrite(b *testing.B) {
	cells := make([]float64, 4*benchRows)
	b.Run("generated", func(b *testing.B) {
		s, err := grid.NewFieldState(benchPool(b), "bench")
		if err != nil {
			b.Fatal(err)
		}
		defer s.Release()
		for i := 0; b.Loop(); i++ {
			if err := s.Write(i*benchRows%4096, grid.Field{Cells: cells}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("head", func(b *testing.B) {
		h, err := stateimpl.NewHead(benchPool(b), &fieldLayout, "bench")
		if err != nil {
			b.Fatal(err)
		}
		defer h.Release()
		for i := 0; b.Loop(); i++ {
			if err := h.Write(i*benchRows%4096, [][]byte{state.Bytes(cells)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRead(b *testing.B) {
	b.Run("generated", func(b *testing.B) {
		s, err := grid.NewFieldState(benchPool(b), "bench")
		if err != nil {
			b.Fatal(err)
		}
		defer s.Release()
		for b.Loop() {
			if _, err := s.Read(0, benchRows); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("head", func(b *testing.B) {
		h, err := stateimpl.NewHead(benchPool(b), &fieldLayout, "bench")
		if err != nil {
			b.Fatal(err)
		}
		defer h.Release()
		for b.Loop() {
			cells := make([]float64, 4*benchRows)
			if err := h.Read(0, benchRows, [][]byte{state.Bytes(cells)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
