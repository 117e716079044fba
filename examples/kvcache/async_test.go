package main

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// plain is a backend without streams: it hides the host backend's.
type plain struct{ device.Backend }

// TestAsyncBadInput: the generated AppendAsync and ReadAsync answer
// errors, never panic, and change nothing on bad input: a nil handle, a
// nil or closed stream, a nil batch, rows out of range, a backend without
// streams.
func TestAsyncBadInput(t *testing.T) {
	b := device.Host()
	defer b.Close()
	p, err := state.NewPool(b, state.PoolOptions{BlockBytes: poolBlock})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := cache.NewKVCacheState(p, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	st, err := b.(device.Streams).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAsync(st, rows([]int32{1, 2, 3}, 0)); err != nil {
		t.Fatal(err)
	}
	closed, _ := b.(device.Streams).NewStream()
	closed.Close()
	var none *cache.KVCacheState
	var dst cache.KVCache
	for name, c := range map[string]struct {
		err, want error
	}{
		"nil state AppendAsync":      {none.AppendAsync(st, rows([]int32{1}, 0)), state.ErrReleased},
		"nil state ReadAsync":        {none.ReadAsync(st, &dst, 0, 0), state.ErrReleased},
		"AppendAsync on nil stream":  {s.AppendAsync(nil, rows([]int32{1}, 0)), nil},
		"AppendAsync on closed":      {s.AppendAsync(closed, rows([]int32{1}, 0)), device.ErrStreamClosed},
		"AppendAsync of a bad batch": {s.AppendAsync(st, cache.KVCache{Token: []int32{1}}), state.ErrShape},
		"ReadAsync past Len":         {s.ReadAsync(st, &dst, 0, 4), state.ErrRange},
		"ReadAsync into nil":         {s.ReadAsync(st, nil, 0, 3), state.ErrShape},
		"ReadAsync on closed":        {s.ReadAsync(closed, &dst, 0, 3), device.ErrStreamClosed},
		"ReadAsync on a nil stream":  {s.ReadAsync(nil, &dst, 0, 3), nil},
		"AppendAsync past MaxTokens": {s.AppendAsync(st, rows(make([]int32, cache.MaxTokens), 0)), state.ErrBound},
	} {
		if c.err == nil || (c.want != nil && !errors.Is(c.err, c.want)) {
			t.Errorf("%s: %v, want an error wrapping %v", name, c.err, c.want)
		}
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 || dst.Token != nil {
		t.Errorf("after the failed calls: %d rows, dst %v; want 3 rows and dst untouched", s.Len(), dst.Token)
	}

	pp, err := state.NewPool(plain{b}, state.PoolOptions{BlockBytes: poolBlock})
	if err != nil {
		t.Fatal(err)
	}
	defer pp.Close()
	ps, err := cache.NewKVCacheState(pp, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Release()
	if err := ps.AppendAsync(st, rows([]int32{1}, 0)); !errors.Is(err, errors.ErrUnsupported) || ps.Len() != 0 {
		t.Errorf("AppendAsync without streams: %v, %d rows; want errors.ErrUnsupported and none", err, ps.Len())
	}
	if err := ps.ReadAsync(st, &dst, 0, 0); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("ReadAsync without streams: %v, want errors.ErrUnsupported", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
