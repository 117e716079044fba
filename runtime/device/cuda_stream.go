//go:build linux

package device

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// asyncDriver holds the driver entry points of streams, events, async
// copies, page-locked memory and kernels. They are optional: a library that
// lacks one still serves the synchronous Backend, and the first stream or
// kernel call answers an error naming what is missing.
type asyncDriver struct {
	missing []string

	cuStreamCreate      func(s *uintptr, flags uint32) cuResult
	cuStreamDestroy     func(s uintptr) cuResult
	cuMemHostAlloc      func(p **byte, n uint64, flags uint32) cuResult
	cuMemFreeHost       func(p unsafe.Pointer) cuResult
	cuModuleLoadData    func(m *uintptr, image *byte) cuResult
	cuModuleGetFunction func(f *uintptr, m uintptr, name *byte) cuResult
	cuModuleUnload      func(m uintptr) cuResult

	// Called per operation, through the methods of cuda_call.go.
	cuStreamSynchronize proc
	cuEventCreate       proc
	cuEventRecord       proc
	cuEventQuery        proc
	cuEventSynchronize  proc
	cuEventDestroy      proc
	cuStreamWaitEvent   proc
	cuMemcpyHtoDAsync   proc
	cuMemcpyDtoHAsync   proc
	cuMemcpyDtoDAsync   proc
	cuLaunchKernel      proc
}

// bindAsync binds the optional entry points of h, recording the missing.
func bindAsync(h uintptr, a *asyncDriver) {
	for _, s := range []struct {
		name string
		fn   any
	}{
		{"cuStreamCreate", &a.cuStreamCreate},
		{"cuStreamDestroy_v2", &a.cuStreamDestroy},
		{"cuStreamSynchronize", &a.cuStreamSynchronize},
		{"cuEventCreate", &a.cuEventCreate},
		{"cuEventRecord", &a.cuEventRecord},
		{"cuEventQuery", &a.cuEventQuery},
		{"cuEventSynchronize", &a.cuEventSynchronize},
		{"cuEventDestroy_v2", &a.cuEventDestroy},
		{"cuStreamWaitEvent", &a.cuStreamWaitEvent},
		{"cuMemcpyHtoDAsync_v2", &a.cuMemcpyHtoDAsync},
		{"cuMemcpyDtoHAsync_v2", &a.cuMemcpyDtoHAsync},
		{"cuMemcpyDtoDAsync_v2", &a.cuMemcpyDtoDAsync},
		{"cuMemHostAlloc", &a.cuMemHostAlloc},
		{"cuMemFreeHost", &a.cuMemFreeHost},
		{"cuModuleLoadData", &a.cuModuleLoadData},
		{"cuModuleGetFunction", &a.cuModuleGetFunction},
		{"cuModuleUnload", &a.cuModuleUnload},
		{"cuLaunchKernel", &a.cuLaunchKernel},
	} {
		p := dlsym(h, s.name)
		if p == 0 {
			a.missing = append(a.missing, s.name)
			continue
		}
		bindEntry(s.fn, p)
	}
}

const (
	cuErrNotReady          cuResult = 600
	cuEventDisableTiming   uint32   = 2
	cuMemHostAllocPortable uint32   = 1
)

var (
	_ Streams = (*CUDA)(nil)
	_ Kernels = (*CUDA)(nil)
)

// async checks that the library has every async entry point.
func (c *CUDA) async() error {
	if m := c.d.async.missing; len(m) > 0 {
		return fmt.Errorf("device: cuda: %s lacks %s, needed for streams and kernels: %w", c.d.path, strings.Join(m, ", "), errors.ErrUnsupported)
	}
	return nil
}

type cudaStream struct {
	c  *CUDA
	mu sync.Mutex
	h  uintptr // 0 once closed
}

type cudaEvent struct {
	c  *CUDA
	mu sync.Mutex
	h  uintptr // 0 once closed
}

// call runs f with the context current, under c.mu read-held.
func (c *CUDA) call(f func() error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	return f()
}

func (c *CUDA) NewStream() (Stream, error) {
	if err := c.async(); err != nil {
		return nil, err
	}
	s := &cudaStream{c: c}
	err := c.call(func() error {
		if r := c.d.async.cuStreamCreate(&s.h, 0); r != cuSuccess {
			return c.d.error("cuStreamCreate", r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.smu.Lock()
	if c.streams == nil {
		c.streams = map[*cudaStream]struct{}{}
	}
	c.streams[s] = struct{}{}
	c.smu.Unlock()
	return s, nil
}

// handle returns the driver's handle of st, a live stream of c.
func (c *CUDA) handle(st Stream) (uintptr, error) {
	s, ok := st.(*cudaStream)
	if !ok || s == nil || s.c != c {
		return 0, fmt.Errorf("device: cuda: stream %T: %w", st, ErrStreamClosed)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h == 0 {
		return 0, fmt.Errorf("device: cuda: %w", ErrStreamClosed)
	}
	return s.h, nil
}

func (s *cudaStream) Sync() error {
	h, err := s.c.handle(s)
	if err != nil {
		return err
	}
	return s.c.callBlocking(func() error {
		if r := s.c.d.async.streamSynchronize(h); r != cuSuccess {
			return s.c.d.error("cuStreamSynchronize", r)
		}
		return nil
	})
}

func (s *cudaStream) Close() error {
	s.mu.Lock()
	h := s.h
	s.h = 0
	s.mu.Unlock()
	if h == 0 {
		return nil
	}
	s.c.smu.Lock()
	delete(s.c.streams, s)
	s.c.smu.Unlock()
	return s.c.destroyStream(h)
}

// destroyStream waits for h's work, then destroys it.
func (c *CUDA) destroyStream(h uintptr) error {
	return c.callBlocking(func() error {
		var errs []error
		if r := c.d.async.streamSynchronize(h); r != cuSuccess {
			errs = append(errs, c.d.error("cuStreamSynchronize", r))
		}
		if r := c.d.async.cuStreamDestroy(h); r != cuSuccess {
			errs = append(errs, c.d.error("cuStreamDestroy_v2", r))
		}
		return errors.Join(errs...)
	})
}

// closeStreams closes every live stream; Close calls it before it takes c.mu.
func (c *CUDA) closeStreams() error {
	c.smu.Lock()
	var all []*cudaStream
	for s := range c.streams {
		all = append(all, s)
	}
	c.smu.Unlock()
	var errs []error
	for _, s := range all {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *CUDA) CopyHtoDAsync(st Stream, dst Ptr, src []byte) error {
	h, err := c.handle(st)
	if err != nil {
		return err
	}
	return c.call(func() error {
		if err := c.check(dst, len(src)); err != nil {
			return fmt.Errorf("device: cuda async copy to device: %w", err)
		}
		if len(src) == 0 {
			return nil
		}
		if r := c.d.async.memcpyHtoDAsync(uint64(dst), unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)), h); r != cuSuccess {
			return fmt.Errorf("device: cuda async copy of %d bytes to %#x: %w", len(src), uint64(dst), c.d.error("cuMemcpyHtoDAsync_v2", r))
		}
		return nil
	})
}

var _ StreamCopier = (*CUDA)(nil)

func (c *CUDA) CopyDtoDAsync(st Stream, dst, src Ptr, bytes int) error {
	h, err := c.handle(st)
	if err != nil {
		return err
	}
	return c.call(func() error {
		if err := c.check(src, bytes); err != nil {
			return fmt.Errorf("device: cuda async copy from %#x: %w", uint64(src), err)
		}
		if err := c.check(dst, bytes); err != nil {
			return fmt.Errorf("device: cuda async copy to %#x: %w", uint64(dst), err)
		}
		if bytes == 0 {
			return nil
		}
		if r := c.d.async.memcpyDtoDAsync(uint64(dst), uint64(src), uint64(bytes), h); r != cuSuccess {
			return fmt.Errorf("device: cuda async copy of %d bytes from %#x to %#x: %w", bytes, uint64(src), uint64(dst), c.d.error("cuMemcpyDtoDAsync_v2", r))
		}
		return nil
	})
}

func (c *CUDA) CopyDtoHAsync(st Stream, dst []byte, src Ptr) error {
	h, err := c.handle(st)
	if err != nil {
		return err
	}
	return c.call(func() error {
		if err := c.check(src, len(dst)); err != nil {
			return fmt.Errorf("device: cuda async copy to host: %w", err)
		}
		if len(dst) == 0 {
			return nil
		}
		if r := c.d.async.memcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(dst)), uint64(src), uint64(len(dst)), h); r != cuSuccess {
			return fmt.Errorf("device: cuda async copy of %d bytes from %#x: %w", len(dst), uint64(src), c.d.error("cuMemcpyDtoHAsync_v2", r))
		}
		return nil
	})
}

func (c *CUDA) Record(st Stream) (Event, error) {
	h, err := c.handle(st)
	if err != nil {
		return nil, err
	}
	ev := &cudaEvent{c: c}
	err = c.call(func() error {
		if ev.h = c.takeSpareEvent(); ev.h == 0 {
			if r := c.d.async.eventCreate(&ev.h, cuEventDisableTiming); r != cuSuccess {
				return c.d.error("cuEventCreate", r)
			}
		}
		if r := c.d.async.eventRecord(ev.h, h); r != cuSuccess {
			err := c.d.error("cuEventRecord", r)
			if r := c.d.async.eventDestroy(ev.h); r != cuSuccess {
				err = errors.Join(err, c.d.error("cuEventDestroy_v2", r))
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ev, nil
}

func (c *CUDA) WaitEvent(st Stream, ev Event) error {
	h, err := c.handle(st)
	if err != nil {
		return err
	}
	e, ok := ev.(*cudaEvent)
	if !ok || e == nil || e.c != c {
		return fmt.Errorf("device: cuda: event %T: %w", ev, ErrStreamClosed)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h == 0 {
		return fmt.Errorf("device: cuda: event: %w", ErrStreamClosed)
	}
	return c.call(func() error {
		if r := c.d.async.streamWaitEvent(h, e.h, 0); r != cuSuccess {
			return c.d.error("cuStreamWaitEvent", r)
		}
		return nil
	})
}

// takeSpareEvent returns a driver event Close kept, 0 when none is kept.
// Recording it again leaves alone the waits queued on it before (another
// stream's WaitEvent): the driver's waits wait for the record made before
// them.
func (c *CUDA) takeSpareEvent() uintptr {
	c.smu.Lock()
	defer c.smu.Unlock()
	n := len(c.spare)
	if n == 0 {
		return 0
	}
	h := c.spare[n-1]
	c.spare = c.spare[:n-1]
	return h
}

// keepSpareEvent keeps h, a driver event its Event no longer holds, for
// Record, and reports whether it did: not past maxSpareEvents. Called in
// c.call, so that Close, which destroys the kept ones, is not under way.
func (c *CUDA) keepSpareEvent(h uintptr) bool {
	c.smu.Lock()
	defer c.smu.Unlock()
	if len(c.spare) >= maxSpareEvents {
		return false
	}
	c.spare = append(c.spare, h)
	return true
}

func (e *cudaEvent) Done() (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h == 0 {
		return false, fmt.Errorf("device: cuda: event: %w", ErrStreamClosed)
	}
	done := false
	err := e.c.call(func() error {
		switch r := e.c.d.async.eventQuery(e.h); r {
		case cuSuccess:
			done = true
		case cuErrNotReady:
		default:
			done = true
			return e.c.d.error("cuEventQuery", r)
		}
		return nil
	})
	return done, err
}

func (e *cudaEvent) Wait() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h == 0 {
		return fmt.Errorf("device: cuda: event: %w", ErrStreamClosed)
	}
	return e.c.callBlocking(func() error {
		if r := e.c.d.async.eventSynchronize(e.h); r != cuSuccess {
			return e.c.d.error("cuEventSynchronize", r)
		}
		return nil
	})
}

func (e *cudaEvent) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h == 0 {
		return nil
	}
	h := e.h
	e.h = 0
	return e.c.call(func() error {
		if e.c.keepSpareEvent(h) {
			return nil
		}
		if r := e.c.d.async.eventDestroy(h); r != cuSuccess {
			return e.c.d.error("cuEventDestroy_v2", r)
		}
		return nil
	})
}

func (c *CUDA) HostAlloc(bytes int) ([]byte, error) {
	if err := c.async(); err != nil {
		return nil, err
	}
	if bytes <= 0 {
		return nil, fmt.Errorf("device: cuda host alloc of %d bytes: %w", bytes, ErrInvalidSize)
	}
	var p *byte
	err := c.call(func() error {
		if r := c.d.async.cuMemHostAlloc(&p, uint64(bytes), cuMemHostAllocPortable); r != cuSuccess {
			return fmt.Errorf("device: cuda host alloc of %d bytes: %w", bytes, c.d.error("cuMemHostAlloc", r))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b := unsafe.Slice(p, bytes)
	c.smu.Lock()
	if c.pinned == nil {
		c.pinned = map[*byte]int{}
	}
	c.pinned[p] = bytes
	c.smu.Unlock()
	return b, nil
}

func (c *CUDA) HostFree(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("device: cuda host free of an empty buffer: %w", ErrInvalidPtr)
	}
	p := unsafe.SliceData(b)
	c.smu.Lock()
	_, ok := c.pinned[p]
	delete(c.pinned, p)
	c.smu.Unlock()
	if !ok {
		return fmt.Errorf("device: cuda host free %p: not from HostAlloc: %w", p, ErrInvalidPtr)
	}
	return c.call(func() error {
		if r := c.d.async.cuMemFreeHost(unsafe.Pointer(p)); r != cuSuccess {
			return c.d.error("cuMemFreeHost", r)
		}
		return nil
	})
}

type cudaModule struct {
	c  *CUDA
	mu sync.Mutex
	h  uintptr // 0 once unloaded
}

type cudaFunction struct {
	m    *cudaModule
	h    uintptr
	name string
}

func (f *cudaFunction) Name() string { return f.name }

func (c *CUDA) LoadModule(ptx string) (Module, error) {
	if err := c.async(); err != nil {
		return nil, err
	}
	if strings.IndexByte(ptx, 0) >= 0 {
		return nil, errors.New("device: cuda load module: PTX text holds a NUL byte")
	}
	image := append([]byte(ptx), 0)
	m := &cudaModule{c: c}
	err := c.call(func() error {
		if r := c.d.async.cuModuleLoadData(&m.h, &image[0]); r != cuSuccess {
			return fmt.Errorf("device: cuda load module: %w", c.d.error("cuModuleLoadData", r))
		}
		return nil
	})
	runtime.KeepAlive(image)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *cudaModule) Function(name string) (Function, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == 0 {
		return nil, fmt.Errorf("device: cuda: module unloaded: %w", ErrNoKernel)
	}
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return nil, fmt.Errorf("device: cuda: kernel name %q: %w", name, ErrNoKernel)
	}
	cname := append([]byte(name), 0)
	f := &cudaFunction{m: m, name: name}
	err := m.c.call(func() error {
		switch r := m.c.d.async.cuModuleGetFunction(&f.h, m.h, &cname[0]); r {
		case cuSuccess:
			return nil
		case 500: // CUDA_ERROR_NOT_FOUND
			return fmt.Errorf("device: cuda: kernel %q: %w", name, ErrNoKernel)
		default:
			return m.c.d.error("cuModuleGetFunction", r)
		}
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (m *cudaModule) Unload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == 0 {
		return nil
	}
	h := m.h
	m.h = 0
	return m.c.call(func() error {
		if r := m.c.d.async.cuModuleUnload(h); r != cuSuccess {
			return m.c.d.error("cuModuleUnload", r)
		}
		return nil
	})
}

func (c *CUDA) Launch(st Stream, fn Function, grid, block Dim3, sharedBytes int, args ...any) error {
	h, err := c.handle(st)
	if err != nil {
		return err
	}
	f, ok := fn.(*cudaFunction)
	if !ok || f == nil || f.m.c != c {
		return fmt.Errorf("device: cuda launch: function %T of another backend: %w", fn, ErrNoKernel)
	}
	if sharedBytes < 0 {
		return fmt.Errorf("device: cuda launch %s: %d shared bytes: %w", f.name, sharedBytes, ErrInvalidSize)
	}
	buf, offs, err := packArgOffsets(args)
	if err != nil {
		return fmt.Errorf("device: cuda launch %s: %w", f.name, err)
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.m.h == 0 {
		return fmt.Errorf("device: cuda launch %s: module unloaded: %w", f.name, ErrNoKernel)
	}
	// The driver reads the parameters during the call: an array of
	// pointers to each value, all pinned until it returns.
	buf = append(buf, make([]byte, 8)...) // never empty
	params := make([]unsafe.Pointer, len(args)+1)
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&buf[0])
	for i, o := range offs {
		params[i] = unsafe.Pointer(&buf[o])
	}
	pin.Pin(&params[0])
	grid, block = grid.norm(), block.norm()
	return c.call(func() error {
		if r := c.d.async.launchKernel(f.h, grid, block, uint32(sharedBytes), h, unsafe.Pointer(&params[0]), nil); r != cuSuccess {
			return fmt.Errorf("device: cuda launch %s: %w", f.name, c.d.error("cuLaunchKernel", r))
		}
		return nil
	})
}
