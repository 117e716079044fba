// Package coupled declares a group of two states the way stategen's
// output does, and calls on its members: Rollback, Merge and Release of a
// member obtained from the group's accessor are findings; a member's own
// Snapshot or Branch, and writes through a member, are silent.
package coupled

import "github.com/gpustate/gpustate/runtime/state/stateimpl"

// KVState is a member head.
type KVState struct{ h *stateimpl.Head }

// KVSnapshot is its snapshot.
//
//state:snapshot
type KVSnapshot struct{}

// Append grows the state.
//
//state:appends
func (s *KVState) Append(rows []float32) error { return nil }

// Snapshot returns an immutable snapshot.
//
//state:acquire
func (s *KVState) Snapshot() (*KVSnapshot, error) { return &KVSnapshot{}, nil }

// Branch returns an isolated branch.
//
//state:acquire
func (s *KVState) Branch() (*KVState, error) { return &KVState{}, nil }

// Merge fast-forwards to child.
//
//state:mutates
func (s *KVState) Merge(child *KVState) error { return nil }

// Rollback moves the state back.
//
//state:mutates
func (s *KVState) Rollback(to *KVSnapshot) error { return nil }

// Release releases the state.
//
//state:release
func (s *KVState) Release() error { return nil }

// Release releases the snapshot.
//
//state:release
func (v *KVSnapshot) Release() error { return nil }

// Decoder is the group stategen generated DecoderState for.
type Decoder struct{ KV, Rec int }

// DecoderState is a live Decoder group.
type DecoderState struct {
	_group *stateimpl.Group
	_KV    *KVState
	_Rec   *KVState
}

// NewDecoderState creates a group.
//
//state:acquire
func NewDecoderState() (*DecoderState, error) { return &DecoderState{}, nil }

// KV returns the KV member, coupled.
//
//state:view
func (g *DecoderState) KV() *KVState { return g._KV }

// Rec returns the Rec member, coupled.
//
//state:view
func (g *DecoderState) Rec() *KVState { return g._Rec }

// Release releases every member.
//
//state:release
func (g *DecoderState) Release() error { return nil }

// Plain is no group: a type of the user's whose method returns a head.
type Plain struct{ kv *KVState }

// KV returns the head.
func (p *Plain) KV() *KVState { return p.kv }

func misuse(g *DecoderState, s *KVSnapshot, b *KVState) {
	g.KV().Rollback(s) // want `Rollback on member KV of group Decoder answers state.ErrCoupled: the group moves and releases its members together; call Rollback on the group`
	kv := g.KV()
	kv.Merge(b)        // want `Merge on member KV of group Decoder answers state.ErrCoupled`
	defer kv.Release() // want `Release on member KV of group Decoder answers state.ErrCoupled`
	var rec = g.Rec()
	rec.Rollback(s) // want `Rollback on member Rec of group Decoder answers state.ErrCoupled`
}

func fine(g *DecoderState, s *KVSnapshot, p *Plain) error {
	kv := g.KV()
	if err := kv.Append([]float32{1}); err != nil { // a write through a member
		return err
	}
	snap, err := kv.Snapshot() // a member's own snapshot
	if err != nil {
		return err
	}
	defer snap.Release()
	br, err := g.KV().Branch() // a member's own branch: an ordinary handle
	if err != nil {
		return err
	}
	if err := br.Rollback(snap); err != nil {
		br.Release()
		return err
	}
	if err := br.Merge(br); err != nil {
		br.Release()
		return err
	}
	br.Release()
	x := g.Rec()
	x = br // no longer only a member
	x.Rollback(s)
	p.KV().Rollback(s) // not a group's accessor
	return g.Release()
}
