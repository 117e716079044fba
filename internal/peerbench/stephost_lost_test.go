package peerbench

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpustate/gpustate/runtime/state"
)

// rpLose steps s with a step function that then goes bad on replay, and
// fails a step so that its restore cannot replay: s is left needing a
// rebuild that fails while the function is bad.
func rpLose(t *testing.T, s *RecRState, on *atomic.Bool, panics bool) []state.Version {
	t.Helper()
	bad := rpFlaky(on, panics)
	var vers []state.Version
	for i := range 20 {
		if err := s.StepHost(hsInput(i), bad); err != nil {
			t.Fatal(err)
		}
		vers = append(vers, s.Version())
	}
	on.Store(false)
	err := rpSafe(func() error {
		return s.StepHost(hsInput(99), func(rows *RecR, in RecIn) error { clear(rows.H); return errHostStep })
	})
	if err == nil || strings.HasPrefix(err.Error(), "PANIC:") {
		t.Fatalf("failing step: %v", err)
	}
	return vers
}

// TestLostState: every method of a state whose failed step could not
// be undone (its replay panics) answers without panicking; the state
// comes back once the function is good; Release, then Close return and
// leave no blocks.
func TestLostState(t *testing.T) {
	for _, panics := range []bool{true, false} {
		for _, bk := range []string{"host", "counts"} {
			t.Run(fmt.Sprintf("%s/panics=%v", bk, panics), func(t *testing.T) {
				p := rpPool(t, bk, state.PoolOptions{})
				s, err := NewRecRState(p, "me")
				if err != nil {
					t.Fatal(err)
				}
				var on atomic.Bool
				on.Store(true)
				vers := rpLose(t, s, &on, panics)
				calls := map[string]func() error{
					"Len":     func() error { _ = s.Len(); return nil },
					"Bound":   func() error { _ = s.Bound(); return nil },
					"Version": func() error { _ = s.Version(); return nil },
					"Stats":   func() error { _ = s.Stats(); return nil },
					"Read":    func() error { _, err := s.Read(0, RecRows); return err },
					"Plan":    func() error { _, err := s.Plan(vers[3]); return err },
					"At":      func() error { a, err := s.At(vers[18]); a.Release(); return err },
					"Spans":   func() error { _, err := s.Spans(0, RecRows); return err },
					"Snapshot": func() error {
						v, err := s.Snapshot()
						if err == nil {
							v.Release()
						}
						return err
					},
					"Branch": func() error {
						c, err := s.Branch()
						if err == nil {
							c.Release()
						}
						return err
					},
					"BlockTable": func() error {
						bt, err := s.BlockTable()
						if err == nil {
							bt.Release()
						}
						return err
					},
					"WriteDevice": func() error { _, err := s.WriteDevice(0, 1); return err },
					"Write":       func() error { return s.Write(0, RecR{H: make([]float32, RecDim)}) },
					"StepHost":    func() error { return s.StepHost(hsInput(1), recurStep) },
					"PoolStats":   func() error { _ = p.Stats(); return nil },
				}
				for name, f := range calls {
					err := rpSafe(f)
					if err != nil && strings.HasPrefix(err.Error(), "PANIC:") {
						t.Errorf("%s on a lost state: %v", name, err)
					}
				}
				on.Store(true)
				if _, err := s.Read(0, RecRows); err != nil {
					t.Errorf("Read once the step is good: %v", err)
				}
				if err := s.Release(); err != nil {
					t.Errorf("Release: %v", err)
				}
				if st := p.Stats(); st.Blocks != 0 {
					t.Errorf("Blocks = %d", st.Blocks)
				}
				if err := p.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
	}
}

// TestLostGroupMember: the same for a HybridR group whose Rec member
// is lost: the group's calls answer without panicking, and the group
// releases with no blocks left.
func TestLostGroupMember(t *testing.T) {
	for _, bk := range []string{"host", "counts"} {
		t.Run(bk, func(t *testing.T) {
			p := rpPool(t, bk, state.PoolOptions{})
			g, err := NewHybridRState(p, "me")
			if err != nil {
				t.Fatal(err)
			}
			row := newRow()
			if err := g.KV().Append(rowOf(row, 1)); err != nil {
				t.Fatal(err)
			}
			cut, err := g.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var on atomic.Bool
			on.Store(true)
			rpLose(t, g.Rec(), &on, true)
			calls := []struct {
				name string
				f    func() error
			}{
				{"Stats", func() error { _ = g.Stats(); return nil }},
				{"KV.Append", func() error { return g.KV().Append(rowOf(row, 2)) }},
				{"Snapshot", func() error {
					v, err := g.Snapshot()
					if err == nil {
						v.Release()
					}
					return err
				}},
				{"Branch", func() error {
					c, err := g.Branch()
					if err == nil {
						c.Release()
					}
					return err
				}},
				{"Rollback", func() error {
					if err := g.Rollback(cut); err != nil {
						return err
					}
					on.Store(true)
					defer on.Store(false)
					return rpCheck(g, rpModel{toks: []int32{1}, rec: make([]float32, RecRows*RecDim)})
				}},
				{"Merge", func() error {
					on.Store(true)
					c, err := g.Branch()
					on.Store(false)
					if err != nil {
						return err
					}
					defer c.Release()
					return g.Merge(c)
				}},
			}
			for _, c := range calls {
				err := rpSafe(c.f)
				t.Logf("%s: %v", c.name, err)
				if err != nil && strings.HasPrefix(err.Error(), "PANIC:") {
					t.Errorf("%s on a group with a lost member: %v", c.name, err)
				}
			}
			cut.Release()
			if err := rpSafe(g.Release); err != nil {
				t.Errorf("Release: %v", err)
			}
			if st := p.Stats(); st.Blocks != 0 {
				t.Errorf("Blocks = %d", st.Blocks)
			}
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}
