package peerbench

import (
	"errors"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

func ctxRows(n int, tok int32) Ctx {
	c := Ctx{Keys: make([]float32, 256*n), Values: make([]float32, 256*n), Token: make([]int32, n)}
	for i := range c.Token {
		c.Token[i] = tok + int32(i)
		c.Keys[256*i] = float32(tok)
	}
	return c
}

// TestSlabHandlesStayTheirOwn: handles carved from one chunk answer
// state.ErrReleased once released, twice released too, and never act on a
// sibling; failed NewT, Branch and Snapshot calls leave later handles
// whole.
func TestSlabHandlesStayTheirOwn(t *testing.T) {
	p := newPool(t)
	var states []*CtxState
	for i := range 20 { // past one chunk of siblings
		s, err := NewCtxState(p, state.Owner("o"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctxRows(1, int32(100*i))); err != nil {
			t.Fatal(err)
		}
		states = append(states, s)
	}
	snaps := make([]*CtxSnapshot, len(states))
	for i, s := range states {
		v, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		snaps[i] = v
	}
	// Release every other one, twice.
	for i := 0; i < len(states); i += 2 {
		for range 2 {
			if err := states[i].Release(); err != nil {
				t.Fatal(err)
			}
			if err := snaps[i].Release(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Failed calls: a released parent, an empty owner, a bad rollback.
	if _, err := states[0].Branch(); !errors.Is(err, state.ErrReleased) {
		t.Errorf("Branch of a released state: %v", err)
	}
	if _, err := states[0].Snapshot(); !errors.Is(err, state.ErrReleased) {
		t.Errorf("Snapshot of a released state: %v", err)
	}
	if _, err := NewCtxState(p, ""); err == nil {
		t.Error("NewCtxState with an empty owner succeeded")
	}
	other, err := NewCtxState(p, "x")
	if err != nil {
		t.Fatal(err)
	}
	ov, err := other.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := states[1].Rollback(ov); !errors.Is(err, state.ErrOwner) {
		t.Errorf("Rollback to another owner's snapshot: %v", err)
	}
	check := func(step string) {
		t.Helper()
		for i, s := range states {
			if i%2 == 0 {
				if err := s.Append(ctxRows(1, 7)); !errors.Is(err, state.ErrReleased) {
					t.Errorf("%s: Append to released state %d: %v", step, i, err)
				}
				if _, err := snaps[i].Read(0, 1); !errors.Is(err, state.ErrReleased) {
					t.Errorf("%s: Read of released snapshot %d: %v", step, i, err)
				}
				continue
			}
			if s.Len() != 1 || snaps[i].Len() != 1 {
				t.Errorf("%s: live state %d has %d rows, its snapshot %d", step, i, s.Len(), snaps[i].Len())
				continue
			}
			for _, r := range []func() (Ctx, error){func() (Ctx, error) { return s.Read(0, 1) }, func() (Ctx, error) { return snaps[i].Read(0, 1) }} {
				c, err := r()
				if err != nil || c.Token[0] != int32(100*i) {
					t.Errorf("%s: live handle %d reads %v, %v", step, i, c.Token, err)
				}
			}
		}
	}
	check("after releases")
	// Later handles from the same slabs.
	var later []*CtxState
	for range 10 {
		s, err := states[1].Branch()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctxRows(1, 9999)); err != nil {
			t.Fatal(err)
		}
		later = append(later, s)
	}
	check("after later branches")
	for _, s := range later {
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(states); i += 2 {
		if err := states[i].Release(); err != nil {
			t.Fatal(err)
		}
		if err := snaps[i].Release(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ov.Release(); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestSlabHandlesConcurrent: many goroutines snapshot and branch one pool's
// states at once, each reading its own rows (run with -race).
func TestSlabHandlesConcurrent(t *testing.T) {
	p := newPool(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := NewCtxState(p, state.Owner("o"))
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Release()
			if err := s.Append(ctxRows(1, int32(g))); err != nil {
				t.Error(err)
				return
			}
			for range 50 {
				v, err := s.Snapshot()
				if err != nil {
					t.Error(err)
					return
				}
				b, err := s.Branch()
				if err != nil {
					t.Error(err)
					return
				}
				cv, err1 := v.Read(0, 1)
				cb, err2 := b.Read(0, 1)
				if err1 != nil || err2 != nil || cv.Token[0] != int32(g) || cb.Token[0] != int32(g) {
					t.Errorf("goroutine %d reads %v %v, %v %v", g, cv.Token, cb.Token, err1, err2)
				}
				v.Release()
				b.Release()
			}
		}()
	}
	wg.Wait()
}

// TestSlabHandlesAfterClose: Pool.Close with slab handles live fails
// naming them, and the handles still release; a closed pool makes no
// handle.
func TestSlabHandlesAfterClose(t *testing.T) {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewCtxState(p, "o")
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err == nil {
		t.Error("Close with live handles succeeded")
	}
	if _, err := NewCtxState(p, "o"); err == nil {
		t.Error("NewCtxState in a closed pool succeeded")
	}
	if _, err := s.Branch(); err == nil {
		t.Error("Branch in a closed pool succeeded")
	}
	if _, err := s.Snapshot(); err == nil {
		t.Error("Snapshot in a closed pool succeeded")
	}
	if err := v.Release(); err != nil {
		t.Error(err)
	}
	if err := s.Release(); err != nil {
		t.Error(err)
	}
	if err := v.Release(); err != nil {
		t.Error(err)
	}
}
