// Package kernels holds the kvcache example's device kernels: prefill,
// which writes key or value rows into a paged cache, and decode, which
// attends from one query over every cached row. Both reach rows through a
// block table, a device array of the base address of each block of one
// field (rows per block fixed), the way paged attention reads a KV cache in
// place.
//
// The kernels are written in CUDA C (kvcache.cu) and compiled to PTX
// (kvcache.ptx, embedded as PTX) by LLVM's NVPTX backend with make ptx; the
// CUDA backend's driver compiles the PTX for the device at run time, so
// nothing here needs the CUDA toolkit. The same kernels in Go are registered
// for the host backend, so one program runs on both.
package kernels

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/gpustate/gpustate/runtime/device"
)

// PTX is kvcache.ptx: the kernels compiled for sm_80 (PTX 7.0), which the
// driver compiles forward for newer devices.
//
//go:embed kvcache.ptx
var PTX string

// The kernels' names, in the PTX and in the host backend's registry.
const (
	PrefillName = "kv_prefill"
	DecodeName  = "kv_decode"
)

// Threads is the thread-block size Set launches with.
const Threads = 128

var registerErr = errors.Join(
	device.RegisterHostKernel(PrefillName, prefillHost),
	device.RegisterHostKernel(DecodeName, decodeHost),
)

// Set is the kernels loaded on one backend.
type Set struct {
	k       device.Kernels
	mod     device.Module
	prefill device.Function
	decode  device.Function
}

// Load loads the kernels on a backend that implements device.Kernels: the
// PTX on CUDA, the Go versions on the host backend.
func Load(b device.Backend) (*Set, error) {
	if registerErr != nil {
		return nil, fmt.Errorf("kernels: %w", registerErr)
	}
	k, ok := b.(device.Kernels)
	if !ok {
		return nil, fmt.Errorf("kernels: the %s backend runs no kernels: %w", b.Name(), errors.ErrUnsupported)
	}
	mod, err := k.LoadModule(PTX)
	if err != nil {
		return nil, fmt.Errorf("kernels: %w", err)
	}
	s := &Set{k: k, mod: mod}
	if s.prefill, err = mod.Function(PrefillName); err == nil {
		s.decode, err = mod.Function(DecodeName)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("kernels: %w", err), mod.Unload())
	}
	return s, nil
}

// Close unloads the module.
func (s *Set) Close() error { return s.mod.Unload() }

// Table is a field's block table as the kernels take it.
type Table struct {
	Ptr          device.Ptr // device array of block base addresses (u64 each)
	RowsPerBlock int
}

// Prefill queues on st a copy of nrows rows of width float32s from src
// (device memory, row-major) to logical rows start.. of the field whose
// block table is t.
func (s *Set) Prefill(st device.Stream, t Table, start, nrows, width int, src device.Ptr) error {
	if t.RowsPerBlock <= 0 || start < 0 || nrows < 0 || width <= 0 {
		return fmt.Errorf("kernels: prefill of %d rows of %d at %d, %d rows per block: bad shape", nrows, width, start, t.RowsPerBlock)
	}
	if nrows == 0 {
		return nil
	}
	blocks := min((nrows*width+Threads-1)/Threads, 1024)
	return s.k.Launch(st, s.prefill, device.Dim3{X: uint32(blocks)}, device.Dim3{X: Threads}, 0,
		t.Ptr, uint32(t.RowsPerBlock), uint64(start), src, uint64(nrows), uint32(width))
}

// DecodeArgs are the operands of one decode step.
type DecodeArgs struct {
	Keys, Values device.Ptr // block tables of the two fields
	RowsPerBlock int
	Rows         int // cached rows to attend over
	Layers, Dim  int
	Query        device.Ptr // Layers*Dim float32s
	Out          device.Ptr // Layers*Dim float32s, written
	Scratch      device.Ptr // Layers*Rows float32s
}

// Decode queues one decode step on st: per layer, softmax of the scaled
// dot products of the query with every cached key, and the weighted sum of
// the values.
func (s *Set) Decode(st device.Stream, a DecodeArgs) error {
	if a.RowsPerBlock <= 0 || a.Rows <= 0 || a.Layers <= 0 || a.Dim <= 0 {
		return fmt.Errorf("kernels: decode over %d rows, %d layers of %d, %d rows per block: bad shape", a.Rows, a.Layers, a.Dim, a.RowsPerBlock)
	}
	scale := float32(1 / math.Sqrt(float64(a.Dim)))
	return s.k.Launch(st, s.decode, device.Dim3{X: uint32(a.Layers)}, device.Dim3{X: Threads}, 0,
		a.Keys, a.Values, uint32(a.RowsPerBlock), uint32(a.Rows), uint32(a.Layers), uint32(a.Dim),
		a.Query, scale, a.Out, a.Scratch)
}

// floats views the n float32s at p.
func floats(mem device.HostMemory, p device.Ptr, n int) ([]byte, error) {
	return mem.Bytes(p, 4*n)
}

func f32(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

func setF32(b []byte, i int, v float32) { binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v)) }

// rowAt returns the width float32s of logical row r through table.
func rowAt(mem device.HostMemory, table device.Ptr, perBlock uint32, r uint64, width uint32) ([]byte, error) {
	entry, err := mem.Bytes(table+device.Ptr(8*(r/uint64(perBlock))), 8)
	if err != nil {
		return nil, fmt.Errorf("block table entry of row %d: %w", r, err)
	}
	base := device.Ptr(binary.LittleEndian.Uint64(entry))
	return floats(mem, base+device.Ptr(4*(r%uint64(perBlock))*uint64(width)), int(width))
}

// prefillHost is kv_prefill in Go.
func prefillHost(mem device.HostMemory, _, _ device.Dim3, args []any) error {
	table, perBlock, start := args[0].(device.Ptr), args[1].(uint32), args[2].(uint64)
	src, nrows, width := args[3].(device.Ptr), args[4].(uint64), args[5].(uint32)
	if perBlock == 0 || width == 0 {
		return errors.New("kv_prefill: zero rows per block or width")
	}
	in, err := floats(mem, src, int(nrows)*int(width))
	if err != nil {
		return fmt.Errorf("kv_prefill source: %w", err)
	}
	for r := range nrows {
		dst, err := rowAt(mem, table, perBlock, start+r, width)
		if err != nil {
			return fmt.Errorf("kv_prefill: %w", err)
		}
		copy(dst, in[4*r*uint64(width):])
	}
	return nil
}

// decodeHost is kv_decode in Go.
func decodeHost(mem device.HostMemory, _, _ device.Dim3, args []any) error {
	keys, values, perBlock := args[0].(device.Ptr), args[1].(device.Ptr), args[2].(uint32)
	nrows, layers, dim := args[3].(uint32), args[4].(uint32), args[5].(uint32)
	qp, scale, op, sp := args[6].(device.Ptr), args[7].(float32), args[8].(device.Ptr), args[9].(device.Ptr)
	if perBlock == 0 {
		return errors.New("kv_decode: zero rows per block")
	}
	width := layers * dim
	q, err := floats(mem, qp, int(width))
	if err != nil {
		return fmt.Errorf("kv_decode query: %w", err)
	}
	out, err := floats(mem, op, int(width))
	if err != nil {
		return fmt.Errorf("kv_decode out: %w", err)
	}
	sc, err := floats(mem, sp, int(layers*nrows))
	if err != nil {
		return fmt.Errorf("kv_decode scratch: %w", err)
	}
	for l := range layers {
		off := l * dim
		m := float32(math.Inf(-1))
		for j := range nrows {
			k, err := rowAt(mem, keys, perBlock, uint64(j), width)
			if err != nil {
				return fmt.Errorf("kv_decode keys: %w", err)
			}
			var s float32
			for d := range dim {
				s += f32(q, int(off+d)) * f32(k, int(off+d))
			}
			s *= scale
			setF32(sc, int(l*nrows+j), s)
			m = max(m, s)
		}
		var sum float32
		for j := range nrows {
			e := float32(math.Exp(float64(f32(sc, int(l*nrows+j)) - m)))
			setF32(sc, int(l*nrows+j), e)
			sum += e
		}
		for d := range dim {
			var a float32
			for j := range nrows {
				v, err := rowAt(mem, values, perBlock, uint64(j), width)
				if err != nil {
					return fmt.Errorf("kv_decode values: %w", err)
				}
				a += f32(sc, int(l*nrows+j)) / sum * f32(v, int(off+d))
			}
			setF32(out, int(off+d), a)
		}
	}
	return nil
}
