package statetest

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/gpustate/gpustate/runtime/device"
)

// ErrInjected is the error a Faults backend returns for the call it fails.
var ErrInjected = errors.New("injected fault")

// Op is a kind of backend call a Faults backend can fail: a set of them is
// their bitwise or.
type Op int

const (
	OpAlloc  Op = 1 << iota // Alloc
	OpCopy                  // CopyHtoD, CopyDtoH, CopyDtoD, and batches a wrapper adds
	OpMemset                // Memset
	OpAsync                 // CopyHtoDAsync, CopyDtoHAsync (StreamFaults)
	OpRecord                // Record (StreamFaults)

	// OpAll is every call of device.Backend that Faults wraps.
	OpAll = OpAlloc | OpCopy | OpMemset
)

// Faults wraps a backend and fails its calls on demand: the n-th call
// (counted from the arming) of the kinds armed (Arm) or of one method
// (ArmMethod), or every call a predicate picks (FailWhen). It counts every
// call. Only the methods of device.Backend are wrapped; StreamFaults adds
// the streams' copies and events, and a test that needs another optional
// interface (batches) embeds a *Faults in a type of its own and calls
// Check in its methods.
type Faults struct {
	device.Backend

	mu     sync.Mutex
	kinds  Op
	method string
	left   int // armed calls before the one that fails; -1: none armed
	fired  bool
	when   func(op Op, method string) bool
	calls  int
	allocs int
}

// NewFaults returns b wrapped, with no fault armed.
func NewFaults(b device.Backend) *Faults {
	return &Faults{Backend: b, left: -1}
}

// Arm makes the n-th next call of the given kinds fail (n counted from 0).
func (f *Faults) Arm(kinds Op, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kinds, f.method, f.left, f.fired = kinds, "", n, false
}

// ArmMethod makes the n-th next call of the named method fail (n counted
// from 0): "CopyHtoDAsync", or the name a wrapper passes to Check.
func (f *Faults) ArmMethod(method string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kinds, f.method, f.left, f.fired = 0, method, n, false
}

// FailWhen makes every call for which pred returns true fail, until
// Disarm or FailWhen(nil). pred gets the call's kind and method name and
// runs under the backend's lock.
func (f *Faults) FailWhen(pred func(op Op, method string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.when, f.fired = pred, false
}

// Disarm cancels the armed fault and any predicate, and reports whether a
// fault fired since the last arming.
func (f *Faults) Disarm() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	fired := f.fired
	f.left, f.fired, f.when = -1, false, nil
	return fired
}

// Calls returns the calls made so far, of every kind.
func (f *Faults) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Allocs returns the Alloc calls made so far.
func (f *Faults) Allocs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.allocs
}

// Check counts a call of method, of kind op, and returns the injected
// error when it is the one to fail: wrapped in device.ErrOutOfMemory for
// an Alloc. Wrappers that add methods call it before forwarding; a test's
// own wrapper may also call it only to decide when to fail.
func (f *Faults) Check(op Op, method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if op == OpAlloc {
		f.allocs++
	}
	fail := f.when != nil && f.when(op, method)
	if !fail && f.left >= 0 && (f.kinds&op != 0 || f.method != "" && f.method == method) {
		if f.left > 0 {
			f.left--
			return nil
		}
		f.left, fail = -1, true
	}
	if !fail {
		return nil
	}
	f.fired = true
	if op == OpAlloc {
		return fmt.Errorf("%s: %w: %w", method, ErrInjected, device.ErrOutOfMemory)
	}
	return fmt.Errorf("%s: %w", method, ErrInjected)
}

func (f *Faults) Alloc(n int) (device.Ptr, error) {
	if err := f.Check(OpAlloc, "Alloc"); err != nil {
		return 0, err
	}
	return f.Backend.Alloc(n)
}

func (f *Faults) CopyHtoD(dst device.Ptr, src []byte) error {
	if err := f.Check(OpCopy, "CopyHtoD"); err != nil {
		return err
	}
	return f.Backend.CopyHtoD(dst, src)
}

func (f *Faults) CopyDtoH(dst []byte, src device.Ptr) error {
	if err := f.Check(OpCopy, "CopyDtoH"); err != nil {
		return err
	}
	return f.Backend.CopyDtoH(dst, src)
}

func (f *Faults) CopyDtoD(dst, src device.Ptr, n int) error {
	if err := f.Check(OpCopy, "CopyDtoD"); err != nil {
		return err
	}
	return f.Backend.CopyDtoD(dst, src, n)
}

func (f *Faults) Memset(dst device.Ptr, v byte, n int) error {
	if err := f.Check(OpMemset, "Memset"); err != nil {
		return err
	}
	return f.Backend.Memset(dst, v, n)
}

// StreamFaults is Faults over a backend with streams: it also shows
// device.Streams, and fails its async copies (OpAsync) and Record
// (OpRecord) as armed. Its other optional interfaces stay hidden.
type StreamFaults struct {
	*Faults
	device.Streams
}

// NewStreamFaults returns b wrapped, with no fault armed; b must
// implement device.Streams.
func NewStreamFaults(b device.Backend) *StreamFaults {
	s, ok := b.(device.Streams)
	if !ok {
		panic(fmt.Sprintf("statetest: backend %T has no streams", b))
	}
	return &StreamFaults{Faults: NewFaults(b), Streams: s}
}

func (f *StreamFaults) CopyHtoDAsync(st device.Stream, dst device.Ptr, src []byte) error {
	if err := f.Check(OpAsync, "CopyHtoDAsync"); err != nil {
		return err
	}
	return f.Streams.CopyHtoDAsync(st, dst, src)
}

func (f *StreamFaults) CopyDtoHAsync(st device.Stream, dst []byte, src device.Ptr) error {
	if err := f.Check(OpAsync, "CopyDtoHAsync"); err != nil {
		return err
	}
	return f.Streams.CopyDtoHAsync(st, dst, src)
}

func (f *StreamFaults) Record(st device.Stream) (device.Event, error) {
	if err := f.Check(OpRecord, "Record"); err != nil {
		return nil, err
	}
	return f.Streams.Record(st)
}

// Counts wraps a backend and counts its calls and the bytes they move, by
// method name ("Alloc", "Free", "CopyHtoD", "CopyDtoH", "CopyDtoD",
// "Memset"), and keeps the allocations not freed yet. Like Faults it wraps
// device.Backend's methods only.
type Counts struct {
	device.Backend

	mu    sync.Mutex
	calls map[string]int
	bytes map[string]int64
	live  map[device.Ptr]int
}

// NewCounts returns b wrapped, with every count 0.
func NewCounts(b device.Backend) *Counts {
	return &Counts{Backend: b, calls: map[string]int{}, bytes: map[string]int64{}, live: map[device.Ptr]int{}}
}

// Live returns the allocations made through c and not freed yet, with
// their sizes (Reset leaves them).
func (c *Counts) Live() map[device.Ptr]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.live)
}

// Count adds a call of method moving n bytes; wrappers that add methods
// call it.
func (c *Counts) Count(method string, n int) {
	c.mu.Lock()
	c.calls[method]++
	c.bytes[method] += int64(n)
	c.mu.Unlock()
}

// Calls returns the calls of method counted since NewCounts or Reset.
func (c *Counts) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// Bytes returns the bytes the calls of method moved (allocated, copied
// or set) since NewCounts or Reset.
func (c *Counts) Bytes(method string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes[method]
}

// Reset sets every count to 0.
func (c *Counts) Reset() {
	c.mu.Lock()
	clear(c.calls)
	clear(c.bytes)
	c.mu.Unlock()
}

func (c *Counts) Alloc(n int) (device.Ptr, error) {
	c.Count("Alloc", n)
	p, err := c.Backend.Alloc(n)
	if err == nil {
		c.mu.Lock()
		c.live[p] = n
		c.mu.Unlock()
	}
	return p, err
}

func (c *Counts) Free(p device.Ptr) error {
	c.Count("Free", 0)
	c.mu.Lock()
	delete(c.live, p)
	c.mu.Unlock()
	return c.Backend.Free(p)
}

func (c *Counts) CopyHtoD(dst device.Ptr, src []byte) error {
	c.Count("CopyHtoD", len(src))
	return c.Backend.CopyHtoD(dst, src)
}

func (c *Counts) CopyDtoH(dst []byte, src device.Ptr) error {
	c.Count("CopyDtoH", len(dst))
	return c.Backend.CopyDtoH(dst, src)
}

func (c *Counts) CopyDtoD(dst, src device.Ptr, n int) error {
	c.Count("CopyDtoD", n)
	return c.Backend.CopyDtoD(dst, src, n)
}

func (c *Counts) Memset(dst device.Ptr, v byte, n int) error {
	c.Count("Memset", n)
	return c.Backend.Memset(dst, v, n)
}

// GatedFree wraps a backend whose Free, once armed, waits until the test
// lets it go: a Free that waits for work queued on streams, as a driver's
// does. Tests use it to check that no lock is held across the call.
type GatedFree struct {
	device.Backend

	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{}
}

// Arm makes every later Free wait: each sends on entered as it starts
// waiting, and waits until let is called (once is enough; more are no-ops).
func (g *GatedFree) Arm() (entered chan struct{}, let func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate, g.entered = make(chan struct{}), make(chan struct{}, 16)
	gate := g.gate
	var once sync.Once
	return g.entered, func() { once.Do(func() { close(gate) }) }
}

func (g *GatedFree) Free(p device.Ptr) error {
	g.mu.Lock()
	gate, entered := g.gate, g.entered
	g.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		<-gate
	}
	return g.Backend.Free(p)
}

// Plain wraps a backend and hides its optional interfaces (device.Streams,
// the batch copiers, AllocZeroes and the rest): only device.Backend's
// methods show, so that a test takes the store's paths for a minimal
// backend.
type Plain struct{ device.Backend }
