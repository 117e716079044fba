package kv_test

import (
	"errors"
	"fmt"

	"github.com/gpustate/gpustate/gen/testdata/src/kv"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// tokens returns n rows of KVCache, token i's keys all i.
func tokens(first, n int) kv.KVCache {
	var rows kv.KVCache
	for i := first; i < first+n; i++ {
		for range 128 {
			rows.Keys = append(rows.Keys, kv.Half(i))
			rows.Values = append(rows.Values, kv.Half(i))
		}
		rows.Pos = append(rows.Pos, [2]int32{int32(i), 0})
		rows.At = append(rows.At, 0)
	}
	return rows
}

// The handles stategen generates for KVCache: append rows, snapshot them in
// O(1), read them back, release everything.
func ExampleNewKVCacheState() {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	s, err := kv.NewKVCacheState(p, "session-1")
	if err != nil {
		panic(err)
	}
	defer s.Release()
	if err := s.Append(tokens(0, 3)); err != nil {
		panic(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		panic(err)
	}
	defer snap.Release()
	if err := s.Append(tokens(3, 2)); err != nil {
		panic(err)
	}
	rows, err := snap.Read(0, snap.Len())
	if err != nil {
		panic(err)
	}
	fmt.Printf("head: %d rows at version %d; snapshot: %d rows at version %d, positions %v\n",
		s.Len(), s.Version(), snap.Len(), snap.Version(), rows.Pos)
	// Output:
	// head: 5 rows at version 2; snapshot: 3 rows at version 1, positions [[0 0] [1 0] [2 0]]
}

// A branch is written apart from its parent; Merge fast-forwards the parent
// to it, as the contract's merge=fastforward says.
func ExampleKVCacheState_Branch() {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	s, err := kv.NewKVCacheState(p, "session-1")
	if err != nil {
		panic(err)
	}
	defer s.Release()
	if err := s.Append(tokens(0, 4)); err != nil {
		panic(err)
	}
	draft, err := s.Branch()
	if err != nil {
		panic(err)
	}
	defer draft.Release()
	if err := draft.Append(tokens(4, 2)); err != nil {
		panic(err)
	}
	fmt.Printf("before the merge: head %d rows, draft %d rows\n", s.Len(), draft.Len())
	if err := s.Merge(draft); err != nil {
		panic(err)
	}
	fmt.Printf("after the merge: head %d rows\n", s.Len())
	// Output:
	// before the merge: head 4 rows, draft 6 rows
	// after the merge: head 6 rows
}

// Appends past the bound fail whole, wrapping state.ErrBound, and change
// nothing.
func ExampleKVCacheState_Append_bound() {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	s, err := kv.NewKVCacheState(p, "session-1")
	if err != nil {
		panic(err)
	}
	defer s.Release()
	err = s.Append(tokens(0, kv.MaxTokens+1))
	fmt.Println(errors.Is(err, state.ErrBound), s.Len())
	// Output:
	// true 0
}

// The contract keeps a checkpoint every 64 versions: At reconstructs a past
// version of the head's line from a checkpoint and the deltas after it,
// and Plan says how, without doing it.
func ExampleKVCacheState_At() {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	s, err := kv.NewKVCacheState(p, "session-1")
	if err != nil {
		panic(err)
	}
	defer s.Release()
	for i := range 5 {
		if err := s.Append(tokens(i, 1)); err != nil {
			panic(err)
		}
	}
	plan, err := s.Plan(3)
	if err != nil {
		panic(err)
	}
	v3, err := s.At(3)
	if err != nil {
		panic(err)
	}
	defer v3.Release()
	fmt.Printf("version 3: %d rows, from the checkpoint at version %d and %d deltas; the head is at version %d\n",
		v3.Len(), plan.Checkpoint, plan.Deltas, s.Version())
	// Output:
	// version 3: 3 rows, from the checkpoint at version 0 and 3 deltas; the head is at version 5
}
