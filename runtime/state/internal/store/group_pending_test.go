package store

import (
	"bytes"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// feedTokDevice is feedTok with the KV row appended by AppendDevice and
// written through its spans, as a kernel would.
func feedTokDevice(t *testing.T, g *Group, tok uint32) {
	t.Helper()
	h := readRec(t, g.Head(1))
	for i := range h {
		h[i] = h[i]*31 + byte(tok) + byte(i)
	}
	check(t, g.Head(1).Write(0, [][]byte{h}))
	spans := must[[][]device.Span](t)(g.Head(0).AppendDevice(1))
	b := g.Head(0).pool.b
	for c, col := range tokRow(tok) {
		check(t, b.CopyHtoD(spans[c][0].Ptr, col))
	}
}

// TestGroupRegistersKernelWrittenPrefix: a shared member filled by
// AppendDevice registers the group's states, as one filled by Append
// does, once its rows are written (here: at the writer's next call).
func TestGroupRegistersKernelWrittenPrefix(t *testing.T) {
	p := newPool(t, PoolOptions{})
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
	prompt := make([]uint32, 16)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
		feedTokDevice(t, a, prompt[i])
	}
	check(t, a.Head(0).Read(0, 0, [][]byte{nil, nil})) // the writer's next call
	check(t, a.Release())
	b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, groupRecLayout))
	defer b.Release()
	if n := must[int](t)(b.AdoptPrefix(keysOf(prompt))); n != 16 {
		t.Fatalf("adopted %d rows of a prefix a kernel wrote; want 16", n)
	}
	if !bytes.Equal(readRec(t, b.Head(1)), recAfter(prompt)) {
		t.Fatal("the adopted recurrent state is not the state at the prefix")
	}
}

// TestGroupAdoptsIdleKernelWriter: a writer whose kernel wrote its prompt
// on a recorded stream and that then goes idle (no call after its
// RecordStream) is adopted from once the stream's work has completed:
// adoption polls the registrations waiting for kernels.
func TestGroupAdoptsIdleKernelWriter(t *testing.T) {
	b := device.Host()
	p, err := NewPool(b, PoolOptions{})
	check(t, err)
	defer p.Close()
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
	defer a.Release()
	st := must[device.Stream](t)(b.(device.Streams).NewStream())
	defer st.Close()
	check(t, a.Head(0).RecordStream(st))
	fn, open := statetest.HostGate(t, b)
	defer open()
	prompt := make([]uint32, 16)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
		feedTokDevice(t, a, prompt[i])
	}
	// The prefill's kernel, queued on the stream, then recorded: the writer
	// goes idle.
	check(t, b.(device.Kernels).Launch(st, fn, device.Dim3{X: 1}, device.Dim3{X: 1}, 0))
	check(t, a.Head(0).RecordStream(st))
	c := must[*Group](t)(NewSharedGroup(p, "c", "tenant", tokLayout, groupRecLayout))
	defer c.Release()
	if n := must[int](t)(c.AdoptPrefix(keysOf(prompt))); n != 0 {
		t.Fatalf("adopted %d rows while the kernel writing them had not run", n)
	}
	open()
	check(t, st.Sync())
	d := must[*Group](t)(NewSharedGroup(p, "d", "tenant", tokLayout, groupRecLayout))
	defer d.Release()
	if n := must[int](t)(d.AdoptPrefix(keysOf(prompt))); n != 16 {
		t.Fatalf("adopted %d rows of an idle writer's completed prefill; want 16", n)
	}
}

// TestHeadAdoptsIdleKernelWriter: TestGroupAdoptsIdleKernelWriter for a
// single shared head: its kernel-written blocks join the prefix cache
// once their events complete, without another call of the writer.
func TestHeadAdoptsIdleKernelWriter(t *testing.T) {
	b := device.Host()
	p, err := NewPool(b, PoolOptions{})
	check(t, err)
	defer p.Close()
	a := must[*Head](t)(p.NewSharedHead(tokLayout, "a", "tenant"))
	defer a.Release()
	st := must[device.Stream](t)(b.(device.Streams).NewStream())
	defer st.Close()
	check(t, a.RecordStream(st))
	fn, open := statetest.HostGate(t, b)
	defer open()
	prompt := make([]uint32, 16)
	spans := must[[][]device.Span](t)(a.AppendDevice(16))
	for i := range prompt {
		prompt[i] = uint32(i + 1)
		for c, col := range tokRow(prompt[i]) {
			check(t, b.CopyHtoD(spans[c][0].Ptr+device.Ptr(i*len(col)), col))
		}
	}
	check(t, b.(device.Kernels).Launch(st, fn, device.Dim3{X: 1}, device.Dim3{X: 1}, 0))
	check(t, a.RecordStream(st)) // the writer goes idle
	c := must[*Head](t)(p.NewSharedHead(tokLayout, "c", "tenant"))
	defer c.Release()
	if n := must[int](t)(c.AdoptPrefix(keysOf(prompt))); n != 0 {
		t.Fatalf("adopted %d rows while the kernel writing them had not run", n)
	}
	open()
	check(t, st.Sync())
	d := must[*Head](t)(p.NewSharedHead(tokLayout, "d", "tenant"))
	defer d.Release()
	if n := must[int](t)(d.AdoptPrefix(keysOf(prompt))); n != 16 {
		t.Fatalf("adopted %d rows of an idle writer's completed prefill; want 16", n)
	}
}

// streamedGroup returns the host backend's stream rig, a pool on it, a
// shared group of owner a in domain tenant, and a stream, each closed or
// released when the test ends (after its defers, which open held gates).
func streamedGroup(t *testing.T) (*statetest.StreamRig, *Pool, *Group, device.Stream) {
	t.Helper()
	r := statetest.HostStreamRig(t)
	p, err := NewPool(r.Backend, PoolOptions{})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
	t.Cleanup(func() { a.Release() })
	st := must[device.Stream](t)(r.Streams().NewStream())
	t.Cleanup(func() { st.Close() })
	return r, p, a, st
}
