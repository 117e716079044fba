package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// The pool of the pressure step: blocks of 16 KiB, capped at what its
// prompt caches take, so that a session's cache only fits by evicting,
// and room for the session's Token blocks. KVCache shares prefixes, so
// its layout holds the same rows per block in every column (16: what a
// block holds of Keys), and its Token column takes blocks of 16 rows of 4
// bytes, rounded up to 256. A slab holds blocks of one size, so memory
// eviction frees serves the Token blocks only once a whole slab of the
// prompt caches' blocks is free: the cap keeps the Token blocks' room
// apart, and eviction takes only what the keys and values need.
const (
	pressureBlock  = 16 << 10
	promptCaches   = 4  // optional PromptCache states that fill the pool
	promptRows     = 16 // rows of each: one block per column
	pressureBlocks = promptCaches * 3
	sessionRows    = 2 * promptRows
	tokenBlock     = 256 // a block of KVCache's Token column
	tokenRoom      = sessionRows / 16 * tokenBlock
	pressureCap    = pressureBlocks*pressureBlock + tokenRoom
)

// pressure runs a pool under memory pressure on backend b: optional
// prompt caches fill it to its MaxBytes, then a mandatory KVCache session
// takes their room. The pool evicts the least recently used prompt caches,
// which answer state.ErrEvicted but still release cleanly, and the
// session's rows read back intact.
func pressure(w io.Writer, b device.Backend) (err error) {
	p, err := state.NewPool(b, state.PoolOptions{BlockBytes: pressureBlock, MaxBytes: pressureCap})
	if err != nil {
		return err
	}
	observe(p, "pressure")
	defer func() { err = errors.Join(err, p.Close()) }()
	prompt := makePrompt(sessionRows)
	var pcs []*cache.PromptCacheState
	defer func() {
		for _, c := range pcs {
			err = errors.Join(err, c.Release())
		}
	}()
	for i := range promptCaches {
		c, err := cache.NewPromptCacheState(p, state.Owner(fmt.Sprintf("prefix-%d", i)))
		if err != nil {
			return err
		}
		pcs = append(pcs, c)
		if err := c.Append(cache.PromptCache(rows(prompt[:promptRows], 0))); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "memory pressure: a pool capped at %s holds %d optional PromptCache states of %d rows (%s in use; the other %s is room for a session's Token blocks, %s each)\n",
		size(pressureCap), promptCaches, promptRows, size(p.Stats().PhysicalBytes), size(tokenRoom), size(tokenBlock))

	s, err := cache.NewKVCacheState(p, "session-3")
	if err != nil {
		return err
	}
	defer s.Release()
	want := rows(prompt, 0)
	if err := s.Append(want); err != nil {
		return err
	}
	var evicted []int
	for i, c := range pcs {
		if _, err := c.Read(0, c.Len()); errors.Is(err, state.ErrEvicted) {
			evicted = append(evicted, i)
		} else if err != nil {
			return err
		}
	}
	if len(evicted) == 0 {
		return errors.New("memory pressure: the session fitted with no eviction")
	}
	fmt.Fprintf(w, "  a mandatory KVCache session of %d rows fits only by eviction: %d of %d PromptCache states evicted, least recently used first\n",
		sessionRows, len(evicted), promptCaches)
	if err := pcs[evicted[0]].Release(); err != nil {
		return err
	}
	fmt.Fprintf(w, "  evicted prefix-%d answers state.ErrEvicted on Read, and its Release succeeds\n", evicted[0])
	got, err := s.Read(0, s.Len())
	if err != nil {
		return err
	}
	if !slices.Equal(got.Keys, want.Keys) || !slices.Equal(got.Values, want.Values) || !slices.Equal(got.Token, want.Token) {
		return errors.New("memory pressure: the mandatory session's rows changed")
	}
	ps := p.Stats()
	fmt.Fprintf(w, "  mandatory session's %d rows read back intact; pool stats: %s evicted, %s in use of %s reserved\n",
		s.Len(), size(ps.EvictedBytes), size(ps.PhysicalBytes), size(ps.ReservedBytes))
	if err := s.Release(); err != nil {
		return err
	}
	return trim(w, p, pcs)
}

// trim releases the prompt caches, then gives the pool's wholly free slabs
// back to the device: what a server does once a burst of sessions is over.
func trim(w io.Writer, p *state.Pool, pcs []*cache.PromptCacheState) error {
	for _, c := range pcs {
		if err := c.Release(); err != nil {
			return err
		}
	}
	trimmed, err := p.Trim()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  every state released: Trim gives %s back to the device, %s stays reserved\n",
		size(trimmed), size(p.Stats().ReservedBytes))
	return nil
}
