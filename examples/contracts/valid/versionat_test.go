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
