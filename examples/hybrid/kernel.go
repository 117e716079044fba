package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/gpustate/gpustate/examples/hybrid/decoder"
	"github.com/gpustate/gpustate/runtime/device"
)

// The attention layers' reads run as a kernel, hybrid_attend, that reads
// the cached keys and values where they live, through the KV cache's block
// tables (a device array of each block's base address per field), the way
// paged attention reads a KV cache. The kernel is written in Go and
// registered for the host backend; it calls attend, as the host path does,
// so both give the same scores to the bit. A backend without it (CUDA:
// there is no PTX of it yet) reads the rows to the host instead.

const attendName = "hybrid_attend"

var registerErr = device.RegisterHostKernel(attendName, attendHost)

// kernel is the backend the decoder runs on and, where the backend can run
// it, the attention kernel loaded there, with a stream and a device buffer
// for its operands: q, k, v, then the output, dim floats each. Without the
// kernel (fn nil), attention reads the rows to the host.
type kernel struct {
	b   device.Backend
	k   device.Kernels
	ss  device.Streams
	mod device.Module
	fn  device.Function
	st  device.Stream
	buf device.Ptr
}

// loadKernel loads hybrid_attend on b; where b cannot run it, the kernel
// it returns attends on the host.
func loadKernel(b device.Backend) (*kernel, error) {
	if registerErr != nil {
		return nil, registerErr
	}
	k, ok := b.(device.Kernels)
	ss, ok2 := b.(device.Streams)
	if !ok || !ok2 || b.Name() != "host" {
		return &kernel{b: b}, nil
	}
	kn := &kernel{b: b, k: k, ss: ss}
	var err error
	if kn.mod, err = k.LoadModule("// " + attendName); err != nil {
		return nil, err
	}
	if kn.fn, err = kn.mod.Function(attendName); err == nil {
		if kn.st, err = ss.NewStream(); err == nil {
			kn.buf, err = b.Alloc(4 * 4 * dim)
		}
	}
	if err != nil {
		return nil, errors.Join(err, kn.Close())
	}
	return kn, nil
}

// attends reports whether attention runs as the kernel.
func (kn *kernel) attends() bool { return kn.fn != nil }

// Close frees the buffer and unloads the module.
func (kn *kernel) Close() error {
	if kn.mod == nil {
		return nil
	}
	var errs []error
	if kn.buf != 0 {
		errs = append(errs, kn.b.Free(kn.buf))
	}
	if kn.st != nil {
		errs = append(errs, kn.st.Close())
	}
	return errors.Join(append(errs, kn.mod.Unload())...)
}

// tables is an attender over the cached rows of one KV cache, through its
// block tables, on the kernel.
type tables struct {
	kn             *kernel
	keys, values   device.Ptr
	perBlock, rows int
}

func (t tables) attend(l int, q, k, v *[dim]float32) ([dim]float32, error) {
	var out [dim]float32
	in := make([]byte, 4*3*dim)
	for i := range dim {
		binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(q[i]))
		binary.LittleEndian.PutUint32(in[4*(dim+i):], math.Float32bits(k[i]))
		binary.LittleEndian.PutUint32(in[4*(2*dim+i):], math.Float32bits(v[i]))
	}
	if err := t.kn.b.CopyHtoD(t.kn.buf, in); err != nil {
		return out, err
	}
	err := t.kn.k.Launch(t.kn.st, t.kn.fn, device.Dim3{X: 1}, device.Dim3{X: 1}, 0,
		t.keys, t.values, uint32(t.perBlock), uint32(t.rows), uint32(l), t.kn.buf)
	if err != nil {
		return out, err
	}
	ev, err := t.kn.ss.Record(t.kn.st)
	if err != nil {
		return out, err
	}
	if err := errors.Join(ev.Wait(), ev.Close()); err != nil {
		return out, err
	}
	res := make([]byte, 4*dim)
	if err := t.kn.b.CopyDtoH(res, t.kn.buf+device.Ptr(4*3*dim)); err != nil {
		return out, err
	}
	for i := range dim {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(res[4*i:]))
	}
	return out, nil
}

// attendHost is hybrid_attend in Go: args are the keys' and values' block
// tables, rows per block, the cached rows, the layer, and the operand
// buffer (q, k, v in; the output after them).
func attendHost(mem device.HostMemory, _, _ device.Dim3, args []any) error {
	keys, values := args[0].(device.Ptr), args[1].(device.Ptr)
	perBlock, rows, layer, buf := int(args[2].(uint32)), int(args[3].(uint32)), int(args[4].(uint32)), args[5].(device.Ptr)
	if perBlock <= 0 || layer >= decoder.AttnLayers {
		return fmt.Errorf("%s: %d rows per block, layer %d", attendName, perBlock, layer)
	}
	ops, err := mem.Bytes(buf, 4*4*dim)
	if err != nil {
		return err
	}
	var q, k, v [dim]float32
	for i := range dim {
		q[i], k[i], v[i] = f32(ops, i), f32(ops, dim+i), f32(ops, 2*dim+i)
	}
	var fault error
	rowOf := func(table device.Ptr) func(j int) []float32 {
		return func(j int) []float32 {
			out := make([]float32, dim)
			entry, err := mem.Bytes(table+device.Ptr(8*(j/perBlock)), 8)
			if err != nil {
				fault = err
				return out
			}
			base := device.Ptr(binary.LittleEndian.Uint64(entry)) + device.Ptr(4*((j%perBlock)*kvw+layer*dim))
			b, err := mem.Bytes(base, 4*dim)
			if err != nil {
				fault = err
				return out
			}
			for i := range out {
				out[i] = f32(b, i)
			}
			return out
		}
	}
	att := attend(&q, &k, &v, rows, rowOf(keys), rowOf(values))
	if fault != nil {
		return fmt.Errorf("%s: %w", attendName, fault)
	}
	for i := range dim {
		binary.LittleEndian.PutUint32(ops[4*(3*dim+i):], math.Float32bits(att[i]))
	}
	return nil
}

func f32(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }
