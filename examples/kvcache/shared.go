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

// The sharing step: sessions of one tenant that open with the same system
// prompt. KVCache's contract says //state:share prefix key=Token, so a
// session made by NewKVCacheStateShared in a tenant's domain adopts the
// full blocks an earlier session of that domain wrote for the same tokens
// (AdoptPrefix) and computes only the rows after them. A token's keys and
// values depend only on the tokens up to it (row in model.go), so the rows
// adopted are the rows it would have computed.

const (
	tenantA state.Domain = "tenant-a"
	tenantB state.Domain = "tenant-b"
)

// sharedPrompts returns the prompt of each of n sessions: the same system
// prompt of system tokens, then private tokens of the session's own, the
// first of which differs from every other session's (while n <= vocab).
func sharedPrompts(n, system, private int) [][]int32 {
	sys := makePrompt(system)
	out := make([][]int32, n)
	for i := range out {
		p := slices.Grow(slices.Clone(sys), private)
		for j := range private {
			p = append(p, int32((i+j*11)%vocab))
		}
		out[i] = p
	}
	return out
}

// prefillRun is what one run of the sharing step measured.
type prefillRun struct {
	computed, adopted  int             // rows computed on the host and rows adopted
	logical, physical  int64           // the pool's bytes with every session live
	cached             int64           // the pool's cached prefix bytes once every session is released
	forgotten          int64           // what ForgetPrefixes gave back
	rows               []cache.KVCache // each session's rows, read back
	otherTenantAdopted int             // rows a session of tenantB adopted (-1: not tried)
}

// shared runs the sessions of cfg twice on backend b, each time in a pool
// of its own: sharing their prompt's prefix in tenantA's domain, and
// without sharing; and checks that every session reads back the same rows
// in both.
func shared(w io.Writer, b device.Backend, cfg config) error {
	prompts := sharedPrompts(cfg.sessions, cfg.system, cfg.private)
	with, err := prefillSessions(b, prompts, tenantA)
	if err != nil {
		return err
	}
	without, err := prefillSessions(b, prompts, "")
	if err != nil {
		return err
	}
	total := with.computed + with.adopted
	fmt.Fprintf(w, "prefix sharing: %d sessions of %s, each a %d-token system prompt and %d tokens of its own, made by NewKVCacheStateShared(p, owner, %q)\n",
		cfg.sessions, tenantA, cfg.system, cfg.private, tenantA)
	fmt.Fprintf(w, "  prefill: %d rows computed, %d adopted by AdoptPrefix instead of computed: %.0f%% of %d rows skipped\n",
		with.computed, with.adopted, percent(with.adopted, total), total)
	fmt.Fprintf(w, "  every session live: logical %s; physical %s shared, %s with NewKVCacheState in a fresh pool (%.1fx less)\n",
		size(with.logical), size(with.physical), size(without.physical), float64(without.physical)/float64(with.physical))
	for i := range prompts {
		g, u := with.rows[i], without.rows[i]
		if !slices.Equal(g.Keys, u.Keys) || !slices.Equal(g.Values, u.Values) || !slices.Equal(g.Token, u.Token) {
			return fmt.Errorf("prefix sharing: session %d reads back other rows with sharing than without", i)
		}
	}
	fmt.Fprintf(w, "  every session's %d rows read back identical in both runs\n", cfg.system+cfg.private)
	fmt.Fprintf(w, "  a session of %s with the same prompt adopts %d rows: no block crosses domains\n", tenantB, with.otherTenantAdopted)
	fmt.Fprintf(w, "  sessions released: the pool still caches %s of %s's prefix blocks for later sessions (optional, evicted under pressure); ForgetPrefixes gives back %s\n",
		size(with.cached), tenantA, size(with.forgotten))
	return nil
}

// prefillSessions makes a KVCache session per prompt in a pool of its own
// on backend b, shared in domain d (NewKVCacheState when d is empty), each
// adopting what it can of its prompt and appending the rows computed for
// the rest; reads every session's rows back, and releases everything.
func prefillSessions(b device.Backend, prompts [][]int32, d state.Domain) (run prefillRun, err error) {
	p, err := state.NewPool(b, state.PoolOptions{BlockBytes: poolBlock})
	if err != nil {
		return run, err
	}
	observe(p, string(d))
	defer func() { err = errors.Join(err, p.Close()) }()
	var live []*cache.KVCacheState
	defer func() {
		for _, s := range live {
			err = errors.Join(err, s.Release())
		}
	}()
	for i, prompt := range prompts {
		owner := state.Owner(fmt.Sprintf("%s/session-%d", d, i))
		var s *cache.KVCacheState
		if d == "" {
			s, err = cache.NewKVCacheState(p, owner)
		} else {
			s, err = cache.NewKVCacheStateShared(p, owner, d)
		}
		if err != nil {
			return run, err
		}
		live = append(live, s)
		n, err := s.AdoptPrefix(prompt)
		if err != nil {
			return run, err
		}
		if err := s.Append(rows(prompt[n:], n)); err != nil {
			return run, err
		}
		run.adopted += n
		run.computed += len(prompt) - n
	}
	ps := p.Stats()
	run.logical, run.physical = ps.LogicalBytes, ps.PhysicalBytes
	for _, s := range live {
		r, err := s.Read(0, s.Len())
		if err != nil {
			return run, err
		}
		run.rows = append(run.rows, r)
	}
	run.otherTenantAdopted = -1
	if d != "" && len(prompts) > 0 {
		o, err := cache.NewKVCacheStateShared(p, state.Owner(fmt.Sprintf("%s/session-0", tenantB)), tenantB)
		if err != nil {
			return run, err
		}
		live = append(live, o)
		if run.otherTenantAdopted, err = o.AdoptPrefix(prompts[0]); err != nil {
			return run, err
		}
	}
	for len(live) > 0 {
		s := live[len(live)-1]
		live = live[:len(live)-1]
		if err := s.Release(); err != nil {
			return run, err
		}
	}
	run.cached = p.Stats().CachedBytes
	if d != "" {
		run.forgotten = p.ForgetPrefixes(d)
	}
	if ps := p.Stats(); ps.PhysicalBytes != 0 {
		return run, fmt.Errorf("prefix sharing: %s still in use once every session is released and the prefixes forgotten", size(ps.PhysicalBytes))
	}
	return run, nil
}
