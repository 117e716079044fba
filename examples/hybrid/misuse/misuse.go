//go:build statevet_demo

// Package misuse holds the mistake groups exist to prevent, on purpose,
// for statevet to catch: a speculative decoder that rolls back the KV
// cache alone after a rejected draft, leaving the recurrent state at the
// draft. At run time the call answers state.ErrCoupled and changes
// nothing; statevet reports it at compile time (stalias).
//
//	GOFLAGS=-tags=statevet_demo statevet ./examples/hybrid/misuse
//
// It builds only with -tags statevet_demo, so that the repository's own
// checks stay clean. expected.txt lists the findings; make demo checks that
// statevet reports exactly those.
package misuse

import "github.com/gpustate/gpustate/examples/hybrid/decoder"

// reject undoes a rejected draft: it should roll the group back to cut,
// but rolls back one member.
func reject(s *decoder.DecoderState, cut *decoder.DecoderSnapshot) error {
	kv := s.KV()
	return kv.Rollback(cut.KV())
}

// draft feeds a draft on the member's own branch, which is an ordinary
// handle: its rollback and release are its own, and statevet says nothing.
func draft(s *decoder.DecoderState, row decoder.KVCache) error {
	b, err := s.KV().Branch()
	if err != nil {
		return err
	}
	defer b.Release()
	snap, err := b.Snapshot()
	if err != nil {
		return err
	}
	defer snap.Release()
	if err := b.Append(row); err != nil {
		return err
	}
	return b.Rollback(snap)
}
