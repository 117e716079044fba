// Package state is what a program names beside the typed handles that
// stategen generates: the Pool their states live in, the owners and
// sharing domains they belong to, their versions and statistics, the
// block tables kernels index them by, and the errors every handle returns.
//
// A Pool takes device memory from a device.Backend (device.Host() where
// there is no GPU) in slabs and hands out blocks of it. A state's rows live
// in those blocks; a snapshot costs one reference, and a branch shares every
// block until one side writes it: only the blocks written are copied.
//
//	p, err := state.NewPool(device.Host(), state.PoolOptions{MaxBytes: 1 << 30})
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//	kv, err := NewKVCacheState(p, "session-1") // generated from type KVCache
//	if err != nil {
//		return err
//	}
//	defer kv.Release()
//
// # Memory
//
// Pool.Stats and the handles' Stats keep logical bytes (what the live
// versions would take unshared) and physical bytes (the blocks in use)
// apart, each counted as the store runs. Under memory pressure the pool
// evicts optional state (PoolOptions.Evictor ranks it), or moves it to
// host memory when PoolOptions.HostTier is set. Package statemetrics
// exports the figures to Prometheus.
//
// # Errors
//
// Every error wraps one of the sentinel errors below, so that errors.Is
// tells them apart. No call panics on bad input, and a call that fails
// changes nothing. Every handle is safe for concurrent use. (Generated code
// calls the store through package runtime/state/stateimpl.)
package state
