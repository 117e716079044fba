package valid

import (
	"errors"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// tokens returns n rows of a KVCache whose values derive from first, the
// index of the first row.
func tokens(first, n int) KVCache {
	var r KVCache
	for i := range n {
		for j := range 2 * HeadDim {
			r.Keys = append(r.Keys, Half(first+i+j))
			r.Values = append(r.Values, Half(first+i)^Half(j))
		}
	}
	return r
}

// TestVersionAtRollsBackWithoutATable: speculative decoding that keeps no
// version table: after drafts are appended, the version of the accepted
// length comes from VersionAt, At rebuilds it and Rollback takes it, and
// the state reads as it did then.
func TestVersionAtRollsBackWithoutATable(t *testing.T) {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := NewKVCacheState(p, "session")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if err := s.Append(tokens(0, 5)); err != nil { // the prompt
		t.Fatal(err)
	}
	for i := range 6 { // six drafts, one a call
		if err := s.Append(tokens(5+i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	accepted := 3
	v, err := s.VersionAt(5 + accepted)
	if err != nil {
		t.Fatal(err)
	}
	past, err := s.At(v)
	if err != nil {
		t.Fatal(err)
	}
	defer past.Release()
	if err := s.Rollback(past); err != nil {
		t.Fatal(err)
	}
	got, err := s.Read(0, s.Len())
	if err != nil {
		t.Fatal(err)
	}
	want := tokens(0, 5+accepted)
	if s.Len() != 5+accepted || s.Version() != v || !slices.Equal(got.Keys, want.Keys) || !slices.Equal(got.Values, want.Values) {
		t.Errorf("after the rollback to VersionAt(%d): %d rows at version %d; want %d rows at %d, as appended",
			5+accepted, s.Len(), s.Version(), 5+accepted, v)
	}
	for _, c := range []struct {
		n    int
		want error
	}{{s.Len() + 1, state.ErrRange}, {-1, state.ErrRange}, {3, state.ErrNotRetained}} { // 3: inside the prompt's batch
		if _, err := s.VersionAt(c.n); !errors.Is(err, c.want) {
			t.Errorf("VersionAt(%d): %v, want %v", c.n, err, c.want)
		}
	}
	var none *KVCacheState
	if _, err := none.VersionAt(0); !errors.Is(err, state.ErrReleased) {
		t.Errorf("VersionAt on a nil state: %v, want state.ErrReleased", err)
	}
}

// TestSessionAtRollsBackARebuiltCut: a group whose members keep
// histories goes back to the cut after n tokens with no snapshot kept:
// KV().VersionAt(n) names it, At rebuilds both members (the recurrent
// state by running its steps again) and Rollback moves both.
func TestSessionAtRollsBackARebuiltCut(t *testing.T) {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := NewSessionState(p, "session")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	step := func(rows *Recurrent, in RecInput) error {
		for i := range rows.H {
			rows.H[i] = rows.H[i]/2 + in.X[i]
		}
		return nil
	}
	var recAt [][]float32 // the recurrent rows after each token
	for tok := range 10 {
		in := RecInput{X: make([]float32, 4*HeadDim)}
		for i := range in.X {
			in.X[i] = float32(tok*100 + i)
		}
		if err := s.Rec().StepHost(in, step); err != nil {
			t.Fatal(err)
		}
		if err := s.KV().Append(tokens(tok, 1)); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Rec().Read(0, 4)
		if err != nil {
			t.Fatal(err)
		}
		recAt = append(recAt, rec.H)
	}
	n := 4
	v, err := s.KV().VersionAt(n)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := s.Plan(v)
	if err != nil || plan.Steps == 0 {
		t.Errorf("Plan(%d): %d steps to replay, %v; want some", v, plan.Steps, err)
	}
	cut, err := s.At(v)
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Release()
	if err := s.Rollback(cut); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Rec().Read(0, 4)
	if err != nil {
		t.Fatal(err)
	}
	if s.KV().Len() != n || !slices.Equal(rec.H, recAt[n-1]) {
		t.Errorf("after Rollback to the rebuilt cut at %d tokens: %d KV rows, recurrent rows equal %v; want %d and equal",
			n, s.KV().Len(), slices.Equal(rec.H, recAt[n-1]), n)
	}
	var none *SessionState
	nilCut, err := none.At(v)
	if !errors.Is(err, state.ErrReleased) {
		t.Errorf("At on a nil group: %v, want state.ErrReleased", err)
	}
	if err == nil {
		nilCut.Release()
	}
}
