package main

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/examples/kvcache/kernels"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// paged runs a second session the way a serving engine does: its prompt is
// staged through page-locked memory and written by the prefill kernel
// through the state's block table, then one decode step's attention runs as
// a kernel on the same stream, reading a snapshot's rows in place through
// the snapshot's block tables. The session and the snapshot are released
// while that kernel is still queued: the pool holds their blocks as pending
// until the stream's event says the kernel is done.
func paged(w io.Writer, b device.Backend, p *state.Pool, prompt []int32) (err error) {
	ks, err := kernels.Load(b)
	if errors.Is(err, errors.ErrUnsupported) {
		fmt.Fprintf(w, "paged decode: the %s backend runs no kernels; skipped\n", b.Name())
		return nil
	}
	if err != nil {
		return err
	}
	defer ks.Close()
	sb := b.(device.Streams) // a backend with kernels has streams
	st, err := sb.NewStream()
	if err != nil {
		return err
	}
	defer st.Close()
	e := &engine{b: b, sb: sb, ks: ks, st: st}
	defer func() {
		// The stream may still use the scratch memory when a call failed.
		err = errors.Join(err, st.Sync(), e.scratch.free(b, sb))
	}()
	s, err := cache.NewKVCacheState(p, "session-2")
	if err != nil {
		return err
	}
	defer s.Release()
	table, err := e.prefill(s, prompt)
	if err != nil {
		return err
	}
	defer table.Release()
	snap, err := s.Snapshot()
	if err != nil {
		return err
	}
	defer snap.Release()
	out, perBlock, kev, ev, err := e.decode(snap, prompt)
	if err != nil {
		return err
	}
	defer kev.Close()
	defer ev.Close()
	// Released with the kernel queued: nothing waits here. The pending
	// bytes are read before the kernel's event is asked, so when the
	// kernel is not done, they are all the blocks it still reads.
	if err := errors.Join(snap.Release(), table.Release(), s.Release()); err != nil {
		return err
	}
	pending := p.Stats().PendingBytes
	done, _ := kev.Done()
	fmt.Fprintf(w, "paged decode (%s kernels): prefill wrote %d rows through the state's block table (%d rows a block); decode attends over them through the snapshot's tables\n",
		kernelKind(b), len(prompt), perBlock)
	return report(w, p, ev, done, pending, out, prompt)
}

// engine is what one paged session runs with.
type engine struct {
	b       device.Backend
	sb      device.Streams
	ks      *kernels.Set
	st      device.Stream
	scratch scratchMem
}

// prefill appends the prompt's rows to s: tokens copied into the spans,
// keys and values staged through page-locked memory and written by the
// prefill kernel through s's block table, which it returns.
func (e *engine) prefill(s *cache.KVCacheState, prompt []int32) (*state.BlockTable, error) {
	spans, err := s.AppendDevice(len(prompt)) // rows reserved; the kernels fill keys and values
	if err != nil {
		return nil, err
	}
	r := rows(prompt, 0)
	tok := state.Bytes(r.Token)
	for _, sp := range spans.Token {
		if err := e.b.CopyHtoD(sp.Ptr, tok[:4*sp.Rows]); err != nil {
			return nil, err
		}
		tok = tok[4*sp.Rows:]
	}
	table, err := s.BlockTable()
	if err != nil {
		return nil, err
	}
	for col, src := range [][]float32{r.Keys, r.Values} {
		staged, err := e.scratch.stage(e.b, e.sb, e.st, state.Bytes(src))
		if err == nil {
			var tc state.TableColumn
			if tc, err = table.Column(col); err == nil {
				err = e.ks.Prefill(e.st, kernels.Table{Ptr: tc.Ptr, RowsPerBlock: tc.RowsPerBlock}, 0, len(prompt), width, staged)
			}
		}
		if err != nil {
			return nil, errors.Join(err, table.Release())
		}
	}
	if err := s.RecordStream(e.st); err != nil {
		return nil, errors.Join(err, table.Release())
	}
	return table, nil
}

// decode queues one decode step over snap through its block tables and
// the copy of its result to page-locked memory. It records kev right
// after the kernel, before snap's fence, and ev after the copy.
func (e *engine) decode(snap *cache.KVCacheSnapshot, prompt []int32) (out []byte, perBlock int, kev, ev device.Event, err error) {
	n := len(prompt)
	stab, err := snap.BlockTable()
	if err != nil {
		return nil, 0, nil, nil, err
	}
	defer stab.Release()
	kc, err := stab.Column(0)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	vc, err := stab.Column(1)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	qp, err := e.scratch.stage(e.b, e.sb, e.st, state.Bytes(query(prompt[n-1])))
	if err != nil {
		return nil, 0, nil, nil, err
	}
	outp, err := e.scratch.alloc(e.b, 4*width)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	sc, err := e.scratch.alloc(e.b, 4*cache.Layers*n)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	err = e.ks.Decode(e.st, kernels.DecodeArgs{Keys: kc.Ptr, Values: vc.Ptr, RowsPerBlock: kc.RowsPerBlock,
		Rows: n, Layers: cache.Layers, Dim: cache.Dim, Query: qp, Out: outp, Scratch: sc})
	if err != nil {
		return nil, 0, nil, nil, err
	}
	if kev, err = e.sb.Record(e.st); err != nil {
		return nil, 0, nil, nil, err
	}
	defer func() {
		if err != nil {
			kev.Close()
		}
	}()
	if err := snap.RecordStream(e.st); err != nil {
		return nil, 0, nil, nil, err
	}
	if out, err = e.scratch.host(e.sb, 4*width); err != nil {
		return nil, 0, nil, nil, err
	}
	if err := e.sb.CopyDtoHAsync(e.st, out, outp); err != nil {
		return nil, 0, nil, nil, err
	}
	if ev, err = e.sb.Record(e.st); err != nil {
		return nil, 0, nil, nil, err
	}
	return out, kc.RowsPerBlock, kev, ev, nil
}

// report shows the pool's pending bytes read after the release, and
// again after the event; it checks the kernel's attention against the
// host's. On a loaded machine the kernel can finish before the release.
func report(w io.Writer, p *state.Pool, ev device.Event, done bool, pending int64, out []byte, prompt []int32) error {
	if done {
		fmt.Fprintf(w, "  session and snapshot released; the kernel finished first: %s pending\n", size(pending))
	} else {
		fmt.Fprintf(w, "  session and snapshot released with the kernel in flight: %s of blocks pending, neither reused nor zeroed\n", size(pending))
	}
	if err := ev.Wait(); err != nil {
		return err
	}
	p.WaitPending()
	n := len(prompt)
	diff := maxDiff(floats(out), attend(rows(prompt, 0), n, query(prompt[n-1])))
	fmt.Fprintf(w, "  kernel done: pending bytes back to %s; its attention matches the host's (max |diff| %.1e)\n",
		size(p.Stats().PendingBytes), diff)
	if diff > 1e-3 {
		return fmt.Errorf("paged decode: the kernel's attention differs from the host's by %g", diff)
	}
	return nil
}

func kernelKind(b device.Backend) string {
	if b.Name() == "host" {
		return "Go"
	}
	return "PTX"
}

// query is the decode step's query for the last token, per layer.
func query(last int32) []float32 {
	q := make([]float32, width)
	for i := range q {
		q[i] = weight(kindQuery, uint64(last), uint64(i), 0)
	}
	return q
}

// attend is the attention the decode kernel computes, on the host.
func attend(r cache.KVCache, n int, q []float32) []float32 {
	out := make([]float32, width)
	scale := 1 / math.Sqrt(cache.Dim)
	for l := range cache.Layers {
		off := l * cache.Dim
		sc := make([]float64, n)
		m := math.Inf(-1)
		for j := range n {
			for d := range cache.Dim {
				sc[j] += float64(q[off+d]) * float64(r.Keys[j*width+off+d])
			}
			sc[j] *= scale
			m = math.Max(m, sc[j])
		}
		var sum float64
		for j := range sc {
			sc[j] = math.Exp(sc[j] - m)
			sum += sc[j]
		}
		for d := range cache.Dim {
			var a float64
			for j := range n {
				a += sc[j] / sum * float64(r.Values[j*width+off+d])
			}
			out[off+d] = float32(a)
		}
	}
	return out
}

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return out
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// scratchMem is the device and page-locked memory one paged step uses
// beside the pool's: freed once the stream is done with it.
type scratchMem struct {
	dev  []device.Ptr
	pins [][]byte
}

func (m *scratchMem) alloc(b device.Backend, n int) (device.Ptr, error) {
	ptr, err := b.Alloc(n)
	if err == nil {
		m.dev = append(m.dev, ptr)
	}
	return ptr, err
}

func (m *scratchMem) host(sb device.Streams, n int) ([]byte, error) {
	buf, err := sb.HostAlloc(n)
	if err == nil {
		m.pins = append(m.pins, buf)
	}
	return buf, err
}

// stage copies src to a new device buffer on st, through page-locked
// memory, and returns the buffer.
func (m *scratchMem) stage(b device.Backend, sb device.Streams, st device.Stream, src []byte) (device.Ptr, error) {
	pin, err := m.host(sb, len(src))
	if err != nil {
		return 0, err
	}
	copy(pin, src)
	dst, err := m.alloc(b, len(src))
	if err != nil {
		return 0, err
	}
	return dst, sb.CopyHtoDAsync(st, dst, pin)
}

// free gives the memory back; the stream that used it is synchronized.
func (m *scratchMem) free(b device.Backend, sb device.Streams) error {
	var errs []error
	for _, p := range m.dev {
		errs = append(errs, b.Free(p))
	}
	for _, buf := range m.pins {
		errs = append(errs, sb.HostFree(buf))
	}
	return errors.Join(errs...)
}
