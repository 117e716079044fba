// Package share writes through the spans of heads with declared prefix
// sharing: the rows a head adopted are blocks of other owners, and its
// spans are head spans like any other.
package share

import (
	"dev"
	"kv"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/stateimpl"
)

// ---- spans of a shared head are read only ----

func adoptedSpans(p *state.Pool, keys []int32) error {
	s, err := kv.NewPromptStateShared(p, "req", "tenant")
	if err != nil {
		return err
	}
	defer s.Release()
	n, err := s.AdoptPrefix(keys)
	if err != nil {
		return err
	}
	sp, err := s.Spans(0, n)
	if err != nil {
		return err
	}
	dev.Scale(sp.Hidden, 2) // want `write through the spans Spans of PromptState returned, which are read only: the blocks may be shared with snapshots, branches and other owners' heads that adopted them as a prefix; write rows through the spans AppendDevice or WriteDevice returns`
	for _, t := range sp.Token {
		dev.Scale([]device.Span{t}, 2) // want `write through the spans Spans of PromptState returned`
	}
	return nil
}

func headSpans(p *state.Pool, l *stateimpl.Layout, keys []byte) error {
	h, err := stateimpl.NewSharedHead(p, l, "req", "tenant")
	if err != nil {
		return err
	}
	defer h.Release()
	n, err := h.AdoptPrefix(keys)
	if err != nil {
		return err
	}
	sp, err := h.Spans(0, n)
	if err != nil {
		return err
	}
	return dev.Scale(sp[0], 2) // want `write through the spans Spans of Head returned, which are read only`
}

func snapshotSpans(s *kv.PromptState) {
	v, err := s.Snapshot()
	if err != nil {
		return
	}
	defer v.Release()
	sp, err := v.Spans(0, v.Len())
	if err != nil {
		return
	}
	dev.Scale(sp.Token, 2) // want `write through a view of snapshot PromptSnapshot, which is immutable`
}

// ---- AdoptPrefix ends the spans handed out before it ----

func adoptAfterAppend(s *kv.PromptState, keys []int32) {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return
	}
	if _, err := s.AdoptPrefix(keys); err != nil {
		return
	}
	dev.Scale(sp.Hidden, 1) // want `write through the spans AppendDevice of PromptState returned after a later call on the state \(AdoptPrefix\)`
}

// ---- an appends method on a snapshot ----

// frozen wraps a state as if it were a snapshot.
//
//state:snapshot
type frozen struct{ s *kv.PromptState }

// AdoptPrefix contradicts the snapshot it is declared on.
//
//state:appends
func (f *frozen) AdoptPrefix(keys []int32) (int, error) { return f.s.AdoptPrefix(keys) }

func adoptOnSnapshot(f *frozen, keys []int32) {
	f.AdoptPrefix(keys) // want `AdoptPrefix mutates its receiver, but frozen is an immutable snapshot; call it on the state head \(or a branch of it\)`
}

// ---- no findings ----

// The rows past the adopted prefix are computed and written through
// AppendDevice.
func prefill(p *state.Pool, keys []int32, out []float32) error {
	s, err := kv.NewPromptStateShared(p, "req", "tenant")
	if err != nil {
		return err
	}
	defer s.Release()
	n, err := s.AdoptPrefix(keys)
	if err != nil {
		return err
	}
	sp, err := s.AppendDevice(len(keys) - n)
	if err != nil {
		return err
	}
	if err := dev.Scale(sp.Hidden, 1); err != nil {
		return err
	}
	all, err := s.Spans(0, s.Len())
	if err != nil {
		return err
	}
	return dev.Gather(out, all.Hidden)
}
