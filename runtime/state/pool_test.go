package state_test

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// A nil pool and a nil block table answer as released ones, without a
// panic.
func TestNilPoolAndTable(t *testing.T) {
	var p *state.Pool
	if err := p.Close(); !errors.Is(err, state.ErrReleased) {
		t.Errorf("nil pool Close: %v, want ErrReleased", err)
	}
	if _, err := p.Trim(); !errors.Is(err, state.ErrReleased) {
		t.Errorf("nil pool Trim: %v, want ErrReleased", err)
	}
	if st := p.Stats(); st != (state.PoolStats{}) {
		t.Errorf("nil pool Stats: %+v, want zero", st)
	}
	if p.WaitPending() != 0 || p.ForgetPrefixes("d") != 0 || p.Backend() != nil {
		t.Error("a nil pool reports something")
	}
	var bt *state.BlockTable
	if _, err := bt.Column(0); !errors.Is(err, state.ErrReleased) {
		t.Errorf("nil table Column: %v, want ErrReleased", err)
	}
	if err := bt.Release(); !errors.Is(err, state.ErrReleased) {
		t.Errorf("nil table Release: %v, want ErrReleased", err)
	}
	if _, err := cache.NewKVCacheState(p, "o"); !errors.Is(err, state.ErrReleased) {
		t.Errorf("a state on a nil pool: %v, want ErrReleased", err)
	}
}

// NewPool answers bad options with an error, and a closed pool's states
// answer ErrReleased; the pool's figures pass through from the store.
func TestPoolThroughTheStore(t *testing.T) {
	if _, err := state.NewPool(nil, state.PoolOptions{}); err == nil {
		t.Error("NewPool with a nil backend succeeded")
	}
	if _, err := state.NewPool(device.Host(), state.PoolOptions{MaxBytes: -1}); err == nil {
		t.Error("NewPool with negative MaxBytes succeeded")
	}
	p, err := state.NewPool(device.Host(), state.PoolOptions{BlockBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if p.Backend() == nil || p.Stats().BlockBytes != 4096 {
		t.Errorf("pool over the host backend: backend %v, stats %+v", p.Backend(), p.Stats())
	}
	kv, err := cache.NewKVCacheState(p, "o")
	if err != nil {
		t.Fatal(err)
	}
	bt, err := kv.BlockTable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bt.Column(0); err != nil {
		t.Errorf("Column of a live table: %v", err)
	}
	if _, err := bt.Column(9); !errors.Is(err, state.ErrRange) {
		t.Errorf("Column 9 of 3: %v, want ErrRange", err)
	}
	if err := p.Close(); err == nil {
		t.Error("Close with a live handle named none")
	}
	if err := kv.Append(cache.KVCache{Keys: make([]float32, 256), Values: make([]float32, 256), Token: []int32{1}}); !errors.Is(err, state.ErrReleased) {
		t.Errorf("Append after Close: %v, want ErrReleased", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
}
