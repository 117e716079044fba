package peerbench

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gpustate/gpustate/runtime/state"
)

// TestGoexitInStep: a step function that ends its goroutine
// (runtime.Goexit, as t.FailNow in a step function does) after
// overwriting the rows in place: the state must read as before with its
// version unchanged, stay usable, and leave no blocks once released.
func TestGoexitInStep(t *testing.T) {
	for _, where := range []string{"step", "replay"} {
		t.Run(where, func(t *testing.T) {
			p := newPool(t)
			s, err := NewRecRState(p, "me")
			if err != nil {
				t.Fatal(err)
			}
			var exit atomic.Bool
			f := func(rows *RecR, in RecIn) error {
				if exit.Load() {
					clear(rows.H)
					runtime.Goexit()
				}
				return recurStep(rows, in)
			}
			cur := make([]float32, RecRows*RecDim)
			var vers []state.Version
			for i := range 20 {
				in := hsInput(i)
				if err := s.StepHost(in, f); err != nil {
					t.Fatal(err)
				}
				rpStep(cur, in)
				vers = append(vers, s.Version())
			}
			v := s.Version()
			exit.Store(true)
			done := make(chan struct{})
			go func() {
				defer close(done)
				if where == "step" {
					s.StepHost(hsInput(99), f)
				} else {
					a, err := s.At(vers[18])
					if err == nil {
						a.Release()
					}
				}
			}()
			<-done
			exit.Store(false)
			if s.Version() != v {
				t.Errorf("version %d, want %d", s.Version(), v)
			}
			got, err := s.Read(0, RecRows)
			if err != nil || !slices.Equal(got.H, cur) {
				t.Errorf("the state reads otherwise after a Goexit in its step function (%v)", err)
			}
			if err := s.StepHost(hsInput(5), f); err != nil {
				t.Errorf("StepHost after: %v", err)
			}
			if err := s.Release(); err != nil {
				t.Error(err)
			}
			if st := p.Stats(); st.Blocks != 0 {
				t.Errorf("Blocks = %d after everything was released", st.Blocks)
			}
		})
	}
}
