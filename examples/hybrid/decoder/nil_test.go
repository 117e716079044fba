package decoder

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/stateimpl"
)

// TestNilGroupHandles: every method of a nil group handle and of a nil
// group snapshot answers, as a nil state does, instead of panicking.
func TestNilGroupHandles(t *testing.T) {
	var g *DecoderState
	var v *DecoderSnapshot
	if g.KV() != nil || g.Rec() != nil || v.KV() != nil || v.Rec() != nil {
		t.Error("a nil handle's members are not nil")
	}
	snap, snapErr := g.Snapshot()
	defer snap.Release()
	branch, branchErr := g.Branch()
	defer branch.Release()
	_, adoptErr := g.AdoptPrefix([]int32{1})
	for name, err := range map[string]error{
		"Snapshot":         snapErr,
		"Branch":           branchErr,
		"Merge":            g.Merge(nil),
		"Rollback":         g.Rollback(nil),
		"AdoptPrefix":      adoptErr,
		"KV().Append":      g.KV().Append(KVCache{}),
		"Rec().Write":      g.Rec().Write(0, Recurrent{}),
		"Snapshot.KV.Read": nilErr(v.KV().Read(0, 0)),
	} {
		if !errors.Is(err, state.ErrReleased) {
			t.Errorf("nil group %s: %v; want state.ErrReleased", name, err)
		}
	}
	if err := g.Release(); err != nil {
		t.Errorf("nil group Release: %v", err)
	}
	if err := v.Release(); err != nil {
		t.Errorf("nil group snapshot Release: %v", err)
	}
	if st := g.Stats(); st != (state.Stats{}) {
		t.Errorf("nil group Stats: %+v", st)
	}
	var sg *stateimpl.Group
	if sg.Owner() != "" {
		t.Error("a nil stateimpl.Group has an owner")
	}
}

func nilErr[T any](_ T, err error) error { return err }
