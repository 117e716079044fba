package peerbench

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// hsInput returns step i's input.
func hsInput(i int) RecIn {
	x := make([]float32, RecRows*InDim)
	inputOf(x, int32(i))
	return RecIn{X: x}
}

// hsRead returns every row of x.
func hsRead(t testing.TB, x interface {
	Read(from, to int) (RecR, error)
}) []float32 {
	t.Helper()
	r, err := x.Read(0, RecRows)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(r.H)
}

// TestRecRStepHost: the generated StepHost (the typed rows from a
// Scratch, the fields written back) makes the rows recurStep makes, in
// place or through a slice of f's own, on the host backend and on one the
// store copies through; At replays it across checkpoints (every 16) on
// branches at once; failing, panicking and short steps leave the state
// as it was.
func TestRecRStepHost(t *testing.T) {
	for _, name := range []string{"host", "counts"} {
		t.Run(name, func(t *testing.T) {
			var b device.Backend = device.Host()
			if name == "counts" {
				b = hsWrap{device.Host()}
			}
			p, err := state.NewPool(b, state.PoolOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			defer p.Close()
			s, err := NewRecRState(p, "me")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release()
			cur := make([]float32, RecRows*RecDim)
			ref := map[state.Version][]float32{s.Version(): slices.Clone(cur)}
			own := func(rows *RecR, in RecIn) error {
				next := slices.Clone(rows.H)
				for k := range RecRows {
					recur(next[k*RecDim:(k+1)*RecDim], in.X[k*InDim:(k+1)*InDim])
				}
				rows.H = next
				return nil
			}
			step := func(s *RecRState, cur []float32, i int) {
				in := hsInput(i)
				f := recurStep
				if i%3 == 2 {
					f = own
				}
				if err := s.StepHost(in, f); err != nil {
					t.Fatal(err)
				}
				for k := range RecRows {
					recur(cur[k*RecDim:(k+1)*RecDim], in.X[k*InDim:(k+1)*InDim])
				}
			}
			for i := range 40 {
				step(s, cur, i)
				ref[s.Version()] = slices.Clone(cur)
				if got := hsRead(t, s); !slices.Equal(got, cur) {
					t.Fatalf("step %d: the state reads otherwise", i)
				}
			}
			// Bad steps.
			v := s.Version()
			for _, bad := range []struct {
				name string
				f    func(rows *RecR, in RecIn) error
				want error
			}{
				{"nil", nil, state.ErrShape},
				{"short", func(rows *RecR, in RecIn) error { rows.H = rows.H[1:]; return nil }, state.ErrShape},
				{"long", func(rows *RecR, in RecIn) error { rows.H = append(slices.Clone(rows.H), 1); return nil }, state.ErrShape},
				{"nilfield", func(rows *RecR, in RecIn) error { clear(rows.H); rows.H = nil; return nil }, state.ErrShape},
				{"fails", func(rows *RecR, in RecIn) error { clear(rows.H); return errHostStep }, errHostStep},
				{"panics", func(rows *RecR, in RecIn) error { clear(rows.H); panic("hs") }, nil},
			} {
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							err = fmt.Errorf("panicked: %v", r)
						}
					}()
					err = s.StepHost(hsInput(99), bad.f)
				}()
				if bad.want != nil && !errors.Is(err, bad.want) || err == nil {
					t.Errorf("StepHost %s: %v, want %v", bad.name, err, bad.want)
				}
				if s.Version() != v || !slices.Equal(hsRead(t, s), cur) {
					t.Errorf("a failed StepHost (%s) changed the state", bad.name)
				}
			}
			// Branches step on and rebuild every version by At, at once.
			const n = 4
			done := make(chan error, n)
			for g := range n {
				c, err := s.Branch()
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					done <- func() error {
						defer c.Release()
						cur := slices.Clone(cur)
						ref := func() map[state.Version][]float32 {
							m := make(map[state.Version][]float32, len(ref))
							for k, v := range ref {
								m[k] = v
							}
							return m
						}()
						for i := range 20 {
							in := hsInput(1000*g + i)
							f := recurStep
							if i%2 == 1 {
								f = own
							}
							if err := c.StepHost(in, f); err != nil {
								return err
							}
							for k := range RecRows {
								recur(cur[k*RecDim:(k+1)*RecDim], in.X[k*InDim:(k+1)*InDim])
							}
							ref[c.Version()] = slices.Clone(cur)
						}
						for ver, want := range ref {
							a, err := c.At(ver)
							if err != nil {
								continue // past the retained history
							}
							got, err := a.Read(0, RecRows)
							if err != nil {
								a.Release()
								return err
							}
							ok := slices.Equal(got.H, want)
							a.Release()
							if !ok {
								return fmt.Errorf("branch %d: At(%d) reads otherwise", g, ver)
							}
						}
						return nil
					}()
				}()
			}
			for range n {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

var errHostStep = errors.New("host step: step failed on purpose")

// hsWrap is the host backend behind a wrapper the store does not know
// for host memory: a host step's rows are copied out and back.
type hsWrap struct{ device.Backend }
