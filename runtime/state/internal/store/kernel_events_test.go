package store

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// countedEvents is a backend with streams whose events are counted: live
// (recorded, not closed), closed twice, used after their close.
type countedEvents struct {
	device.Backend
	device.Streams
	mu                    sync.Mutex
	live, dbl, afterClose int
	records               atomic.Int64
}

type countedEvent struct {
	device.Event
	b      *countedEvents
	closed atomic.Bool
}

func (e *countedEvent) Wait() error {
	if e.closed.Load() {
		e.b.mu.Lock()
		e.b.afterClose++
		e.b.mu.Unlock()
	}
	return e.Event.Wait()
}

func (e *countedEvent) Done() (bool, error) {
	if e.closed.Load() {
		e.b.mu.Lock()
		e.b.afterClose++
		e.b.mu.Unlock()
	}
	return e.Event.Done()
}

func (e *countedEvent) Close() error {
	e.b.mu.Lock()
	defer e.b.mu.Unlock()
	if !e.closed.CompareAndSwap(false, true) {
		e.b.dbl++
		return nil
	}
	e.b.live--
	return e.Event.Close()
}

func (b *countedEvents) Record(st device.Stream) (device.Event, error) {
	b.records.Add(1)
	ev, err := b.Streams.Record(st)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.live++
	b.mu.Unlock()
	return &countedEvent{Event: ev, b: b}, nil
}

func (b *countedEvents) WaitEvent(st device.Stream, ev device.Event) error {
	if e, ok := ev.(*countedEvent); ok {
		if e.closed.Load() {
			b.mu.Lock()
			b.afterClose++
			b.mu.Unlock()
		}
		ev = e.Event
	}
	return b.Streams.WaitEvent(st, ev)
}

func (b *countedEvents) counts() (live, dbl, after int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live, b.dbl, b.afterClose
}

// countedPool returns a pool over r's backend wrapped in countedEvents.
func countedPool(t *testing.T, r *statetest.StreamRig, opts PoolOptions) (*countedEvents, *Pool) {
	b := &countedEvents{Backend: r.Backend, Streams: r.Streams()}
	if opts.BlockBytes == 0 {
		opts.BlockBytes = keepRows * keepRowBytes
	}
	p := must[*Pool](t)(NewPool(b, opts))
	return b, p
}

func eventsBalanced(t *testing.T, b *countedEvents, p *Pool, what string) {
	t.Helper()
	if p != nil {
		p.WaitPending()
	}
	live, dbl, after := b.counts()
	if live != 0 || dbl != 0 || after != 0 {
		t.Errorf("%s: %d events live, %d closed twice, %d used after close", what, live, dbl, after)
	}
}

func permutations(n int) [][]int {
	if n == 1 {
		return [][]int{{0}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// TestKernelEventsBranchMergeReleaseOrders: a head with two streams
// recorded makes a device write; a branch of it and a branch of that
// branch share the events; the grandchild writes on a device too and is
// merged into the head and its parent; then each is released, in every
// order. Every event is closed once, none is used after its close.
func TestKernelEventsBranchMergeReleaseOrders(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		st2 := must[device.Stream](t)(r.Streams().NewStream())
		defer st2.Close()
		for _, merge := range []bool{false, true} {
			for _, order := range permutations(3) {
				t.Run(fmt.Sprintf("merge=%v/%v", merge, order), func(t *testing.T) {
					b, p := countedPool(t, r, PoolOptions{})
					h := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
					check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
					check(t, h.RecordStream(st2))
					fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
					check(t, h.RecordStream(st))
					c := must[*Head](t)(h.Branch())
					d := must[*Head](t)(c.Branch())
					fillOn(t, r, st, must[[][]device.Span](t)(d.WriteDevice(5, 6)), 0x6b)
					check(t, d.RecordStream(st))
					if merge {
						check(t, h.Merge(d))
						check(t, c.Merge(d))
					}
					check(t, c.Write(0, oneRow(0x22)))
					hs := []*Head{h, c, d}
					for _, i := range order {
						check(t, hs[i].Release())
					}
					check(t, st.Sync())
					check(t, st2.Sync())
					eventsBalanced(t, b, p, "after every release")
					check(t, p.Close())
				})
			}
		}
	})
}

// TestKernelEventsPoolCloseWithKernelEvents: heads that hold the events
// after their kernels (and a branch sharing them) are still live when the
// pool closes: the pool's close releases them; their events must be
// closed too.
func TestKernelEventsPoolCloseWithKernelEvents(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		b, p := countedPool(t, r, PoolOptions{})
		h := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
		check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
		fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
		check(t, h.RecordStream(st))
		c := must[*Head](t)(h.Branch())
		_ = c
		check(t, st.Sync())
		p.Close() // names the live handles
		eventsBalanced(t, b, nil, "after the pool closed")
		check(t, h.Release())
		check(t, c.Release())
		eventsBalanced(t, b, nil, "after the handles' release too")
	})
}

// TestKernelEventsRecordStreamAfterDeviceWrite: after a device write, the
// next call is a RecordStream that fails (a nil, closed or foreign
// stream; a released or invalidated head): it must not panic, leak the
// liveness check's event or close one twice, and a later RecordStream
// still marks the kernel's end.
func TestKernelEventsRecordStreamAfterDeviceWrite(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		other := statetest.HostStreamRig(t)
		foreign := must[device.Stream](t)(other.Streams().NewStream())
		defer foreign.Close()
		closed := must[device.Stream](t)(r.Streams().NewStream())
		check(t, closed.Close())
		for _, c := range []struct {
			name string
			st   device.Stream
		}{{"nil", nil}, {"closed", closed}, {"foreign", foreign}} {
			t.Run(c.name, func(t *testing.T) {
				b, p := countedPool(t, r, PoolOptions{})
				h := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
				check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
				s := must[*Snap](t)(h.Snapshot())
				release := holdFor(t, r, st, 100*time.Millisecond)
				fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
				func() {
					defer func() {
						if v := recover(); v != nil {
							t.Errorf("RecordStream(%s) panicked: %v", c.name, v)
						}
					}()
					if err := h.RecordStream(c.st); err == nil {
						t.Errorf("RecordStream(%s) answered nil", c.name)
					}
				}()
				check(t, h.RecordStream(st))
				check(t, s.Release())
				check(t, h.Write(0, oneRow(0x22)))
				release()
				check(t, st.Sync())
				keptRows(t, h, 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
				check(t, h.Release())
				eventsBalanced(t, b, p, "after the release")
				check(t, p.Close())
			})
		}
		t.Run("released", func(t *testing.T) {
			b, p := countedPool(t, r, PoolOptions{})
			h := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
			check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
			fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
			check(t, h.Release())
			if err := h.RecordStream(st); err == nil {
				t.Error("RecordStream of a released head answered nil")
			}
			check(t, st.Sync())
			eventsBalanced(t, b, p, "after the release")
			check(t, p.Close())
		})
		t.Run("invalidated", func(t *testing.T) {
			b, p := countedPool(t, r, PoolOptions{})
			l := keepLayout(false, Mutable)
			h := must[*Head](t)(p.NewHead(l, "s"))
			check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
			s := must[*Snap](t)(h.Snapshot())
			check(t, h.Write(0, oneRow(0x22)))
			c := must[*Head](t)(h.Branch())
			fillOn(t, r, st, must[[][]device.Span](t)(c.WriteDevice(2, 4)), 0x5a)
			check(t, h.Rollback(s))
			if err := c.RecordStream(st); err == nil {
				t.Error("RecordStream of an invalidated head answered nil")
			}
			check(t, st.Sync())
			check(t, c.Release())
			check(t, s.Release())
			check(t, h.Release())
			eventsBalanced(t, b, p, "after the release")
			check(t, p.Close())
		})
	})
}

// TestKernelEventsHistoryPaths: device writes on a checkpointed head under
// At, Step, VersionAt, Rollback, a branch and a shared adoption; after
// every handle goes, no event is live, closed twice or used after close,
// and nothing is pending.
func TestKernelEventsHistoryPaths(t *testing.T) {
	inc := func(rows, in [][]byte) ([][]byte, error) {
		for i := range rows[0] {
			rows[0][i]++
		}
		return rows, nil
	}
	cases := map[string]func(t *testing.T, r *statetest.StreamRig, p *Pool, st device.Stream){
		"at-step-rollback": func(t *testing.T, r *statetest.StreamRig, p *Pool, st device.Stream) {
			l := keepLayout(false, Mutable)
			l.Checkpoint = &CheckpointPolicy{Every: 2, Keep: 2}
			h := must[*Head](t)(p.NewHead(l, "s"))
			check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
			s := must[*Snap](t)(h.Snapshot())
			release := holdFor(t, r, st, 50*time.Millisecond)
			fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
			check(t, h.RecordStream(st))
			v := h.Version()
			check(t, h.StepHost(nil, true, inc))
			a := must[*Snap](t)(h.At(v))
			release()
			check(t, st.Sync())
			keptRows(t, a, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
			fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(5, 6)), 0x6b)
			b := must[*Head](t)(h.Branch())
			fillOn(t, r, st, must[[][]device.Span](t)(b.WriteDevice(0, 1)), 0x7c)
			check(t, b.RecordStream(st))
			_, _ = b.VersionAt(8)
			check(t, h.Rollback(s))
			check(t, st.Sync())
			check(t, a.Release())
			check(t, b.Release())
			check(t, s.Release())
			check(t, h.Release())
		},
		"shared": func(t *testing.T, r *statetest.StreamRig, p *Pool, st device.Stream) {
			sl := sharedKernelLayout()
			a := must[*Head](t)(p.NewSharedHead(sl, "a", "d"))
			check(t, a.RecordStream(st))
			release := holdFor(t, r, st, 50*time.Millisecond)
			tokFill(t, r, st, must[[][]device.Span](t)(a.AppendDevice(tokPer)), 0x5a)
			check(t, a.Append([][]byte{bytes.Repeat([]byte{1}, tokBytes)}))
			keys := bytes.Repeat([]byte{0x5a}, (tokPer+1)*tokBytes)
			c := must[*Head](t)(p.NewSharedHead(sl, "c", "d"))
			_, _ = c.AdoptPrefix(keys)
			release()
			check(t, st.Sync())
			d := must[*Head](t)(p.NewSharedHead(sl, "c", "d"))
			n := must[int](t)(d.AdoptPrefix(keys))
			if n != tokPer {
				t.Errorf("adopted %d", n)
			}
			check(t, a.Release())
			check(t, c.Release())
			check(t, d.Release())
		},
	}
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		for name, c := range cases {
			t.Run(name, func(t *testing.T) {
				opts := PoolOptions{}
				if name == "shared" {
					opts.BlockBytes = tokPer * tokBytes
				}
				b, p := countedPool(t, r, opts)
				st := must[device.Stream](t)(r.Streams().NewStream())
				defer st.Close()
				c(t, r, p, st)
				p.ForgetPrefixes("d")
				eventsBalanced(t, b, p, "after every release")
				if ps := p.Stats(); ps.PendingBytes != 0 || ps.PhysicalBytes != 0 {
					t.Errorf("after every release: %+v", ps)
				}
				check(t, p.Close())
			})
		}
	})
}
