package state_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
)

// The feature-interaction model's backend: the host backend behind a
// wrapper that injects faults, counts calls, can block Free, and runs
// streams of its own. Its streams are ordered queues, each run by its own
// goroutine as the host backend's are, but the model can queue plain Go
// work on them (a "kernel" that fills spans or reads a block table) and
// gates that hold a stream without holding any backend lock, so queued work
// really completes later and at a point the model chooses.

var errMeetInjected = errors.New("meet model: injected fault")

type meetOp int

const (
	mAlloc meetOp = 1 << iota
	mCopyHtoD
	mCopyDtoH
	mCopyDtoD
	mMemset
	mAsync  // CopyHtoDAsync, CopyDtoHAsync
	mRecord // Record
	mAll    = mAlloc | mCopyHtoD | mCopyDtoH | mCopyDtoD | mMemset | mAsync | mRecord
)

type meetBackend struct {
	device.Backend // the host backend

	mu    sync.Mutex
	armed meetOp // kinds that fail once the countdown ends
	after int    // calls of an armed kind to let through first
	fired bool

	calls atomic.Int64 // every call to the wrapped backend
	frees atomic.Int64

	// blockFree, when set, makes Free signal inFree and wait until
	// blockFree is closed (the probe of locks held across backend calls).
	blockFree chan struct{}
	inFree    chan struct{}

	smu     sync.Mutex
	streams []*meetStream // every stream made, for Sync
}

func newMeetBackend() *meetBackend { return &meetBackend{Backend: device.Host()} }

// arm makes the call after the next n calls of the kinds in k fail.
func (b *meetBackend) arm(k meetOp, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed, b.after, b.fired = k, n, false
}

// disarm stops injecting and reports whether a fault fired since arm.
func (b *meetBackend) disarm() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	fired := b.fired
	b.armed, b.fired = 0, false
	return fired
}

// hasFired reports whether a fault fired since arm.
func (b *meetBackend) hasFired() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fired
}

func (b *meetBackend) check(k meetOp, what string) error {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.armed&k == 0 {
		return nil
	}
	if b.after > 0 {
		b.after--
		return nil
	}
	b.armed, b.fired = 0, true
	return fmt.Errorf("%s: %w", what, errMeetInjected)
}

// AllocZeroes passes on what the host backend says of its fresh memory.
func (b *meetBackend) AllocZeroes() bool {
	z, ok := b.Backend.(device.AllocZeroer)
	return ok && z.AllocZeroes()
}

func (b *meetBackend) Alloc(n int) (device.Ptr, error) {
	if err := b.check(mAlloc, "alloc"); err != nil {
		return 0, err
	}
	return b.Backend.Alloc(n)
}

func (b *meetBackend) Free(p device.Ptr) error {
	b.calls.Add(1)
	b.frees.Add(1)
	b.mu.Lock()
	gate, in := b.blockFree, b.inFree
	b.mu.Unlock()
	if gate != nil {
		select {
		case in <- struct{}{}:
		default:
		}
		<-gate
	}
	return b.Backend.Free(p)
}

func (b *meetBackend) CopyHtoD(dst device.Ptr, src []byte) error {
	if err := b.check(mCopyHtoD, "copy to device"); err != nil {
		return err
	}
	return b.Backend.CopyHtoD(dst, src)
}

func (b *meetBackend) CopyDtoH(dst []byte, src device.Ptr) error {
	if err := b.check(mCopyDtoH, "copy to host"); err != nil {
		return err
	}
	return b.Backend.CopyDtoH(dst, src)
}

func (b *meetBackend) CopyDtoD(dst, src device.Ptr, n int) error {
	if err := b.check(mCopyDtoD, "copy on device"); err != nil {
		return err
	}
	return b.Backend.CopyDtoD(dst, src, n)
}

func (b *meetBackend) Memset(dst device.Ptr, v byte, n int) error {
	if err := b.check(mMemset, "memset"); err != nil {
		return err
	}
	return b.Backend.Memset(dst, v, n)
}

// meetStream is an ordered queue of work run by its own goroutine.
type meetStream struct {
	b      *meetBackend
	mu     sync.Mutex
	cond   *sync.Cond
	ops    []func() error
	busy   bool
	err    error
	closed bool
	exited chan struct{}
}

type meetEvent struct {
	s    *meetStream
	done chan struct{}
	err  error
}

var (
	_ device.Streams      = (*meetBackend)(nil)
	_ device.StreamCopier = (*meetBackend)(nil)
	_ device.AllocZeroer  = (*meetBackend)(nil)
)

func (b *meetBackend) NewStream() (device.Stream, error) {
	s := &meetStream{b: b, exited: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	b.smu.Lock()
	b.streams = append(b.streams, s)
	b.smu.Unlock()
	go s.run()
	return s, nil
}

// Sync waits for the host backend and for the work of every stream, as
// a device's synchronize does (the store falls back on it when it cannot
// record an event).
func (b *meetBackend) Sync() error {
	b.smu.Lock()
	streams := append([]*meetStream(nil), b.streams...)
	b.smu.Unlock()
	for _, s := range streams {
		s.mu.Lock()
		for (len(s.ops) > 0 || s.busy) && !s.closed {
			s.cond.Wait()
		}
		s.mu.Unlock()
	}
	return b.Backend.Sync()
}

func (s *meetStream) run() {
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
		op := s.ops[0]
		s.ops = s.ops[1:]
		s.busy = true
		s.mu.Unlock()
		err := op()
		s.mu.Lock()
		s.busy = false
		if err != nil && s.err == nil {
			s.err = err
		}
		s.cond.Broadcast()
	}
}

// do queues op on the stream: the model's kernels and gates.
func (s *meetStream) do(op func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return device.ErrStreamClosed
	}
	s.ops = append(s.ops, op)
	s.cond.Broadcast()
	return nil
}

func (s *meetStream) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.ops) > 0 || s.busy {
		s.cond.Wait()
	}
	return s.err
}

func (s *meetStream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.exited
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// stream checks that st is a stream of b.
func (b *meetBackend) stream(st device.Stream) (*meetStream, error) {
	s, ok := st.(*meetStream)
	if !ok || s == nil || s.b != b {
		return nil, fmt.Errorf("meet backend: stream %T of another backend: %w", st, device.ErrStreamClosed)
	}
	return s, nil
}

func (b *meetBackend) CopyHtoDAsync(st device.Stream, dst device.Ptr, src []byte) error {
	s, err := b.stream(st)
	if err != nil {
		return err
	}
	if err := b.check(mAsync, "async copy to device"); err != nil {
		return err
	}
	return s.do(func() error { return b.Backend.CopyHtoD(dst, src) })
}

func (b *meetBackend) CopyDtoDAsync(st device.Stream, dst, src device.Ptr, n int) error {
	s, err := b.stream(st)
	if err != nil {
		return err
	}
	if err := b.check(mAsync, "async copy on device"); err != nil {
		return err
	}
	return s.do(func() error { return b.Backend.CopyDtoD(dst, src, n) })
}

func (b *meetBackend) CopyDtoHAsync(st device.Stream, dst []byte, src device.Ptr) error {
	s, err := b.stream(st)
	if err != nil {
		return err
	}
	if err := b.check(mAsync, "async copy to host"); err != nil {
		return err
	}
	return s.do(func() error { return b.Backend.CopyDtoH(dst, src) })
}

func (b *meetBackend) Record(st device.Stream) (device.Event, error) {
	s, err := b.stream(st)
	if err != nil {
		return nil, err
	}
	if err := b.check(mRecord, "record"); err != nil {
		return nil, err
	}
	ev := &meetEvent{s: s, done: make(chan struct{})}
	err = s.do(func() error {
		s.mu.Lock()
		ev.err = s.err
		s.mu.Unlock()
		close(ev.done)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ev, nil
}

func (b *meetBackend) WaitEvent(st device.Stream, ev device.Event) error {
	s, err := b.stream(st)
	if err != nil {
		return err
	}
	e, ok := ev.(*meetEvent)
	if !ok || e == nil || e.s.b != b {
		return fmt.Errorf("meet backend: event %T: %w", ev, device.ErrStreamClosed)
	}
	return s.do(func() error { <-e.done; return nil })
}

func (b *meetBackend) HostAlloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, device.ErrInvalidSize
	}
	return make([]byte, n), nil
}

func (b *meetBackend) HostFree(buf []byte) error { return nil }

func (e *meetEvent) Done() (bool, error) {
	select {
	case <-e.done:
		return true, e.err
	default:
		return false, nil
	}
}

func (e *meetEvent) Wait() error {
	<-e.done
	return e.err
}

func (e *meetEvent) Close() error { return nil }

// gate holds a stream until open is called: work queued after it runs
// only then. It holds no backend lock meanwhile.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func (s *meetStream) gate() *gate {
	g := &gate{ch: make(chan struct{})}
	s.do(func() error { <-g.ch; return nil })
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }
