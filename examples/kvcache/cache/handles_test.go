package cache

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// TestGeneratedNilHandles: the generated methods on a nil handle answer
// state.ErrReleased (or report nothing) instead of panicking.
func TestGeneratedNilHandles(t *testing.T) {
	var s *KVCacheState
	var v *KVCacheSnapshot
	var dst KVCache
	errs := map[string]error{
		"Append":            s.Append(KVCache{}),
		"ReadInto":          s.ReadInto(&dst, 0, 0),
		"Merge":             s.Merge(nil),
		"Rollback":          s.Rollback(nil),
		"RecordStream":      s.RecordStream(nil),
		"Release":           s.Release(),
		"Snapshot.ReadInto": v.ReadInto(&dst, 0, 0),
		"Snapshot.Release":  v.Release(),
	}
	_, errs["Read"] = s.Read(0, 0)
	_, errs["ReadRows"] = s.ReadRows(nil)
	_, errs["AdoptPrefix"] = s.AdoptPrefix(nil)
	snap, snapErr := s.Snapshot()
	defer snap.Release()
	errs["Snapshot"] = snapErr
	branch, branchErr := s.Branch()
	defer branch.Release()
	errs["Branch"] = branchErr
	_, errs["AppendDevice"] = s.AppendDevice(1)
	_, errs["Spans"] = s.Spans(0, 0)
	table, tableErr := s.BlockTable()
	defer table.Release()
	errs["BlockTable"] = tableErr
	_, errs["Snapshot.Read"] = v.Read(0, 0)
	_, errs["Snapshot.Spans"] = v.Spans(0, 0)
	vtable, vtableErr := v.BlockTable()
	defer vtable.Release()
	errs["Snapshot.BlockTable"] = vtableErr
	for name, err := range errs {
		if !errors.Is(err, state.ErrReleased) {
			t.Errorf("%s on a nil handle: %v; want state.ErrReleased", name, err)
		}
	}
	if s.Len() != 0 || s.Version() != 0 || s.Stats() != (state.Stats{}) || v.Len() != 0 || v.Version() != 0 {
		t.Error("a nil handle reports rows or a version")
	}
}

// TestReadIntoLeavesDstOnError: a ReadInto that fails leaves the caller's
// batch as it was, its lengths included.
func TestReadIntoLeavesDstOnError(t *testing.T) {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := NewKVCacheState(p, "a")
	if err != nil {
		t.Fatal(err)
	}
	rows := KVCache{Keys: make([]float32, 3*256), Values: make([]float32, 3*256), Token: []int32{1, 2, 3}}
	if err := s.Append(rows); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var dst, sdst KVCache
	if err := s.ReadInto(&dst, 0, 3); err != nil {
		t.Fatal(err)
	}
	if err := snap.ReadInto(&sdst, 0, 3); err != nil {
		t.Fatal(err)
	}
	s.Release()
	snap.Release()
	if err := s.ReadInto(&dst, 0, 0); !errors.Is(err, state.ErrReleased) {
		t.Fatalf("ReadInto on a released state: %v; want state.ErrReleased", err)
	}
	if err := snap.ReadInto(&sdst, 0, 0); !errors.Is(err, state.ErrReleased) {
		t.Fatalf("ReadInto on a released snapshot: %v; want state.ErrReleased", err)
	}
	for _, d := range []KVCache{dst, sdst} {
		if len(d.Keys) != 3*256 || len(d.Values) != 3*256 || len(d.Token) != 3 || d.Token[2] != 3 {
			t.Errorf("a failed ReadInto changed dst: %d keys, %d values, tokens %v", len(d.Keys), len(d.Values), d.Token)
		}
	}
}
