package device

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// fillKernel is the name of a kernel that sets n bytes at dst to value:
// Go on the host backend, a built-in body in the fake CUDA driver.
const fillKernel = "gpustate_fake_fill"

func init() {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(RegisterHostKernel(fillKernel, func(mem HostMemory, _, _ Dim3, args []any) error {
		dst, value, n := args[0].(Ptr), args[1].(uint32), args[2].(uint64)
		b, err := mem.Bytes(dst, int(n))
		if err != nil {
			return err
		}
		fill(b, byte(value))
		return nil
	}))
}

// asyncRig is a backend with streams and kernels, and a way to hold a
// stream's queued work back until the test lets it go.
type asyncRig struct {
	b       Backend
	s       Streams
	k       Kernels
	fill    Function
	hold    func(t *testing.T, st Stream) // queue nothing runs past until release
	release func()
}

const testPTX = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry gpustate_fake_fill(\n.param .u64 a, .param .u32 b, .param .u64 c)\n{ ret; }\n"

func newRig(t *testing.T, b Backend, hold func(t *testing.T, st Stream), release func()) *asyncRig {
	t.Helper()
	r := &asyncRig{b: b, hold: hold, release: release}
	var ok bool
	if r.s, ok = b.(Streams); !ok {
		t.Fatalf("%s backend does not implement Streams", b.Name())
	}
	if r.k, ok = b.(Kernels); !ok {
		t.Fatalf("%s backend does not implement Kernels", b.Name())
	}
	m, err := r.k.LoadModule(testPTX)
	if err != nil {
		t.Fatalf("LoadModule: %v", err)
	}
	t.Cleanup(func() { m.Unload() })
	if r.fill, err = m.Function(fillKernel); err != nil {
		t.Fatalf("Function(%s): %v", fillKernel, err)
	}
	return r
}

func hostRig(t *testing.T) *asyncRig {
	h := Host()
	var gate *hostEvent
	// The hold is an event only the test completes: a stream waiting for
	// it holds no memory, so Free does not wait for the hold.
	hold := func(t *testing.T, st Stream) {
		gate = &hostEvent{s: st.(*hostStream)}
		if err := h.(Streams).WaitEvent(st, gate); err != nil {
			t.Fatalf("holding the stream: %v", err)
		}
	}
	release := func() { gate.complete(nil) }
	return newRig(t, h, hold, release)
}

// testAsync runs the stream and kernel checks on the backend rig makes.
func testAsync(t *testing.T, rig func(t *testing.T) *asyncRig) {
	t.Run("OrderAndEvents", func(t *testing.T) {
		r := rig(t)
		defer r.b.Close()
		st, err := r.s.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		const n = 4096
		p, err := r.b.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		src, err := r.s.HostAlloc(n)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.s.HostAlloc(n)
		if err != nil {
			t.Fatal(err)
		}
		defer r.s.HostFree(src)
		defer r.s.HostFree(out)
		fill(src, 1)
		clear(out)
		r.hold(t, st)
		if err := r.s.CopyHtoDAsync(st, p, src); err != nil {
			t.Fatal(err)
		}
		if err := r.k.Launch(st, r.fill, Dim3{X: 1}, Dim3{X: 128}, 0, p, uint32(7), uint64(n/2)); err != nil {
			t.Fatal(err)
		}
		if err := r.s.CopyDtoHAsync(st, out, p); err != nil {
			t.Fatal(err)
		}
		ev, err := r.s.Record(st)
		if err != nil {
			t.Fatal(err)
		}
		defer ev.Close()
		if done, err := ev.Done(); done || err != nil {
			t.Fatalf("Done() before the queued work ran = %v, %v; want false, nil", done, err)
		}
		if !bytes.Equal(out, make([]byte, n)) {
			t.Fatal("the copy back ran before the stream was let go")
		}
		r.release()
		if err := ev.Wait(); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if done, err := ev.Done(); !done || err != nil {
			t.Fatalf("Done() after Wait = %v, %v; want true, nil", done, err)
		}
		want := append(bytes.Repeat([]byte{7}, n/2), bytes.Repeat([]byte{1}, n/2)...)
		if !bytes.Equal(out, want) {
			t.Fatalf("copy, fill, copy back ran out of order: got %v... %v", out[:4], out[n-4:])
		}
		if err := st.Sync(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("DeviceCopy", func(t *testing.T) {
		r := rig(t)
		defer r.b.Close()
		sc, ok := r.b.(StreamCopier)
		if !ok {
			t.Fatalf("%s backend does not implement StreamCopier", r.b.Name())
		}
		st, err := r.s.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		const n = 1024
		p, err := r.b.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		q, err := r.b.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.CopyDtoDAsync(st, q, p+1, n); err == nil {
			t.Fatal("CopyDtoDAsync from past an allocation's end succeeded")
		}
		if err := sc.CopyDtoDAsync(st, q+1, p, n); err == nil {
			t.Fatal("CopyDtoDAsync to past an allocation's end succeeded")
		}
		r.hold(t, st)
		if err := r.k.Launch(st, r.fill, Dim3{X: 1}, Dim3{X: 128}, 0, p, uint32(9), uint64(n/2)); err != nil {
			t.Fatal(err)
		}
		if err := sc.CopyDtoDAsync(st, q, p, n); err != nil {
			t.Fatal(err)
		}
		ev, err := r.s.Record(st)
		if err != nil {
			t.Fatal(err)
		}
		defer ev.Close()
		got := make([]byte, n)
		if err := r.b.CopyDtoH(got, q); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, make([]byte, n)) {
			t.Fatal("the device copy ran before the stream was let go")
		}
		r.release()
		if err := ev.Wait(); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if err := r.b.CopyDtoH(got, q); err != nil {
			t.Fatal(err)
		}
		if want := append(bytes.Repeat([]byte{9}, n/2), make([]byte, n/2)...); !bytes.Equal(got, want) {
			t.Fatalf("the device copy did not see the kernel before it: got %v... %v", got[:4], got[n-4:])
		}
	})
	t.Run("CrossStreamWait", func(t *testing.T) {
		r := rig(t)
		defer r.b.Close()
		a, err := r.s.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := r.s.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		const n = 256
		p, _ := r.b.Alloc(n)
		out, _ := r.s.HostAlloc(n)
		defer r.s.HostFree(out)
		clear(out)
		r.hold(t, a)
		if err := r.k.Launch(a, r.fill, Dim3{}, Dim3{}, 0, p, uint32(9), uint64(n)); err != nil {
			t.Fatal(err)
		}
		ea, err := r.s.Record(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.s.WaitEvent(b, ea); err != nil {
			t.Fatal(err)
		}
		if err := r.s.CopyDtoHAsync(b, out, p); err != nil {
			t.Fatal(err)
		}
		eb, err := r.s.Record(b)
		if err != nil {
			t.Fatal(err)
		}
		if done, _ := eb.Done(); done {
			t.Fatal("the waiting stream completed before the event it waits for")
		}
		r.release()
		if err := eb.Wait(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, bytes.Repeat([]byte{9}, n)) {
			t.Fatalf("the second stream read before the first one's kernel: %v", out[:4])
		}
		ea.Close()
		eb.Close()
	})
	t.Run("Errors", func(t *testing.T) {
		r := rig(t)
		defer r.b.Close()
		st, err := r.s.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		p, _ := r.b.Alloc(64)
		buf := make([]byte, 128)
		if err := r.s.CopyHtoDAsync(st, p, buf); !errors.Is(err, ErrInvalidPtr) {
			t.Errorf("async copy past the allocation: %v; want ErrInvalidPtr", err)
		}
		if err := r.k.Launch(st, r.fill, Dim3{}, Dim3{}, 0, p, "seven"); !errors.Is(err, ErrKernelArg) {
			t.Errorf("launch with a string argument: %v; want ErrKernelArg", err)
		}
		m, _ := r.k.LoadModule(testPTX)
		if _, err := m.Function("no_such_kernel"); !errors.Is(err, ErrNoKernel) {
			t.Errorf("Function of an unknown name: %v; want ErrNoKernel", err)
		}
		other := Host()
		defer other.Close()
		ost, _ := other.(Streams).NewStream()
		if err := r.s.CopyHtoDAsync(ost, p, buf[:8]); !errors.Is(err, ErrStreamClosed) {
			t.Errorf("a stream of another backend: %v; want ErrStreamClosed", err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := r.s.Record(st); !errors.Is(err, ErrStreamClosed) {
			t.Errorf("Record on a closed stream: %v; want ErrStreamClosed", err)
		}
	})
	t.Run("UseAfterFree", func(t *testing.T) {
		// Memory freed while a kernel that writes it is queued: the
		// stream fails, and the event says so.
		r := rig(t)
		defer r.b.Close()
		st, _ := r.s.NewStream()
		defer st.Close()
		p, _ := r.b.Alloc(64)
		r.hold(t, st)
		if err := r.k.Launch(st, r.fill, Dim3{}, Dim3{}, 0, p, uint32(1), uint64(64)); err != nil {
			t.Fatal(err)
		}
		ev, err := r.s.Record(st)
		if err != nil {
			t.Fatal(err)
		}
		defer ev.Close()
		if err := r.b.Free(p); err != nil {
			t.Fatal(err)
		}
		r.release()
		err = ev.Wait()
		var ce *CUDAError
		if !errors.Is(err, ErrInvalidPtr) && !(errors.As(err, &ce) && ce.Name == "CUDA_ERROR_ILLEGAL_ADDRESS") {
			t.Errorf("event after a kernel met freed memory: %v; want ErrInvalidPtr or CUDA_ERROR_ILLEGAL_ADDRESS", err)
		}
		if err := st.Sync(); err == nil {
			t.Error("Sync of a failed stream answered nil")
		}
	})
	t.Run("KernelArgsLayout", func(t *testing.T) {
		buf, offs, err := packArgOffsets([]any{uint32(1), Ptr(2), float32(1), int64(-1)})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(offs) != "[0 8 16 24]" || len(buf) != 32 || binary.LittleEndian.Uint64(buf[8:]) != 2 {
			t.Errorf("packed at %v, %d bytes", offs, len(buf))
		}
	})
}

func TestHostAsync(t *testing.T) {
	before := runtime.NumGoroutine()
	testAsync(t, hostRig)
	// Every stream's goroutine is gone once the streams and backends closed.
	for i := 0; i < 100 && runtime.NumGoroutine() > before; i++ {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the streams closed, %d before", n, before)
	}
}

func TestHostCloseClosesStreams(t *testing.T) {
	h := Host()
	st, err := h.(Streams).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.(Streams).Record(st); !errors.Is(err, ErrStreamClosed) {
		t.Errorf("Record after the backend closed: %v; want ErrStreamClosed", err)
	}
	if err := RegisterHostKernel(fillKernel, func(HostMemory, Dim3, Dim3, []any) error { return nil }); err == nil {
		t.Error("registering a kernel name twice answered nil")
	}
}

// TestHostKernelBadArgs: a Go kernel given arguments of the wrong types
// fails its stream with ErrKernelArg instead of crashing the process.
func TestHostKernelBadArgs(t *testing.T) {
	r := hostRig(t)
	defer r.b.Close()
	st, _ := r.s.NewStream()
	defer st.Close()
	if err := r.k.Launch(st, r.fill, Dim3{}, Dim3{}, 0, uint32(1)); err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(); !errors.Is(err, ErrKernelArg) {
		t.Errorf("Sync after a kernel with too few arguments: %v; want ErrKernelArg", err)
	}
}

// TestHostSyncWaitsForStreams: the backend's Sync waits for the work of
// every stream, as a device's synchronize does; the store falls back on
// it to fence blocks when it cannot record an event.
func TestHostSyncWaitsForStreams(t *testing.T) {
	b := Host()
	defer b.Close()
	sb := b.(Streams)
	st, err := sb.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 64 << 20
	dst, err := b.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(dst)
	src, err := sb.HostAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.HostFree(src)
	for range 4 {
		if err := sb.CopyHtoDAsync(st, dst, src); err != nil {
			t.Fatal(err)
		}
	}
	ev, err := sb.Record(st)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if done, err := ev.Done(); !done || err != nil {
		t.Errorf("after Sync, an event recorded after 256 MiB of queued copies: done %v, %v", done, err)
	}
}
