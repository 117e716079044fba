package device

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// HostKernel is a kernel for the host backend: the Go version of a device
// kernel of the same name. It runs once per launch (not once per thread) and
// reaches memory through mem.
type HostKernel func(mem HostMemory, grid, block Dim3, args []any) error

// HostMemory gives a host kernel the bytes behind Ptrs.
type HostMemory interface {
	// Bytes returns the n bytes at p; a range outside a live allocation is
	// an error wrapping ErrInvalidPtr.
	Bytes(p Ptr, n int) ([]byte, error)
}

var hostKernels struct {
	sync.RWMutex
	m map[string]HostKernel
}

// RegisterHostKernel registers fn as the host backend's kernel name, so a
// program that launches name on a CUDA backend runs the same on the host
// one. Registering a name twice, an empty name or a nil fn is an error.
func RegisterHostKernel(name string, fn HostKernel) error {
	if name == "" || fn == nil {
		return fmt.Errorf("device: register host kernel %q: empty name or nil function", name)
	}
	hostKernels.Lock()
	defer hostKernels.Unlock()
	if hostKernels.m == nil {
		hostKernels.m = map[string]HostKernel{}
	}
	if hostKernels.m[name] != nil {
		return fmt.Errorf("device: host kernel %q registered twice", name)
	}
	hostKernels.m[name] = fn
	return nil
}

var (
	_ Streams = (*hostBackend)(nil)
	_ Kernels = (*hostBackend)(nil)
)

// hostStream is an ordered queue run by its own goroutine.
type hostStream struct {
	h *hostBackend

	mu   sync.Mutex
	cond *sync.Cond // signalled when ops grows or running ends
	// ops[next:] is the queue; ops is emptied when it drains, and moved
	// to its start when the ops taken fill half of it (pop), so that it
	// keeps its array: a queue sliced from its front grew a new one
	// every few enqueues.
	ops    []hostOp
	next   int
	busy   bool  // an op is running
	err    error // the first error an op met
	closed bool
	exited chan struct{}
}

// hostEvent completes when its stream's goroutine reaches it: the work
// that completes it sets err and done under s.mu and broadcasts s.cond,
// which wakes Wait. No channel
// per event: AppendAsync records one per call (docs/BENCHMARKS.md,
// "Serving paths").
type hostEvent struct {
	s    *hostStream
	done atomic.Bool
	err  error // set before done
}

// complete marks e done with the stream's first error, or err when the
// stream has none.
func (e *hostEvent) complete(err error) {
	e.s.mu.Lock()
	e.err = e.s.err
	if e.err == nil {
		e.err = err
	}
	e.done.Store(true)
	e.s.cond.Broadcast()
	e.s.mu.Unlock()
}

func (h *hostBackend) NewStream() (Stream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	s := &hostStream{h: h, exited: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	if h.streams == nil {
		h.streams = map[*hostStream]struct{}{}
	}
	h.streams[s] = struct{}{}
	go s.run()
	return s, nil
}

func (s *hostStream) run() {
	defer close(s.exited)
	s.mu.Lock()
	for {
		for len(s.ops) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.ops) == 0 {
			s.mu.Unlock()
			return
		}
		op := s.pop()
		s.busy = true
		s.mu.Unlock()
		err := op.run()
		s.mu.Lock()
		s.busy = false
		if err != nil && s.err == nil {
			s.err = err
		}
		s.cond.Broadcast()
	}
}

// pop takes the queue's first op. s.mu is held; the queue holds one.
func (s *hostStream) pop() hostOp {
	op := s.ops[s.next]
	s.ops[s.next] = nil
	s.next++
	switch {
	case s.next == len(s.ops):
		s.ops, s.next = s.ops[:0], 0
	case s.next >= 64 && 2*s.next >= len(s.ops): // a queue that never drains
		n := copy(s.ops, s.ops[s.next:])
		clear(s.ops[n:])
		s.ops, s.next = s.ops[:n], 0
	}
	return op
}

// hostOp is a piece of work queued on a host stream: a type with the
// work as a method queues itself without a closure (hostBatch), a closure
// queues as an opFunc.
type hostOp interface{ run() error }

// opFunc is a closure queued on a host stream.
type opFunc func() error

func (f opFunc) run() error { return f() }

// enqueue adds op to the stream.
func (s *hostStream) enqueue(op hostOp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStreamClosed
	}
	s.ops = append(s.ops, op)
	s.cond.Broadcast()
	return nil
}

func (s *hostStream) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.ops) > 0 || s.busy {
		s.cond.Wait()
	}
	return s.err
}

func (s *hostStream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.exited
	s.h.mu.Lock()
	delete(s.h.streams, s)
	s.h.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// stream checks that st is a live stream of h.
func (h *hostBackend) stream(st Stream) (*hostStream, error) {
	s, ok := st.(*hostStream)
	if !ok || s == nil || s.h != h {
		return nil, fmt.Errorf("device: host: stream %T: %w", st, ErrStreamClosed)
	}
	return s, nil
}

// withSpan runs f on the n bytes at p under the read lock, when the queue
// reaches it.
func (h *hostBackend) withSpan(p Ptr, n int, what string, f func(b []byte)) func() error {
	return func() error {
		h.unmap.RLock()
		defer h.unmap.RUnlock()
		b, err := h.lookup(p, n)
		if err != nil {
			return fmt.Errorf("device: host %s: %w", what, err)
		}
		f(b)
		return nil
	}
}

func (h *hostBackend) CopyHtoDAsync(st Stream, dst Ptr, src []byte) error {
	s, err := h.stream(st)
	if err != nil {
		return err
	}
	if err := h.checkLive(dst, len(src)); err != nil {
		return fmt.Errorf("device: host async copy to device: %w", err)
	}
	return s.enqueue(opFunc(h.withSpan(dst, len(src), "async copy to device", func(b []byte) { copy(b, src) })))
}

var _ StreamCopier = (*hostBackend)(nil)

func (h *hostBackend) CopyDtoDAsync(st Stream, dst, src Ptr, bytes int) error {
	s, err := h.stream(st)
	if err != nil {
		return err
	}
	if err := h.checkLive(src, bytes); err != nil {
		return fmt.Errorf("device: host async copy from %#x: %w", uint64(src), err)
	}
	if err := h.checkLive(dst, bytes); err != nil {
		return fmt.Errorf("device: host async copy to %#x: %w", uint64(dst), err)
	}
	return s.enqueue(opFunc(func() error {
		h.unmap.RLock()
		defer h.unmap.RUnlock()
		from, err := h.lookup(src, bytes)
		if err != nil {
			return fmt.Errorf("device: host async copy from %#x: %w", uint64(src), err)
		}
		to, err := h.lookup(dst, bytes)
		if err != nil {
			return fmt.Errorf("device: host async copy to %#x: %w", uint64(dst), err)
		}
		copy(to, from)
		return nil
	}))
}

func (h *hostBackend) CopyDtoHAsync(st Stream, dst []byte, src Ptr) error {
	s, err := h.stream(st)
	if err != nil {
		return err
	}
	if err := h.checkLive(src, len(dst)); err != nil {
		return fmt.Errorf("device: host async copy to host: %w", err)
	}
	return s.enqueue(opFunc(h.withSpan(src, len(dst), "async copy to host", func(b []byte) { copy(dst, b) })))
}

// checkLive checks a range when the call is made; the queue checks it again
// when it runs.
func (h *hostBackend) checkLive(p Ptr, n int) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	_, err := h.span(p, n)
	return err
}

func (h *hostBackend) Record(st Stream) (Event, error) {
	s, err := h.stream(st)
	if err != nil {
		return nil, err
	}
	ev := &hostEvent{s: s}
	err = s.enqueue(opFunc(func() error {
		ev.complete(nil)
		return nil
	}))
	if err != nil {
		return nil, err
	}
	return ev, nil
}

func (h *hostBackend) WaitEvent(st Stream, ev Event) error {
	s, err := h.stream(st)
	if err != nil {
		return err
	}
	e, ok := ev.(*hostEvent)
	if !ok || e == nil || e.s.h != h {
		return fmt.Errorf("device: host: event %T: %w", ev, ErrStreamClosed)
	}
	return s.enqueue(opFunc(func() error { e.Wait(); return nil }))
}

func (e *hostEvent) Done() (bool, error) {
	if e.done.Load() {
		return true, e.err
	}
	return false, nil
}

func (e *hostEvent) Wait() error {
	if e.done.Load() {
		return e.err
	}
	s := e.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for !e.done.Load() {
		s.cond.Wait()
	}
	return e.err
}

func (e *hostEvent) Close() error { return nil }

func (h *hostBackend) HostAlloc(bytes int) ([]byte, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("device: host staging alloc of %d bytes: %w", bytes, ErrInvalidSize)
	}
	mem, err := syscall.Mmap(-1, 0, bytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("device: host staging alloc of %d bytes: %v: %w", bytes, err, ErrOutOfMemory)
	}
	return mem, nil
}

func (h *hostBackend) HostFree(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("device: host staging free of an empty buffer: %w", ErrInvalidPtr)
	}
	if err := syscall.Munmap(b[:cap(b)]); err != nil {
		return fmt.Errorf("device: host staging free %p: %w", unsafe.SliceData(b), err)
	}
	return nil
}

// hostModule finds kernels among the registered host kernels.
type hostModule struct{ h *hostBackend }

type hostFunction struct {
	name string
	fn   HostKernel
	h    *hostBackend
}

func (f *hostFunction) Name() string { return f.name }

func (h *hostBackend) LoadModule(ptx string) (Module, error) {
	if strings.IndexByte(ptx, 0) >= 0 {
		return nil, errors.New("device: host load module: PTX text holds a NUL byte")
	}
	return &hostModule{h: h}, nil
}

func (m *hostModule) Function(name string) (Function, error) {
	hostKernels.RLock()
	fn := hostKernels.m[name]
	hostKernels.RUnlock()
	if fn == nil {
		return nil, fmt.Errorf("device: host: kernel %q not registered: %w", name, ErrNoKernel)
	}
	return &hostFunction{name: name, fn: fn, h: m.h}, nil
}

func (m *hostModule) Unload() error { return nil }

func (h *hostBackend) Launch(st Stream, fn Function, grid, block Dim3, sharedBytes int, args ...any) error {
	s, err := h.stream(st)
	if err != nil {
		return err
	}
	f, ok := fn.(*hostFunction)
	if !ok || f == nil || f.h != h {
		return fmt.Errorf("device: host launch: function %T of another backend: %w", fn, ErrNoKernel)
	}
	if sharedBytes < 0 {
		return fmt.Errorf("device: host launch %s: %d shared bytes: %w", f.name, sharedBytes, ErrInvalidSize)
	}
	if _, err := packArgs(args); err != nil {
		return fmt.Errorf("device: host launch %s: %w", f.name, err)
	}
	args = append([]any(nil), args...)
	grid, block = grid.norm(), block.norm()
	return s.enqueue(opFunc(func() (err error) {
		h.unmap.RLock()
		defer h.unmap.RUnlock()
		// A Go kernel that panics (arguments of the wrong types, say)
		// fails its stream instead of the process.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("device: host kernel %s panicked: %v: %w", f.name, r, ErrKernelArg)
			}
		}()
		if err := f.fn(hostMemory{h}, grid, block, args); err != nil {
			return fmt.Errorf("device: host kernel %s: %w", f.name, err)
		}
		return nil
	}))
}

// HostBytes returns the n bytes at p where b is the host backend, whose
// device memory is host memory, so that a step written in Go reads and
// writes rows in place instead of copying them out and back, and a store
// copies rows with the built-in copy instead of a backend call; false for
// any other backend, or a range outside a live allocation. The bytes stay
// valid until the allocation holding them is freed: Close leaves an
// allocation whose bytes HostBytes gave out mapped, so that a caller that
// closes the backend under a store still using it gets no fault. A
// backend that wraps the host backend answers for itself (HostMapper).
func HostBytes(b Backend, p Ptr, n int) ([]byte, bool) {
	if m, ok := b.(HostMapper); ok {
		return m.HostBytes(p, n)
	}
	h, ok := b.(*hostBackend)
	if !ok {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	i, off, err := h.allocs.at(p, n)
	if err != nil {
		return nil, false
	}
	r := &h.allocs.regions[i]
	r.mapped = true
	return r.mem[off : off+uint64(n) : off+uint64(n)], true
}

// HostMapper is a backend that wraps another whose memory is the
// process's (a wrapper of the host backend that counts or injects faults)
// and gives its bytes out itself: HostBytes, as the package's function
// answers for the host backend (device.HostBytes(inner, p, n) passes it
// on), or false to have its own calls made instead. A store over it then
// copies rows with the built-in copy, not through the wrapper's copies.
type HostMapper interface {
	HostBytes(p Ptr, n int) ([]byte, bool)
}

// hostMemory is the HostMemory a kernel sees; the stream holds h.unmap
// for reading while the kernel runs, so what Bytes returns stays mapped.
type hostMemory struct{ h *hostBackend }

func (m hostMemory) Bytes(p Ptr, n int) ([]byte, error) { return m.h.lookup(p, n) }

// lookup is span under a short hold of h.mu.
func (h *hostBackend) lookup(p Ptr, n int) ([]byte, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.span(p, n)
}

// packArgs lays kernel arguments out as the driver reads them: each at its
// natural alignment in one buffer, with the offset of each.
func packArgs(args []any) ([]byte, error) {
	buf, _, err := packArgOffsets(args)
	return buf, err
}

func packArgOffsets(args []any) ([]byte, []int, error) {
	var buf []byte
	offs := make([]int, len(args))
	put := func(size int, v uint64) {
		for len(buf)%size != 0 {
			buf = append(buf, 0)
		}
		for i := 0; i < size; i++ {
			buf = append(buf, byte(v>>(8*i)))
		}
	}
	for i, a := range args {
		offs[i] = len(buf)
		switch v := a.(type) {
		case Ptr:
			put(8, uint64(v))
		case int32:
			put(4, uint64(uint32(v)))
		case uint32:
			put(4, uint64(v))
		case int64:
			put(8, uint64(v))
		case uint64:
			put(8, v)
		case float32:
			put(4, uint64(math.Float32bits(v)))
		case float64:
			put(8, math.Float64bits(v))
		default:
			return nil, nil, fmt.Errorf("argument %d is a %T: %w", i, a, ErrKernelArg)
		}
		// the offset is where the value starts, after padding
		switch a.(type) {
		case int32, uint32, float32:
			offs[i] = len(buf) - 4
		default:
			offs[i] = len(buf) - 8
		}
	}
	return buf, offs, nil
}
