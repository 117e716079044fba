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

// The host tier step: more prompt caches than device memory holds,
// visited in turn, in a pool without a host tier and in one with a tier
// that holds them all.
const (
	tierPrompts = 12 // optional PromptCache states, one prompt each
	tierRounds  = 3  // visits of every prompt, in turn
	tierFits    = 4  // prompts device memory holds
)

// hostTier serves tierPrompts prompts, tierFits at a time in device
// memory, visiting them in turn tierRounds times: a prompt the pool
// dropped is computed again (its rows appended anew). With a host tier
// (state.PoolOptions.HostTier) the pool moves what it would drop to host
// memory instead, and a visit brings it back with its rows as they were.
func hostTier(w io.Writer, b device.Backend) error {
	prompt := makePrompt(promptRows)
	want := rows(prompt, 0)
	serve := func(tier int64) (recomputed int, st state.PoolStats, err error) {
		p, err := state.NewPool(b, state.PoolOptions{BlockBytes: pressureBlock, MaxBytes: tierFits * 3 * pressureBlock, HostTier: tier})
		if err != nil {
			return 0, st, err
		}
		observe(p, fmt.Sprintf("tier-%d", tier))
		pcs := make([]*cache.PromptCacheState, tierPrompts)
		defer func() {
			for _, c := range pcs {
				if c != nil {
					err = errors.Join(err, c.Release())
				}
			}
			err = errors.Join(err, p.Close())
		}()
		compute := func(i int) error {
			if pcs[i] != nil {
				if err := pcs[i].Release(); err != nil {
					return err
				}
			}
			c, err := cache.NewPromptCacheState(p, state.Owner(fmt.Sprintf("prompt-%d", i)))
			if err != nil {
				return err
			}
			pcs[i] = c
			return c.Append(cache.PromptCache(want))
		}
		for i := range pcs {
			if err := compute(i); err != nil {
				return 0, st, err
			}
		}
		for range tierRounds {
			for i, c := range pcs {
				got, err := c.Read(0, c.Len())
				if errors.Is(err, state.ErrEvicted) {
					if err := compute(i); err != nil {
						return 0, st, err
					}
					recomputed += promptRows
					continue
				}
				if err != nil {
					return 0, st, err
				}
				if !slices.Equal(got.Keys, want.Keys) || !slices.Equal(got.Token, want.Token) {
					return 0, st, fmt.Errorf("host tier: prompt-%d's rows changed", i)
				}
				// Prefetch the next one: with a tier, its return starts
				// before the visit needs it.
				if err := pcs[(i+1)%len(pcs)].Prefetch(); err != nil && !errors.Is(err, state.ErrEvicted) {
					return 0, st, err
				}
			}
		}
		return recomputed, p.Stats(), nil
	}
	off, _, err := serve(0)
	if err != nil {
		return err
	}
	on, st, err := serve(tierPrompts * 3 * pressureBlock)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "host tier: %d prompts of %d rows, device memory for %d, each visited %d times in turn\n",
		tierPrompts, promptRows, tierFits, tierRounds)
	fmt.Fprintf(w, "  prompt rows recomputed: %d without a host tier, %d with one (%s moved out, %s brought back, %s dropped)\n",
		off, on, size(st.TierOut), size(st.TierIn), size(st.TierDropped))
	return nil
}
