// Package share uses heads with declared prefix sharing after their
// release: AdoptPrefix on a released head is a use like any other.
package share

import (
	"kv"

	"github.com/gpustate/gpustate/runtime/state"
)

func drop(s *kv.PromptState) { s.Release() }

func adoptAfterRelease(p *state.Pool, keys []int32) (int, error) {
	s, err := kv.NewPromptStateShared(p, "req", "tenant")
	if err != nil {
		return 0, err
	}
	s.Release()
	return s.AdoptPrefix(keys) // want `PromptState s is used after Release released it; move the Release after its last use`
}

func adoptAfterHelper(p *state.Pool, keys []int32) {
	s, err := kv.NewPromptStateShared(p, "req", "tenant")
	if err != nil {
		return
	}
	drop(s)
	s.AdoptPrefix(keys) // want `PromptState s is used after drop released it`
}

func headAdoptAfterRelease(p *state.Pool, l *state.Layout, keys []byte) int {
	h, err := p.NewSharedHead(l, "req", "tenant")
	if err != nil {
		return 0
	}
	if err := h.Release(); err != nil {
		return 0
	}
	n, _ := h.AdoptPrefix(keys) // want `Head h is used after Release released it`
	return n
}

// ---- no findings ----

func adoptThenRelease(p *state.Pool, keys []int32) (int, error) {
	s, err := kv.NewPromptStateShared(p, "req", "tenant")
	if err != nil {
		return 0, err
	}
	n, err := s.AdoptPrefix(keys)
	s.Release()
	return n, err
}

func deferred(p *state.Pool, keys []int32) (int, error) {
	s, err := kv.NewPromptStateShared(p, "req", "tenant")
	if err != nil {
		return 0, err
	}
	defer s.Release()
	return s.AdoptPrefix(keys)
}

// Each prompt gets a new head, which adopts what the last one left cached.
func reacquired(p *state.Pool, prompts [][]int32) error {
	for _, keys := range prompts {
		s, err := kv.NewPromptStateShared(p, "req", "tenant")
		if err != nil {
			return err
		}
		_, err = s.AdoptPrefix(keys)
		s.Release()
		if err != nil {
			return err
		}
	}
	return nil
}
