package store

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// hsFlaky is recur as a HostStepper that fails (or panics) on every
// run after its first n: a replay meets the failure.
type hsFlaky struct {
	runs  *int
	n     int
	panic bool
	exit  bool // ends its goroutine instead (runtime.Goexit, as t.FailNow does)
}

func (f hsFlaky) StepHost(rows, in [][]byte) error {
	*f.runs++
	if *f.runs > f.n {
		switch {
		case f.exit:
			runtime.Goexit()
		case f.panic:
			panic("host step: replay panicked")
		}
		return errHostStep
	}
	recur(rows, in)
	return nil
}

// TestReplayFailureLeavesNothing: a host step that runs fine when
// stepped but fails or panics when At replays it: At answers the error
// (or the panic reaches the caller), the head is as it was and usable,
// and once every handle is released the pool holds no block: the failed
// reconstruction gave back what it took.
func TestReplayFailureLeavesNothing(t *testing.T) {
	for _, be := range hsBackends() {
		for _, panics := range []bool{false, true} {
			t.Run(fmt.Sprint(be.name, panics), func(t *testing.T) {
				p := hsPool(t, be.b(), PoolOptions{BlockBytes: 256})
				h := must[*Head](t)(p.NewHead(hsRecL(Mandatory, 8, 2), "a"))
				runs := 0
				f := hsFlaky{runs: &runs, n: 4, panic: panics}
				cur := readAll(t, h)
				for i := range 4 {
					in := [][]byte{{byte(i), 1}}
					check(t, h.StepHostWith(in, false, f))
					recur(cur, in)
				}
				v := h.Version()
				live := p.Stats()
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							err = fmt.Errorf("panicked: %v", r)
						}
					}()
					var s *Snap
					s, err = h.At(v)
					if err == nil {
						s.Release()
					}
				}()
				if err == nil {
					t.Fatal("At replaying a failing step succeeded")
				}
				if !panics && !errors.Is(err, errHostStep) {
					t.Fatalf("At: %v, want the step's error", err)
				}
				if got := readAll(t, h); !equalCols(got, cur) || h.Version() != v {
					t.Fatal("the failed At changed the head")
				}
				if st := p.Stats(); st.Blocks != live.Blocks || st.Live != live.Live {
					t.Errorf("after the failed At the pool holds %d blocks, %d handles; had %d, %d", st.Blocks, st.Live, live.Blocks, live.Live)
				}
				check(t, h.Release())
				if st := p.Stats(); st.Blocks != 0 {
					t.Errorf("%d blocks in use after every handle is released", st.Blocks)
				}
			})
		}
	}
}

// TestRestoreReplayPanicKeepsTheHead: a host step that fails after
// writing its rows in place has the head rebuilt by replaying the steps
// since its checkpoint (restoreInPlace); when one of those panics on its
// replay, the panic reaches the caller, and the head must still be a
// head: its calls answer (an error, or its rows), none crashes.
func TestRestoreReplayPanicKeepsTheHead(t *testing.T) {
	for _, be := range hsBackends() {
		t.Run(be.name, func(t *testing.T) {
			p := hsPool(t, be.b(), PoolOptions{BlockBytes: 256})
			h := must[*Head](t)(p.NewHead(hsRecL(Mandatory, 8, 2), "a"))
			runs := 0
			f := hsFlaky{runs: &runs, n: 3, panic: true}
			for i := range 3 {
				check(t, h.StepHostWith([][]byte{{byte(i), 1}}, false, f))
			}
			v := h.Version()
			func() {
				defer func() { recover() }()
				h.StepHostWith([][]byte{{9}}, false, hsBad{"fail"})
			}()
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("a call on the head after the failed restore panicked: %v", r)
					}
				}()
				dst := [][]byte{make([]byte, 40*16), make([]byte, 40*8)}
				if rerr := h.Read(0, 40, dst); rerr != nil {
					t.Logf("Read after the failed restore: %v", rerr)
				}
				if h.Version() != v {
					err = fmt.Errorf("the head is at version %d, was %d", h.Version(), v)
				}
				h.Stats()
				_ = h.Len()
			}()
			if err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("Release after the failed restore panicked: %v", r)
					}
				}()
				h.Release()
			}()
		})
	}
}

// hsWithin runs f in a goroutine and reports whether it returned
// within d (a call that blocks on a lock a panic left held does not).
func hsWithin(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { recover() }()
		f()
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestReplayPanicUnlocks: a step function that panics, or ends its
// goroutine (runtime.Goexit, as t.FailNow does), while a group's At or
// an evicted reconstructable head's rebuild replays it: a panic is the
// call's error, and either way no lock is left held and nothing the
// replay took is kept. The calls that follow return, and once every
// handle is released the pool holds no block. The pools are closed only
// once those calls return: a lock left held would hang Close.
func TestReplayPanicUnlocks(t *testing.T) {
	for _, exit := range []bool{false, true} {
		t.Run(fmt.Sprint("GroupAt/exit=", exit), func(t *testing.T) {
			p, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256})
			check(t, err)
			fixedModel(p)
			g := must[*Group](t)(NewGroup(p, "a", checkpointedKV(), recLayout(8, 2, Invalidate)))
			kvH, recH := g.Head(0), g.Head(1)
			runs := 0
			f := hsFlaky{runs: &runs, n: 3, panic: true, exit: exit}
			for i := range 3 {
				check(t, recH.StepHostWith([][]byte{{byte(i), 1}}, false, f))
				check(t, kvH.Append(kvRows(1, byte(i))))
			}
			v := kvH.Version()
			err, panicked := replayCall(exit, func() error {
				s, err := g.At(v)
				if err == nil {
					s.Release()
				}
				return err
			})
			if !exit && (panicked || err == nil || !strings.Contains(err.Error(), "panicked")) {
				t.Fatalf("At replaying a panicking step: panicked %v, error %v; want an error naming the panic", panicked, err)
			}
			if !hsWithin(2*time.Second, func() { kvH.Len(); kvH.Append(kvRows(1, 9)) }) {
				t.Fatal("after Group.At's replay, a call on the group's first member blocks: its lock is still held")
			}
			if !hsWithin(2*time.Second, func() {
				if s, err := g.Snapshot(); err == nil {
					s.Release()
				}
			}) {
				t.Fatal("after Group.At's replay, a call on the group blocks: its lock is still held")
			}
			check(t, g.Release())
			if st := p.Stats(); st.Blocks != 0 || st.Live != 0 {
				t.Errorf("after every handle's release the pool holds %d blocks and %d handles", st.Blocks, st.Live)
			}
			check(t, p.Close())
		})
		t.Run(fmt.Sprint("Rebuild/exit=", exit), func(t *testing.T) {
			p, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256, MaxBytes: 40 * 256})
			check(t, err)
			fixedModel(p)
			h := must[*Head](t)(p.NewHead(hsRecL(Reconstructable, 8, 2), "r"))
			runs := 0
			f := hsFlaky{runs: &runs, n: 3, panic: true, exit: exit}
			for i := range 3 {
				check(t, h.StepHostWith([][]byte{{byte(i), 1}}, false, f))
			}
			var ms []*Head
			for i := 0; !h.evicted; i++ {
				m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), Owner(fmt.Sprint("m", i))))
				ms = append(ms, m)
				if err := m.Append(wideRow(byte(i))); err != nil {
					t.Fatalf("filling the pool: %v", err)
				}
			}
			for _, m := range ms {
				check(t, m.Release())
			}
			h.Stats() // no rebuild
			err, panicked := replayCall(exit, func() error {
				dst := [][]byte{make([]byte, 16), make([]byte, 8)}
				return h.Read(0, 1, dst) // the rebuild replays the steps
			})
			if !exit && (panicked || err == nil || !strings.Contains(err.Error(), "panicked")) {
				t.Fatalf("a rebuild replaying a panicking step: panicked %v, error %v; want an error naming the panic", panicked, err)
			}
			if !hsWithin(2*time.Second, func() { h.Release() }) {
				t.Fatal("after the rebuild's replay, a call on the head blocks: its lock is still held")
			}
			if st := p.Stats(); st.Blocks != 0 || st.Live != 0 {
				t.Errorf("after every handle's release the pool holds %d blocks and %d handles", st.Blocks, st.Live)
			}
			check(t, p.Close())
		})
	}
}

// replayCall runs call, whose replay meets a step function that panics
// or, with exit, ends its goroutine: in a goroutine of its own then, which
// it waits for. It reports whether a panic reached it.
func replayCall(exit bool, call func() error) (err error, panicked bool) {
	if exit {
		inExitingGoroutine(func() { call() })
		return nil, false
	}
	defer func() {
		if v := recover(); v != nil {
			panicked = true
		}
	}()
	return call(), false
}

// inExitingGoroutine runs f in a goroutine of its own, which a step
// function may end (runtime.Goexit), and waits for it.
func inExitingGoroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}
