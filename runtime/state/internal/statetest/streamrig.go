package statetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// The kernels a StreamRig's tests launch: FillKernel sets n bytes at dst
// (arguments dst device.Ptr, value uint32, n uint64; Go on the host
// backend, a built-in of the fake CUDA driver there); GateKernel blocks
// its stream until the test opens the gate (host backend only). StreamPTX
// is the module text that holds them.
const (
	FillKernel = "gpustate_fake_fill"
	GateKernel = "gpustate_state_gate"
	StreamPTX  = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry gpustate_fake_fill(.param .u64 a, .param .u32 b, .param .u64 c) { ret; }\n"
)

// gate is what GateKernel waits on: the channel of the last gate closed.
var gate struct {
	sync.Mutex
	ch chan struct{}
}

func init() {
	err := errors.Join(
		device.RegisterHostKernel(FillKernel, func(mem device.HostMemory, _, _ device.Dim3, args []any) error {
			b, err := mem.Bytes(args[0].(device.Ptr), int(args[2].(uint64)))
			if err != nil {
				return err
			}
			for i := range b {
				b[i] = byte(args[1].(uint32))
			}
			return nil
		}),
		device.RegisterHostKernel(GateKernel, func(device.HostMemory, device.Dim3, device.Dim3, []any) error {
			gate.Lock()
			ch := gate.ch
			gate.Unlock()
			<-ch
			return nil
		}),
	)
	if err != nil {
		panic(err)
	}
}

// StreamRig is a backend with streams and kernels, and a way to hold a
// stream's queued work back until Release: the host backend
// (HostStreamRig), or the CUDA backend over the fake driver
// (FakeStreamRig). EachStreamRig runs a test on both.
type StreamRig struct {
	Backend device.Backend
	Fill    device.Function // FillKernel, loaded
	// Hold queues, on st, work that holds the stream back until Release.
	Hold    func(t *testing.T, st device.Stream)
	Release func()
	// Polls returns the events polled so far (Done); nil where not
	// counted.
	Polls func() int64
}

// Streams returns the rig's backend as device.Streams.
func (r *StreamRig) Streams() device.Streams { return r.Backend.(device.Streams) }

// Kernels returns the rig's backend as device.Kernels.
func (r *StreamRig) Kernels() device.Kernels { return r.Backend.(device.Kernels) }

// EachStreamRig runs test on the host backend's rig and on the fake
// driver's, each in a subtest ("host", "fakecuda").
func EachStreamRig(t *testing.T, test func(*testing.T, *StreamRig)) {
	for _, c := range []struct {
		name string
		rig  func(*testing.T) *StreamRig
	}{{"host", HostStreamRig}, {"fakecuda", FakeStreamRig}} {
		t.Run(c.name, func(t *testing.T) { test(t, c.rig(t)) })
	}
}

// LoadFill loads FillKernel on b, which must implement device.Kernels.
func LoadFill(t *testing.T, b device.Backend) device.Function {
	t.Helper()
	m, err := b.(device.Kernels).LoadModule(StreamPTX)
	if err != nil {
		t.Fatal(err)
	}
	f, err := m.Function(FillKernel)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// HostStreamRig returns the host backend's rig, its backend closed when t
// ends: Hold launches GateKernel behind a gate that Release opens.
func HostStreamRig(t *testing.T) *StreamRig {
	b := Host(t)
	m, _ := b.(device.Kernels).LoadModule(StreamPTX)
	gk, err := m.Function(GateKernel)
	if err != nil {
		t.Fatal(err)
	}
	r := &StreamRig{Backend: b, Fill: LoadFill(t, b)}
	var ch chan struct{}
	r.Hold = func(t *testing.T, st device.Stream) {
		ch = make(chan struct{})
		gate.Lock()
		gate.ch = ch
		gate.Unlock()
		if err := r.Kernels().Launch(st, gk, device.Dim3{}, device.Dim3{}, 0); err != nil {
			t.Fatal(err)
		}
	}
	r.Release = func() { close(ch) }
	return r
}

// HostGate closes a new gate and returns GateKernel, loaded on the host
// backend b, and the func that opens the gate (once; later calls do
// nothing), which a test defers so that a stream it holds drains.
func HostGate(t *testing.T, b device.Backend) (device.Function, func()) {
	t.Helper()
	ch := make(chan struct{})
	gate.Lock()
	gate.ch = ch
	gate.Unlock()
	m, err := b.(device.Kernels).LoadModule(StreamPTX)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := m.Function(GateKernel)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return fn, func() { once.Do(func() { close(ch) }) }
}
