package state_test

import (
	"errors"
	"fmt"

	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// A pool on the host backend, one session's KV cache in it (a handle
// stategen generated from type cache.KVCache), and a snapshot that shares
// every block with the session until it writes.
func ExampleNewPool() {
	p, err := state.NewPool(device.Host(), state.PoolOptions{MaxBytes: 64 << 20})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	kv, err := cache.NewKVCacheState(p, "session-1")
	if err != nil {
		panic(err)
	}
	defer kv.Release()
	row := cache.KVCache{Keys: make([]float32, 256), Values: make([]float32, 256), Token: []int32{7}}
	if err := kv.Append(row); err != nil {
		panic(err)
	}
	before := p.Stats()
	snap, err := kv.Snapshot()
	if err != nil {
		panic(err)
	}
	defer snap.Release()
	after := p.Stats()
	fmt.Println("rows:", kv.Len(), "live handles:", after.Live)
	fmt.Println("bytes the snapshot took:", after.PhysicalBytes-before.PhysicalBytes)
	fmt.Println("bytes it would take unshared:", after.LogicalBytes-before.LogicalBytes)
	// Output:
	// rows: 1 live handles: 2
	// bytes the snapshot took: 0
	// bytes it would take unshared: 2052
}

// Every error wraps one sentinel, which errors.Is tells apart: a call on a
// released handle answers ErrReleased.
func ExampleErrReleased() {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	kv, err := cache.NewKVCacheState(p, "session-1")
	if err != nil {
		panic(err)
	}
	kv.Release()
	_, err = kv.Snapshot()
	fmt.Println(errors.Is(err, state.ErrReleased))
	// Output:
	// true
}
