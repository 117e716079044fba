package store_test

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// The interaction model's backend: the host backend behind a wrapper that
// injects faults, counts calls, can block Free, and runs streams of its
// own. Its streams are ordered queues, each run by its own goroutine as the
// host backend's are, but the model can queue plain Go work on them (a
// "kernel" that fills spans or reads a block table) and gates that hold a
// stream without holding any backend lock, so queued work really completes
// later and at a point the model chooses.
//
// It is the interaction model's own device (interaction_*_test.go), and
// stays here rather than in internal/statetest: its streams run the
// model's kernels and gates, and its faults are armed per method (backendOp)
// by the model's random steps; rebuilt on statetest.Faults, whose kinds are
// coarser, the seeds that replay past defects would run other sequences.
// Its faults return statetest.ErrInjected.

type backendOp int

const (
	mAlloc backendOp = 1 << iota
	mCopyHtoD
	mCopyDtoH
	mCopyDtoD
	mMemset
	mAsync  // CopyHtoDAsync, CopyDtoHAsync
	mRecord // Record
	mAll    = mAlloc | mCopyHtoD | mCopyDtoH | mCopyDtoD | mMemset | mAsync | mRecord
)

type interactionBackend struct {
	device.Backend // the host backend

	mu    sync.Mutex
	armed backendOp // kinds that fail once the countdown ends
	after int       // calls of an armed kind to let through first
	fired bool

	// mapped: the wrapper gives out the host backend's bytes
	// (device.HostMapper), so a pool over it copies rows with the
	// built-in copy and its copy faults never fire: the seeds from
	// mappedSeeds on, which run the host memory paths.
	mapped bool

	calls atomic.Int64 // every call to the wrapped backend
	frees atomic.Int64

	// blockFree, when set, makes Free signal inFree and wait until
	// blockFree is closed (the probe of locks held across backend calls).
	blockFree chan struct{}
	inFree    chan struct{}

	smu     sync.Mutex
	streams []*interactionStream // every stream made, for Sync
}

func newInteractionBackend() *interactionBackend { return &interactionBackend{Backend: device.Host()} }

// HostBytes gives out the host backend's bytes when b is mapped.
func (b *interactionBackend) HostBytes(p device.Ptr, n int) ([]byte, bool) {
	if !b.mapped {
		return nil, false
	}
	return device.HostBytes(b.Backend, p, n)
}

// arm makes the call after the next n calls of the kinds in k fail.
func (b *interactionBackend) arm(k backendOp, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed, b.after, b.fired = k, n, false
}

// disarm stops injecting and reports whether a fault fired since arm.
func (b *interactionBackend) disarm() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	fired := b.fired
	b.armed, b.fired = 0, false
	return fired
}

// hasFired reports whether a fault fired since arm.
func (b *interactionBackend) hasFired() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fired
}

func (b *interactionBackend) check(k backendOp, what string) error {
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
	return fmt.Errorf("%s: %w", what, statetest.ErrInjected)
}

// AllocZeroes passes on what the host backend says of its fresh memory.
func (b *interactionBackend) AllocZeroes() bool {
	z, ok := b.Backend.(device.AllocZeroer)
	return ok && z.AllocZeroes()
}

func (b *interactionBackend) Alloc(n int) (device.Ptr, error) {
	if err := b.check(mAlloc, "alloc"); err != nil {
		return 0, err
	}
	return b.Backend.Alloc(n)
}

func (b *interactionBackend) Free(p device.Ptr) error {
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

func (b *interactionBackend) CopyHtoD(dst device.Ptr, src []byte) error {
	if err := b.check(mCopyHtoD, "copy to device"); err != nil {
		return err
	}
	return b.Backend.CopyHtoD(dst, src)
}

func (b *interactionBackend) CopyDtoH(dst []byte, src device.Ptr) error {
	if err := b.check(mCopyDtoH, "copy to host"); err != nil {
		return err
	}
	return b.Backend.CopyDtoH(dst, src)
}

func (b *interactionBackend) CopyDtoD(dst, src device.Ptr, n int) error {
	if err := b.check(mCopyDtoD, "copy on device"); err != nil {
		return err
	}
	return b.Backend.CopyDtoD(dst, src, n)
}

func (b *interactionBackend) Memset(dst device.Ptr, v byte, n int) error {
	if err := b.check(mMemset, "memset"); err != nil {
		return err
	}
	return b.Backend.Memset(dst, v, n)
}

// interactionStream is an ordered queue of work run by its own goroutine.
type interactionStream struct {
	b      *interactionBackend
	mu     sync.Mutex
	cond   *sync.Cond
	ops    []func() error
	busy   bool
	err    error
	closed bool
	exited chan struct{}
}

type interactionEvent struct {
	s    *interactionStream
	done chan struct{}
	err  error
}

var (
	_ device.Streams      = (*interactionBackend)(nil)
	_ device.StreamCopier = (*interactionBackend)(nil)
	_ device.AllocZeroer  = (*interactionBackend)(nil)
)

func (b *interactionBackend) NewStream() (device.Stream, error) {
	s := &interactionStream{b: b, exited: make(chan struct{})}
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
func (b *interactionBackend) Sync() error {
	b.smu.Lock()
	streams := append([]*interactionStream(nil), b.streams...)
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

func (s *interactionStream) run() {
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
func (s *interactionStream) do(op func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return device.ErrStreamClosed
	}
	s.ops = append(s.ops, op)
	s.cond.Broadcast()
	return nil
}

func (s *interactionStream) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.ops) > 0 || s.busy {
		s.cond.Wait()
	}
	return s.err
}

func (s *interactionStream) Close() error {
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
func (b *interactionBackend) stream(st device.Stream) (*interactionStream, error) {
	s, ok := st.(*interactionStream)
	if !ok || s == nil || s.b != b {
		return nil, fmt.Errorf("interaction backend: stream %T of another backend: %w", st, device.ErrStreamClosed)
	}
	return s, nil
}

func (b *interactionBackend) CopyHtoDAsync(st device.Stream, dst device.Ptr, src []byte) error {
	s, err := b.stream(st)
	if err != nil {
		return err
	}
	if err := b.check(mAsync, "async copy to device"); err != nil {
		return err
	}
	return s.do(func() error { return b.Backend.CopyHtoD(dst, src) })
}

func (b *interactionBackend) CopyDtoDAsync(st device.Stream, dst, src device.Ptr, n int) error {
	s, err := b.stream(st)
	if err != nil {
		return err
	}
	if err := b.check(mAsync, "async copy on device"); err != nil {
		return err
	}
	return s.do(func() error { return b.Backend.CopyDtoD(dst, src, n) })
}

func (b *interactionBackend) CopyDtoHAsync(st device.Stream, dst []byte, src device.Ptr) error {
	s, err := b.stream(st)
	if err != nil {
		return err
	}
	if err := b.check(mAsync, "async copy to host"); err != nil {
		return err
	}
	return s.do(func() error { return b.Backend.CopyDtoH(dst, src) })
}

func (b *interactionBackend) Record(st device.Stream) (device.Event, error) {
	s, err := b.stream(st)
	if err != nil {
		return nil, err
	}
	if err := b.check(mRecord, "record"); err != nil {
		return nil, err
	}
	ev := &interactionEvent{s: s, done: make(chan struct{})}
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

func (b *interactionBackend) WaitEvent(st device.Stream, ev device.Event) error {
	s, err := b.stream(st)
	if err != nil {
		return err
	}
	e, ok := ev.(*interactionEvent)
	if !ok || e == nil || e.s.b != b {
		return fmt.Errorf("interaction backend: event %T: %w", ev, device.ErrStreamClosed)
	}
	return s.do(func() error { <-e.done; return nil })
}

func (b *interactionBackend) HostAlloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, device.ErrInvalidSize
	}
	return make([]byte, n), nil
}

func (b *interactionBackend) HostFree(buf []byte) error { return nil }

func (e *interactionEvent) Done() (bool, error) {
	select {
	case <-e.done:
		return true, e.err
	default:
		return false, nil
	}
}

func (e *interactionEvent) Wait() error {
	<-e.done
	return e.err
}

func (e *interactionEvent) Close() error { return nil }

// gate holds a stream until open is called: work queued after it runs
// only then. It holds no backend lock meanwhile.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func (s *interactionStream) gate() *gate {
	g := &gate{ch: make(chan struct{})}
	s.do(func() error { <-g.ch; return nil })
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }
