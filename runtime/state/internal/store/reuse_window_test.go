package store_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/examples/replay/buffer"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// transitions returns rows [from, from+n) of learner id: row i's Action is
// id*1e6+i, its Obs and Reward follow from it.
func transitions(id, from, n int) buffer.Transition {
	t := buffer.Transition{Obs: make([]float32, 4*n), Action: make([]int32, n), Reward: make([]float32, n)}
	for j := range n {
		a := int32(id*1_000_000 + from + j)
		t.Action[j] = a
		t.Obs[4*j+3] = float32(a)
		t.Reward[j] = float32(-a)
	}
	return t
}

// windowCheck reports where rows [from, to) of r (a state or snapshot of
// learner id) differ from what the learner appended.
func windowCheck(r interface {
	Read(from, to int) (buffer.Transition, error)
}, id, from, to int) error {
	got, err := r.Read(from, to)
	if err != nil {
		return err
	}
	for j := range to - from {
		a := int32(id*1_000_000 + from + j)
		if got.Action[j] != a || got.Obs[4*j+3] != float32(a) || got.Reward[j] != float32(-a) {
			return fmt.Errorf("row %d reads action %d, want %d", from+j, got.Action[j], a)
		}
	}
	return nil
}

// learner appends past its window, snapshotting as it goes: each snapshot
// keeps reading its window's rows while the state's window moves on and
// expired blocks (and released roots) go back to the pool.
func learner(p *state.Pool, id, rounds int) error {
	s, err := buffer.NewTransitionState(p, state.Owner(fmt.Sprint("l", id)))
	if err != nil {
		return err
	}
	defer s.Release()
	type kept struct {
		v        *buffer.TransitionSnapshot
		from, to int
	}
	var keep []kept
	defer func() {
		for _, k := range keep {
			k.v.Release()
		}
	}()
	for r := range rounds {
		n := 1 + r%37
		if err := s.Append(transitions(id, s.Len(), n)); err != nil {
			return err
		}
		if err := windowCheck(s, id, s.Oldest(), s.Len()); err != nil {
			return fmt.Errorf("round %d state: %w", r, err)
		}
		v, err := s.Snapshot()
		if err != nil {
			return err
		}
		keep = append(keep, kept{v, v.Oldest(), v.Len()})
		if len(keep) > 5 {
			keep[r%5].v.Release()
			keep = append(keep[:r%5], keep[r%5+1:]...)
		}
		for i, k := range keep {
			if err := windowCheck(k.v, id, k.from, k.to); err != nil {
				return fmt.Errorf("round %d snapshot %d [%d, %d): %w", r, i, k.from, k.to, err)
			}
		}
	}
	return nil
}

// Learners filling their windows side by side, snapshots kept and released
// out of order: every window reads its own learner's rows, and the pool
// ends empty.
func TestReuseWindows(t *testing.T) {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for id := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := learner(p, id+1, 150); err != nil {
				errs <- fmt.Errorf("learner %d: %w", id+1, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 || st.LogicalBytes != 0 {
		t.Errorf("after every handle's release: %+v", st)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// One state shared by goroutines: readers of a snapshot race its release,
// others snapshot and branch the head while a writer appends and rolls
// back. A read answers the snapshot's rows or ErrReleased, never the rows
// of the root its release gave back.
func TestReuseOneStateManyGoroutines(t *testing.T) {
	p := breakPool(t)
	defer p.Close()
	s, err := cache.NewKVCacheState(p, "shared")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if err := s.Append(kvRows([]int32{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	for round := range 60 {
		if err := raceRound(s, round); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// Back to the three rows: the rollback ran (or v was released
		// first, and the head keeps the appends).
		if n := s.Len(); n != 3 {
			if err := s.Rollback(nil); err == nil {
				t.Fatal("a rollback to nil answers nil")
			}
			s.Release()
			if s, err = cache.NewKVCacheState(p, "shared"); err != nil {
				t.Fatal(err)
			}
			if err := s.Append(kvRows([]int32{1, 2, 3})); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Release()
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
		t.Errorf("after every handle's release: %+v", st)
	}
}

// raceRound is one round of TestReuseOneStateManyGoroutines: readers
// of a snapshot of s race its release, a writer appends and rolls back to
// it, and another goroutine snapshots and branches s.
func raceRound(s *cache.KVCacheState, round int) error {
	v, err := s.Snapshot()
	if err != nil {
		return err
	}
	base := slices.Clone([]int32{1, 2, 3})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 3 { // readers of v, racing its release
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				err := kvCheck(v, base)
				if errors.Is(err, state.ErrReleased) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("a snapshot read: %w", err)
					return
				}
			}
		}()
	}
	wg.Add(2)
	go func() { // the writer: its roots may be the one v's release gives back
		defer wg.Done()
		for i := range 10 {
			if err := s.Append(kvRows([]int32{int32(100*round + i)})); err != nil {
				errs <- err
				return
			}
		}
		if err := s.Rollback(v); err != nil && !errors.Is(err, state.ErrReleased) {
			errs <- fmt.Errorf("rollback: %w", err)
		}
	}()
	go func() { // snapshots and branches of the head, taken and dropped
		defer wg.Done()
		for range 10 {
			w, err := s.Snapshot()
			if err != nil {
				errs <- err
				return
			}
			b, err := s.Branch()
			if err != nil {
				w.Release()
				errs <- err
				return
			}
			for _, r := range []kvReader{w, b} { // the writer's rows so far
				want := slices.Clone(base)
				for i := range max(0, r.Len()-3) {
					want = append(want, int32(100*round+i))
				}
				if err := kvCheck(r, want); err != nil && !errors.Is(err, state.ErrInvalidated) {
					errs <- fmt.Errorf("a snapshot or branch taken while the writer ran: %w", err)
				}
			}
			b.Release()
			w.Release()
		}
	}()
	time.Sleep(time.Duration(round%4) * 100 * time.Microsecond)
	v.Release()
	wg.Wait()
	close(errs)
	return <-errs // nil once closed and empty
}
