package peerbench

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// rpPool returns a pool made with opt on the host backend, or (bk
// "counts") on a wrapper of it that the store does not take for host
// memory, so that it copies rows out and back; the backend is closed when
// the test ends.
func rpPool(t *testing.T, bk string, opt state.PoolOptions) *state.Pool {
	t.Helper()
	var b device.Backend = device.Host()
	if bk == "counts" {
		b = hsWrap{device.Host()}
	}
	t.Cleanup(func() { b.Close() })
	p, err := state.NewPool(b, opt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rpSafe runs f, turning a panic into an error.
func rpSafe(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("PANIC: %v", r)
		}
	}()
	return f()
}

// rpStep applies the reference step to cur.
func rpStep(cur []float32, in RecIn) {
	for k := range RecRows {
		recur(cur[k*RecDim:(k+1)*RecDim], in.X[k*InDim:(k+1)*InDim])
	}
}

// TestConcurrentStepHost: many goroutines step states of one type
// through StepHost with one shared step function value (one shared
// Scratch), read back, take At of old versions (replays, which use the
// Scratch too) and roll back; every state must read as its reference.
func TestConcurrentStepHost(t *testing.T) {
	for _, name := range []string{"host", "counts"} {
		t.Run(name, func(t *testing.T) {
			p := rpPool(t, name, state.PoolOptions{})
			f := recurStep // one value, shared
			var kept atomic.Pointer[RecR]
			keeper := func(rows *RecR, in RecIn) error { // keeps rows past the call
				kept.Store(rows)
				return recurStep(rows, in)
			}
			const G = 8
			var wg sync.WaitGroup
			errs := make(chan error, G)
			for g := range G {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- func() error {
						s, err := NewRecRState(p, state.Owner(fmt.Sprint("g", g)))
						if err != nil {
							return err
						}
						defer s.Release()
						cur := make([]float32, RecRows*RecDim)
						ref := map[state.Version][]float32{}
						var snap *RecRSnapshot
						var snapCur []float32
						for i := range 60 {
							in := hsInput(g*1000 + i)
							ff := f
							if i%5 == 3 {
								ff = keeper
							}
							if err := s.StepHost(in, ff); err != nil {
								return err
							}
							rpStep(cur, in)
							ref[s.Version()] = slices.Clone(cur)
							got, err := s.Read(0, RecRows)
							if err != nil {
								return err
							}
							if !slices.Equal(got.H, cur) {
								return fmt.Errorf("g%d step %d: reads otherwise", g, i)
							}
							if i == 30 {
								snap, err = s.Snapshot()
								if err != nil {
									return err
								}
								snapCur = slices.Clone(cur)
							}
							if i%7 == 6 {
								for v, want := range ref {
									a, err := s.At(v)
									if err != nil {
										if errors.Is(err, state.ErrNotRetained) {
											delete(ref, v)
											continue
										}
										return err
									}
									got, err := a.Read(0, RecRows)
									a.Release()
									if err != nil {
										return err
									}
									if !slices.Equal(got.H, want) {
										return fmt.Errorf("g%d: At(%d) reads otherwise", g, v)
									}
								}
							}
						}
						if err := s.Rollback(snap); err != nil {
							return err
						}
						snap.Release()
						got, err := s.Read(0, RecRows)
						if err != nil {
							return err
						}
						if !slices.Equal(got.H, snapCur) {
							return fmt.Errorf("g%d: rollback reads otherwise", g)
						}
						return nil
					}()
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			if r := kept.Load(); r != nil && r.H != nil {
				t.Errorf("a kept *RecR still holds rows after the call: %d floats", len(r.H))
			}
			if st := p.Stats(); st.Blocks != 0 {
				t.Errorf("Blocks = %d after everything was released", st.Blocks)
			}
			if err := p.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// rpFlaky returns a step function that computes recurStep while on is
// true and panics (or fails) otherwise.
func rpFlaky(on *atomic.Bool, panics bool) func(rows *RecR, in RecIn) error {
	return func(rows *RecR, in RecIn) error {
		if !on.Load() {
			clear(rows.H)
			if panics {
				panic("replay: replay panics")
			}
			return errors.New("replay: replay fails")
		}
		return recurStep(rows, in)
	}
}

// TestReplayPanics: a step function that panics (or fails) when it is
// replayed: At must return an error, not panic; the state stays usable
// (Read, StepHost, Snapshot); a failed step, whose restore replays the
// bad function, returns an error and not a panic; Release and Close
// return and the pool's blocks go back to 0.
func TestReplayPanics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend string
		panics  bool
	}{
		{"panic/host", "host", true},
		{"panic/counts", "counts", true},
		{"fail/host", "host", false},
		{"fail/counts", "counts", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rpPool(t, tc.backend, state.PoolOptions{})
			s, err := NewRecRState(p, "me")
			if err != nil {
				t.Fatal(err)
			}
			var on atomic.Bool
			on.Store(true)
			bad := rpFlaky(&on, tc.panics)
			cur := make([]float32, RecRows*RecDim)
			vers := []state.Version{}
			refs := [][]float32{}
			var early *RecRSnapshot
			for i := range 20 {
				in := hsInput(i)
				if err := s.StepHost(in, bad); err != nil {
					t.Fatal(err)
				}
				rpStep(cur, in)
				vers = append(vers, s.Version())
				refs = append(refs, slices.Clone(cur))
				if i == 17 {
					early, err = s.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			on.Store(false)
			// At of a version that needs replay (a checkpoint every 16).
			for _, k := range []int{17, 18} {
				err := rpSafe(func() error {
					a, err := s.At(vers[k])
					if err == nil {
						a.Release()
					}
					return err
				})
				if err == nil {
					t.Errorf("At(%d) with a step that %s on replay succeeded", vers[k], tc.name)
				} else if len(err.Error()) > 6 && err.Error()[:6] == "PANIC:" {
					t.Errorf("At(%d) panicked: %v", vers[k], err)
				}
			}
			// The state is usable.
			got, err := s.Read(0, RecRows)
			if err != nil || !slices.Equal(got.H, cur) {
				t.Fatalf("Read after a failed At: %v (equal %v)", err, slices.Equal(got.H, cur))
			}
			// A failed step whose restore replays the bad function.
			stepErr := rpSafe(func() error {
				return s.StepHost(hsInput(99), func(rows *RecR, in RecIn) error {
					clear(rows.H)
					return errHostStep
				})
			})
			if stepErr == nil || len(stepErr.Error()) > 6 && stepErr.Error()[:6] == "PANIC:" {
				t.Errorf("StepHost failing, its restore replaying a bad step: %v", stepErr)
			}
			t.Logf("failed step: %v", stepErr)
			// Rollback to a snapshot that holds its rows.
			rbErr := rpSafe(func() error { return s.Rollback(early) })
			t.Logf("rollback: %v", rbErr)
			if rbErr != nil && len(rbErr.Error()) > 6 && rbErr.Error()[:6] == "PANIC:" {
				t.Errorf("Rollback panicked: %v", rbErr)
			}
			// With the function good again, the state comes back.
			on.Store(true)
			rdErr := rpSafe(func() error {
				got, err := s.Read(0, RecRows)
				if err != nil {
					return err
				}
				want := refs[19]
				if rbErr == nil {
					want = refs[17]
				}
				if !slices.Equal(got.H, want) {
					return errors.New("reads otherwise")
				}
				return nil
			})
			if rdErr != nil {
				t.Errorf("Read once the step is good again: %v", rdErr)
			}
			early.Release()
			if err := s.Release(); err != nil {
				t.Errorf("Release: %v", err)
			}
			if st := p.Stats(); st.Blocks != 0 {
				t.Errorf("Blocks = %d after everything was released", st.Blocks)
			}
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}
