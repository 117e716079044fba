package store

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Helpers of the tests of queued work (queued_*_test.go): per-launch gates (a stream waits on its own gate), a
// snoop kernel that copies device bytes into a host slice when it runs,
// and a fill kernel.

const (
	queuedGateKernel  = "queued_gate"
	queuedSnoopKernel = "queued_snoop"
	queuedModule      = ".version 7.0\n.target sm_80\n.address_size 64\n"
)

var queued struct {
	sync.Mutex
	next   uint64
	gates  map[uint64]chan struct{}
	snoops map[uint64][]byte
}

func init() {
	queued.gates = map[uint64]chan struct{}{}
	queued.snoops = map[uint64][]byte{}
	if err := device.RegisterHostKernel(queuedGateKernel, func(_ device.HostMemory, _, _ device.Dim3, args []any) error {
		queued.Lock()
		ch := queued.gates[args[0].(uint64)]
		queued.Unlock()
		<-ch
		return nil
	}); err != nil {
		panic(err)
	}
	if err := device.RegisterHostKernel(queuedSnoopKernel, func(mem device.HostMemory, _, _ device.Dim3, args []any) error {
		b, err := mem.Bytes(args[0].(device.Ptr), int(args[1].(uint64)))
		if err != nil {
			return err
		}
		queued.Lock()
		queued.snoops[args[2].(uint64)] = bytes.Clone(b)
		queued.Unlock()
		return nil
	}); err != nil {
		panic(err)
	}
}

// queuedRig is a host backend with streams and the queued kernels.
type queuedRig struct {
	b     device.Backend
	sb    device.Streams
	gate  device.Function
	snoop device.Function
	fill  device.Function
}

func newQueuedRig(t *testing.T) *queuedRig {
	t.Helper()
	b := statetest.Host(t)
	m, err := b.(device.Kernels).LoadModule(queuedModule)
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Function(queuedGateKernel)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Function(queuedSnoopKernel)
	if err != nil {
		t.Fatal(err)
	}
	return &queuedRig{b: b, sb: b.(device.Streams), gate: g, snoop: s, fill: statetest.LoadFill(t, b)}
}

func (r *queuedRig) stream(t *testing.T) device.Stream {
	t.Helper()
	st, err := r.sb.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// hold queues a gate on st and returns its opener (idempotent, also run
// at cleanup, before the stream closes: cleanups run in reverse).
func (r *queuedRig) hold(t *testing.T, st device.Stream) func() {
	t.Helper()
	queued.Lock()
	queued.next++
	id := queued.next
	ch := make(chan struct{})
	queued.gates[id] = ch
	queued.Unlock()
	if err := r.b.(device.Kernels).Launch(st, r.gate, device.Dim3{}, device.Dim3{}, 0, id); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	open := func() { once.Do(func() { close(ch) }) }
	t.Cleanup(open)
	return open
}

// snoopOn queues a kernel on st that copies n bytes at p when it runs;
// the returned func gives them (after the stream ran it).
func (r *queuedRig) snoopOn(t *testing.T, st device.Stream, p device.Ptr, n int) func() []byte {
	t.Helper()
	queued.Lock()
	queued.next++
	id := queued.next
	queued.Unlock()
	if err := r.b.(device.Kernels).Launch(st, r.snoop, device.Dim3{}, device.Dim3{}, 0, p, uint64(n), id); err != nil {
		t.Fatal(err)
	}
	return func() []byte {
		queued.Lock()
		defer queued.Unlock()
		return queued.snoops[id]
	}
}

func (r *queuedRig) fillOn(t *testing.T, st device.Stream, p device.Ptr, v byte, n int) {
	t.Helper()
	if err := r.b.(device.Kernels).Launch(st, r.fill, device.Dim3{}, device.Dim3{X: 1}, 0, p, uint32(v), uint64(n)); err != nil {
		t.Fatal(err)
	}
}

// openAfter opens a gate after d from another goroutine, for calls that
// wait for the stream.
func openAfter(open func(), d time.Duration) {
	go func() { time.Sleep(d); open() }()
}

// qwModel is the rows a head should read.
type qwModel [][]byte

func (m qwModel) add(b [][]byte) qwModel { return concat(m, b) }

func (m qwModel) upTo(n int) qwModel {
	return qwModel{bytes.Clone(m[0][:n*16]), bytes.Clone(m[1][:n*8])}
}

func queuedheck(t *testing.T, what string, x reader, m qwModel) {
	t.Helper()
	if x.Len() != len(m[0])/16 {
		t.Errorf("%s: Len %d, model %d", what, x.Len(), len(m[0])/16)
		return
	}
	got := readAll(t, x)
	if !equalCols(got, m) {
		for i := 0; i < x.Len(); i++ {
			if !bytes.Equal(got[0][i*16:i*16+16], m[0][i*16:i*16+16]) || !bytes.Equal(got[1][i*8:i*8+8], m[1][i*8:i*8+8]) {
				t.Errorf("%s: row %d reads %x/%x, model %x/%x", what, i, got[0][i*16:i*16+16], got[1][i*8:i*8+8], m[0][i*16:i*16+16], m[1][i*8:i*8+8])
				return
			}
		}
	}
}

// qwLeaks fails unless p holds nothing once everything is released.
func qwLeaks(t *testing.T, p *Pool) {
	t.Helper()
	done := make(chan int64, 1)
	go func() { done <- p.WaitPending() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPending did not return in 5s")
	}
	s := p.Stats()
	if s.PhysicalBytes != 0 || s.PendingBytes != 0 || s.Live != 0 || s.LogicalBytes != 0 || s.Blocks != 0 || s.HistoryBytes != 0 || s.TierBytes != 0 {
		t.Errorf("after releasing everything: physical %d pending %d live %d logical %d blocks %d history %d tier %d",
			s.PhysicalBytes, s.PendingBytes, s.Live, s.LogicalBytes, s.Blocks, s.HistoryBytes, s.TierBytes)
	}
}

// within runs f and fails t if it takes longer than d (a deadlock).
func qwWithin(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still running after %v (deadlock?)", what, d)
	}
}

var _ = atomic.Int64{}
