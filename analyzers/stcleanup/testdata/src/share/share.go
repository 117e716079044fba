// Package share acquires heads with declared prefix sharing: a shared
// head and the prefix it adopts are released like any other head.
package share

import (
	"kv"

	"github.com/gpustate/gpustate/runtime/state"
)

type cache struct{ s *kv.PromptState }

// ---- leaks ----

func leakShared(p *state.Pool, rows kv.Prompt, early bool) error {
	s, err := kv.NewPromptStateShared(p, "req", "tenant") // want `PromptState acquired by NewPromptStateShared is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return err
	}
	if early {
		return nil
	}
	if err := s.Append(rows); err != nil {
		s.Release()
		return err
	}
	return s.Release()
}

func discardedShared(p *state.Pool) {
	_, _ = kv.NewPromptStateShared(p, "req", "tenant") // want `PromptState acquired by NewPromptStateShared is discarded`
}

// The error of AdoptPrefix is returned before the release.
func adoptError(p *state.Pool, keys []int32) (int, error) {
	s, err := kv.NewPromptStateShared(p, "req", "tenant") // want `PromptState acquired by NewPromptStateShared is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return 0, err
	}
	n, err := s.AdoptPrefix(keys)
	if err != nil {
		return 0, err
	}
	s.Release()
	return n, nil
}

// Returning the adopted rows does not hand the head on.
func adoptRows(p *state.Pool, keys []int32) (int, error) {
	s, err := kv.NewPromptStateShared(p, "req", "tenant") // want `PromptState acquired by NewPromptStateShared is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return 0, err
	}
	return s.AdoptPrefix(keys)
}

// A returned head leaks on the path where AdoptPrefix failed.
func adoptThenReturn(p *state.Pool, keys []int32) (*kv.PromptState, int, error) {
	s, err := kv.NewPromptStateShared(p, "req", "tenant") // want `PromptState acquired by NewPromptStateShared is not released on every path`
	if err != nil {
		return nil, 0, err
	}
	n, err := s.AdoptPrefix(keys)
	if err != nil {
		return nil, 0, err
	}
	return s, n, nil
}

func leakSharedHead(p *state.Pool, l *state.Layout, keys []byte) (int, error) {
	h, err := p.NewSharedHead(l, "req", "tenant") // want `Head acquired by NewSharedHead is not released on every path; add defer h.Release\(\)`
	if err != nil {
		return 0, err
	}
	n, err := h.AdoptPrefix(keys)
	if err != nil {
		return 0, err
	}
	return n, h.Release()
}

func discardedSharedHead(p *state.Pool, l *state.Layout) {
	p.NewSharedHead(l, "req", "tenant") // want `Head acquired by NewSharedHead is discarded; assign it and call its Release method when done`
}

func overwrittenShared(p *state.Pool, prompts [][]int32) error {
	var s *kv.PromptState
	for _, keys := range prompts {
		var err error
		s, err = kv.NewPromptStateShared(p, "req", "tenant") // want `PromptState acquired by NewPromptStateShared is overwritten before it is released`
		if err != nil {
			return err
		}
		if _, err := s.AdoptPrefix(keys); err != nil {
			return err
		}
	}
	return nil
}

// Keeping only the error drops the head when the call succeeds.
func discardedKeepErr(p *state.Pool, l *state.Layout) bool {
	_, err := p.NewSharedHead(l, "req", "tenant") // want `Head acquired by NewSharedHead is discarded: _ drops it when the call succeeds`
	return err != nil
}

// ---- no leaks ----

func deferShared(p *state.Pool, keys []int32, rows kv.Prompt) (int, error) {
	s, err := kv.NewPromptStateShared(p, "req", "tenant")
	if err != nil {
		return 0, err
	}
	defer s.Release()
	n, err := s.AdoptPrefix(keys)
	if err != nil {
		return 0, err
	}
	return n, s.Append(rows)
}

func releaseOnAdoptError(p *state.Pool, keys []int32) (*kv.PromptState, int, error) {
	s, err := kv.NewPromptStateShared(p, "req", "tenant")
	if err != nil {
		return nil, 0, err
	}
	n, err := s.AdoptPrefix(keys)
	if err != nil {
		s.Release()
		return nil, 0, err
	}
	return s, n, nil
}

func escapeToField(c *cache, p *state.Pool, keys []int32) error {
	s, err := kv.NewPromptStateShared(p, "req", "tenant")
	if err != nil {
		return err
	}
	c.s = s
	_, err = s.AdoptPrefix(keys)
	return err
}

func returnShared(p *state.Pool, d state.Domain) (*kv.PromptState, error) {
	return kv.NewPromptStateShared(p, "req", d)
}

func deferSharedHead(p *state.Pool, l *state.Layout, keys []byte) (int, error) {
	h, err := p.NewSharedHead(l, "req", "tenant")
	if err != nil {
		return 0, err
	}
	defer h.Release()
	return h.AdoptPrefix(keys)
}
