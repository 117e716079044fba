package store

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// recordFails is a backend whose Record fails while fail is set.
type recordFails struct {
	device.Backend
	device.Streams
	fail atomic.Bool
}

func (b *recordFails) Record(st device.Stream) (device.Event, error) {
	if b.fail.Load() {
		return nil, errors.New("record: injected failure")
	}
	return b.Streams.Record(st)
}

// TestFenceWaitsForItsStreamAlone: blocks freed while a stream recorded
// on them may still use them, where the backend fails to record the event
// that fences them, wait for that stream's work alone. They waited for
// the whole device: a kernel held on another stream kept them pending
// meanwhile, and an allocation that had evicted state for their room
// failed anyway (seed 3004 of the interaction model).
func TestFenceWaitsForItsStreamAlone(t *testing.T) {
	r := statetest.HostStreamRig(t)
	be := &recordFails{Backend: r.Backend, Streams: r.Streams()}
	p, err := NewPool(be, PoolOptions{BlockBytes: 256})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	used, err := r.Streams().NewStream()
	check(t, err)
	defer used.Close()
	held, err := r.Streams().NewStream()
	check(t, err)
	defer held.Close()

	h := must[*Head](t)(p.NewHead(wide("Cache", Optional), "a"))
	fill(t, h, 2, 1)
	check(t, h.RecordStream(used))
	r.Hold(t, held)
	var once sync.Once
	release := func() { once.Do(r.Release) }
	defer release()

	be.fail.Store(true)
	check(t, h.Release())
	be.fail.Store(false)
	for deadline := time.Now().Add(5 * time.Second); p.Stats().PendingBytes != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still pending behind a stream that finished its work, while another stream is held", p.Stats().PendingBytes)
		}
	}
	release()
	checkInv(t, p)
}
