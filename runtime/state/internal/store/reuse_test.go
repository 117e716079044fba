package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustate/gpustate/examples/hybrid/decoder"
	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// These tests drive the reuse of released roots (root.keep), the snapshot
// and branch held inside their generated handles (SnapshotInto,
// BranchInto), the group cuts' inline snapshots and the generated Step
// through the generated handles only: whatever a release gives back for
// reuse, no live handle may read another's rows, and everything released
// leaves the pool empty.

func breakPool(t *testing.T) *state.Pool {
	t.Helper()
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// kvRows returns a KVCache batch whose row i carries tok[i] as its Token
// and in the first key and value.
func kvRows(tok []int32) cache.KVCache {
	b := cache.KVCache{
		Keys:   make([]float32, len(tok)*256),
		Values: make([]float32, len(tok)*256),
		Token:  slices.Clone(tok),
	}
	for i, v := range tok {
		b.Keys[i*256] = float32(v)
		b.Values[i*256+255] = float32(v)
	}
	return b
}

// kvReader is a KVCacheState or a KVCacheSnapshot.
type kvReader interface {
	Len() int
	Read(from, to int) (cache.KVCache, error)
	ReadFields(dst *cache.KVCache, from, to int) error
}

// kvCheck reports where r does not read as want: every row's Token, and
// the keys and values of the last row (a read of every key is too slow
// for the race detector).
func kvCheck(r kvReader, want []int32) error {
	n := len(want)
	dst := cache.KVCache{Token: make([]int32, 0, n)}
	if err := r.ReadFields(&dst, 0, n); err != nil {
		return err
	}
	if got := r.Len(); got != n {
		if err := r.ReadFields(&dst, 0, 0); err != nil {
			return err // the pool closed between the read and Len
		}
		return fmt.Errorf("%d rows, want %d", got, n)
	}
	if i := slices.Compare(dst.Token, want); i != 0 {
		return fmt.Errorf("tokens %v, want %v", tail(dst.Token), tail(want))
	}
	if n == 0 {
		return nil
	}
	got, err := r.Read(n-1, n)
	if err != nil {
		return err
	}
	if v := float32(want[n-1]); got.Keys[0] != v || got.Values[255] != v {
		return fmt.Errorf("row %d reads key %v value %v, want %v", n-1, got.Keys[0], got.Values[255], v)
	}
	return nil
}

// tail is the last rows of tok, for a message.
func tail(tok []int32) []int32 { return tok[max(0, len(tok)-6):] }

// kvSess is one owner's speculative decode on its own state, with the
// model it reads as and the snapshots it keeps.
type kvSess struct {
	s     *cache.KVCacheState
	model []int32
	keep  []kvKept
	next  int32
}

// kvKept is a snapshot kept and the rows it reads as.
type kvKept struct {
	v    *cache.KVCacheSnapshot
	rows []int32
}

// kvSession runs one owner's speculative decode on its own state: it
// snapshots, appends, releases or keeps snapshots, branches and merges,
// rolls back, and checks every handle it holds against its model.
func kvSession(p *state.Pool, id, rounds int) error {
	s, err := cache.NewKVCacheState(p, state.Owner(fmt.Sprint("o", id)))
	if err != nil {
		return err
	}
	defer s.Release()
	k := &kvSess{s: s, next: int32(id * 1_000_000)}
	defer func() {
		for _, kk := range k.keep {
			kk.v.Release()
		}
	}()
	for r := range rounds {
		if err := k.round(r); err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		if err := kvCheck(s, k.model); err != nil {
			return fmt.Errorf("round %d head: %w", r, err)
		}
		for i, kk := range k.keep {
			if err := kvCheck(kk.v, kk.rows); err != nil {
				return fmt.Errorf("round %d kept snapshot %d: %w", r, i, err)
			}
		}
	}
	return nil
}

// round snapshots, appends two rows, then rolls back to the snapshot,
// releases it, keeps it or branches, by r; a full state rolls back to its
// oldest kept snapshot instead.
func (k *kvSess) round(r int) error {
	v, err := k.s.Snapshot()
	if err != nil {
		return err
	}
	at := slices.Clone(k.model)
	tok := []int32{k.next, k.next + 1}
	k.next += 2
	if len(k.model)+len(tok) > cache.MaxTokens {
		if err := v.Release(); err != nil {
			return err
		}
		return k.full()
	}
	if err := k.s.Append(kvRows(tok)); err != nil {
		return err
	}
	k.model = append(k.model, tok...)
	switch r % 4 {
	case 0: // a speculative draft rejected: roll back and release
		if err := k.s.Rollback(v); err != nil {
			return fmt.Errorf("rollback: %w", err)
		}
		k.model = at
		fallthrough
	case 1:
		if err := kvCheck(v, at); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		if err := v.Release(); err != nil {
			return err
		}
		if _, err := v.Read(0, 0); !errors.Is(err, state.ErrReleased) {
			return fmt.Errorf("a released snapshot reads: %v", err)
		}
	case 2:
		k.keep = append(k.keep, kvKept{v, at})
		if len(k.keep) > 4 { // the oldest stays, for the rollback when full
			k.keep[1].v.Release()
			k.keep = slices.Delete(k.keep, 1, 2)
		}
	case 3:
		v.Release()
		return k.branch()
	}
	return nil
}

// full rolls back to the oldest kept snapshot, which invalidates the rest.
func (k *kvSess) full() error {
	if len(k.keep) == 0 {
		return errors.New("full with nothing kept")
	}
	if err := k.s.Rollback(k.keep[0].v); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	k.model = slices.Clone(k.keep[0].rows)
	for _, kk := range k.keep[1:] {
		if err := kvCheck(kk.v, kk.rows); !errors.Is(err, state.ErrInvalidated) {
			return fmt.Errorf("a snapshot of the abandoned line: %v, want ErrInvalidated", err)
		}
		kk.v.Release()
	}
	k.keep = k.keep[:1]
	return nil
}

// branch writes a row on a branch, checks the head did not see it, and
// brings it back by Merge.
func (k *kvSess) branch() error {
	b, err := k.s.Branch()
	if err != nil {
		return err
	}
	btok := []int32{k.next}
	k.next++
	if len(k.model) < cache.MaxTokens {
		err := b.Append(kvRows(btok))
		if err == nil {
			if err = kvCheck(k.s, k.model); err != nil {
				err = fmt.Errorf("head after its branch wrote: %w", err)
			}
		}
		if err == nil {
			err = k.s.Merge(b)
		}
		if err != nil {
			b.Release()
			return err
		}
		k.model = append(k.model, btok...)
	}
	if err := b.Release(); err != nil {
		return err
	}
	if err := b.Append(kvRows(btok)); !errors.Is(err, state.ErrReleased) {
		return fmt.Errorf("a released branch appends: %v", err)
	}
	return nil
}

// Owners decoding side by side in one pool, each snapshotting, rolling
// back, branching and merging, so that released roots go back and come out
// again for other owners: every handle reads its own rows, and the pool is
// empty once they are done.
func TestReuseOwnersKeepTheirRows(t *testing.T) {
	p := breakPool(t)
	defer p.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for id := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := kvSession(p, id+1, 300); err != nil {
				errs <- fmt.Errorf("owner %d: %w", id+1, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 || st.LogicalBytes != 0 {
		t.Errorf("after every handle's release: %+v", st)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A cut's member snapshot released on its own (the cut's to release, but
// callable), a rollback to a released snapshot, to another owner's, and to
// a released cut: each answers an error, moves nothing, and leaves no
// handle live once the cut and the states go.
func TestReuseReleasedTargets(t *testing.T) {
	b := device.Host()
	p, err := state.NewPool(b, state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	g, err := decoder.NewDecoderState(p, "a")
	if err != nil {
		t.Fatal(err)
	}
	m := decModel{h: make([]float32, decoder.RecLayers*decoder.Dim)}
	if err := g.Rec().Write(0, decoder.Recurrent{H: slices.Clone(m.h)}); err != nil {
		t.Fatal(err)
	}
	for tok := range int32(5) {
		if err := decAdvance(b, g, &m, tok+1); err != nil {
			t.Fatal(err)
		}
	}
	cut, err := g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	at := m.clone()
	if err := decAdvance(b, g, &m, 9); err != nil {
		t.Fatal(err)
	}
	kvErr := cut.KV().Release()
	if _, err := cut.KV().Read(0, 1); kvErr == nil && !errors.Is(err, state.ErrReleased) {
		t.Errorf("a cut's KV snapshot released on its own reads: %v", err)
	}
	if err := decCheck(cut.KV(), cut.Rec(), at); kvErr != nil && err != nil {
		t.Errorf("a cut whose member refused its own release: %v", err)
	}
	if err := g.Rollback(cut); kvErr == nil && err == nil {
		t.Error("a rollback to a cut with a released member answers nil")
	}
	if err := decCheck(g.KV(), g.Rec(), m); err != nil && kvErr == nil {
		t.Errorf("after the refused rollback: %v", err)
	}
	if err := cut.Release(); err != nil {
		t.Error(err)
	}
	if err := g.Rollback(cut); !errors.Is(err, state.ErrReleased) {
		t.Errorf("a rollback to a released cut: %v, want ErrReleased", err)
	}
	if err := g.Merge(nil); err == nil {
		t.Error("a group merge of nil answers nil")
	}
	if err := g.Rec().Step(decoder.RecInput{X: make([]float32, 32)}, nil); err == nil {
		t.Error("a nil step function answers nil")
	}
	if err := g.Release(); err != nil {
		t.Error(err)
	}
	releasedSingle(t, p)
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
		t.Errorf("after every handle's release: %+v", st)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// releasedSingle is TestReuseReleasedTargets for single states: a
// rollback to a released snapshot, then to another owner's, whose root may
// be the one the release gave back.
func releasedSingle(t *testing.T, p *state.Pool) {
	s, err := cache.NewKVCacheState(p, "a")
	if err != nil {
		t.Fatal(err)
	}
	o, err := cache.NewKVCacheState(p, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(kvRows([]int32{1, 2})); err != nil {
		t.Fatal(err)
	}
	v, _ := s.Snapshot()
	if err := s.Append(kvRows([]int32{3})); err != nil {
		t.Fatal(err)
	}
	v.Release()
	if err := o.Append(kvRows([]int32{7, 8, 9})); err != nil {
		t.Fatal(err)
	}
	ov, _ := o.Snapshot()
	if err := o.Append(kvRows([]int32{10})); err != nil {
		t.Fatal(err)
	}
	if err := s.Rollback(v); !errors.Is(err, state.ErrReleased) {
		t.Errorf("a rollback to a released snapshot: %v, want ErrReleased", err)
	}
	if err := s.Rollback(ov); err == nil {
		t.Error("a rollback to another owner's snapshot answers nil")
	}
	if err := kvCheck(s, []int32{1, 2, 3}); err != nil {
		t.Error(err)
	}
	if err := kvCheck(ov, []int32{7, 8, 9}); err != nil {
		t.Error(err)
	}
	if err := s.Rollback(nil); err == nil {
		t.Error("a rollback to nil answers nil")
	}
	if err := s.Merge(nil); err == nil {
		t.Error("a merge of nil answers nil")
	}
	for _, err := range []error{ov.Release(), o.Release(), s.Release()} {
		if err != nil {
			t.Error(err)
		}
	}
}

// tolerable reports whether err is what memory pressure may answer.
func tolerable(err error) bool {
	return errors.Is(err, state.ErrNoMemory) || errors.Is(err, state.ErrEvicted)
}

// sharedSession adopts a tenant's prompt, computes the rest of it, then
// decodes tokens of its own with drafts rolled back, in a pool under
// pressure: whatever it holds reads as its own rows, or answers an error
// that pressure explains.
func sharedSession(p *state.Pool, id, rounds int, prompt []int32, done *atomic.Int64) error {
	s, err := cache.NewKVCacheStateShared(p, state.Owner(fmt.Sprint("s", id)), "tenant")
	if err != nil {
		return err
	}
	defer s.Release()
	n, err := s.AdoptPrefix(prompt)
	if err != nil {
		return err
	}
	if n < len(prompt) {
		if err := s.Append(kvRows(prompt[n:])); err != nil {
			if tolerable(err) {
				return nil
			}
			return err
		}
	}
	model := slices.Clone(prompt)
	tok := int32(id * 1_000_000)
	for r := range rounds {
		if len(model) >= cache.MaxTokens-1 {
			break
		}
		v, err := s.Snapshot()
		if err != nil {
			if tolerable(err) {
				return nil
			}
			return err
		}
		at := slices.Clone(model)
		tok++
		err = s.Append(kvRows([]int32{tok}))
		if err == nil {
			model = append(model, tok)
			if r%2 == 0 {
				if err = s.Rollback(v); err == nil {
					model = at
				}
			}
		}
		if err == nil {
			if err = kvCheck(v, at); err == nil {
				err = kvCheck(s, model)
			}
		}
		v.Release()
		done.Add(1)
		if err != nil {
			if tolerable(err) {
				return nil
			}
			return fmt.Errorf("round %d: %w", r, err)
		}
	}
	return nil
}

// Sessions of one tenant adopting a shared prompt in a pool capped so that
// prefix entries, heads and snapshots are evicted or moved to the host
// tier while roots come and go: no session reads rows not its own.
func TestReuseSharedUnderPressure(t *testing.T) {
	const block = 16 << 10
	p, err := state.NewPool(device.Host(), state.PoolOptions{BlockBytes: block, MaxBytes: 48 * block, HostTier: 32 * block})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(i + 1)
	}
	var wg sync.WaitGroup
	var done atomic.Int64
	errs := make(chan error, 64)
	for wave := range 4 {
		for id := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := sharedSession(p, wave*10+id+1, 60, prompt, &done); err != nil {
					errs <- fmt.Errorf("session %d: %w", wave*10+id+1, err)
				}
			}()
		}
		wg.Wait()
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := p.Stats(); st.Live != 0 || st.LogicalBytes != 0 {
		t.Errorf("after every handle's release: %+v", st)
	}
	p.ForgetPrefixes("tenant")
	if st := p.Stats(); st.PhysicalBytes != 0 || st.TierBytes != 0 {
		t.Errorf("after the prefixes are forgotten: %+v", st)
	}
	if st := p.Stats(); st.Evictions == 0 || st.TierOut == 0 || st.AdoptHits == 0 || done.Load() < 24*30 {
		t.Errorf("%d rounds done, %+v: the pool was not under pressure or the sessions gave up", done.Load(), st)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// Sessions still decoding when the pool closes: their calls answer
// ErrReleased (or succeed, before the close), nothing panics, and Close
// names the handles it released.
func TestReuseCloseWhileDecoding(t *testing.T) {
	for round := range 5 {
		p := breakPool(t)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for id := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := kvSession(p, id+1, 200)
				if err != nil && !errors.Is(err, state.ErrReleased) {
					errs <- fmt.Errorf("owner %d: %w", id+1, err)
				}
			}()
		}
		time.Sleep(time.Duration(round) * 2 * time.Millisecond)
		p.Close()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if st := p.Stats(); st.Live != 0 {
			t.Errorf("after Close: %+v", st)
		}
	}
}

// Close with a state, its snapshot and branch, and a group and its cut
// still live: it names them, releases them (their calls answer
// ErrReleased, the cut's members' included) and leaves the pool empty.
func TestReuseCloseNamesLive(t *testing.T) {
	b := device.Host()
	p, err := state.NewPool(b, state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cache.NewKVCacheState(p, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(kvRows([]int32{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	v, _ := s.Snapshot()
	br, _ := s.Branch()
	g, err := decoder.NewDecoderState(p, "bob")
	if err != nil {
		t.Fatal(err)
	}
	m := decModel{h: make([]float32, decoder.RecLayers*decoder.Dim)}
	if err := g.Rec().Write(0, decoder.Recurrent{H: slices.Clone(m.h)}); err != nil {
		t.Fatal(err)
	}
	if err := decAdvance(b, g, &m, 5); err != nil {
		t.Fatal(err)
	}
	cut, _ := g.Snapshot()
	err = p.Close()
	if err == nil || !strings.Contains(err.Error(), "alice") || !strings.Contains(err.Error(), "bob") {
		t.Errorf("Close with live handles: %v", err)
	}
	if _, err := v.Read(0, 1); !errors.Is(err, state.ErrReleased) {
		t.Errorf("snapshot after Close: %v", err)
	}
	if err := br.Append(kvRows([]int32{4})); !errors.Is(err, state.ErrReleased) {
		t.Errorf("branch after Close: %v", err)
	}
	if _, err := cut.Rec().Read(0, 1); !errors.Is(err, state.ErrReleased) {
		t.Errorf("cut member after Close: %v", err)
	}
	if err := g.Rollback(cut); !errors.Is(err, state.ErrReleased) {
		t.Errorf("group rollback after Close: %v", err)
	}
	for _, err := range []error{v.Release(), br.Release(), s.Release(), cut.Release(), g.Release()} {
		if err != nil {
			t.Errorf("a release after Close: %v", err)
		}
	}
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
		t.Errorf("after Close: %+v", st)
	}
}

// promptBatch is prompt i's 16 rows.
func promptBatch(i int) cache.PromptCache {
	kv := kvRows(nil)
	for j := range 16 {
		kv2 := kvRows([]int32{int32(i*1000 + j)})
		kv.Keys = append(kv.Keys, kv2.Keys...)
		kv.Values = append(kv.Values, kv2.Values...)
		kv.Token = append(kv.Token, kv2.Token...)
	}
	return cache.PromptCache(kv)
}

// promptVisits keeps prompts [from, to) (optional states) and visits them
// in turn: each reads as its own rows, or answers ErrEvicted and is
// computed again.
func promptVisits(p *state.Pool, from, to, rounds int) (err error) {
	pcs := map[int]*cache.PromptCacheState{}
	defer func() {
		for _, c := range pcs {
			err = errors.Join(err, c.Release())
		}
	}()
	for r := range rounds {
		for i := from; i < to; i++ {
			c := pcs[i]
			if c != nil {
				got, err := c.Read(0, 16)
				if err == nil && !slices.Equal(got.Token, promptBatch(i).Token) {
					return fmt.Errorf("round %d: prompt %d reads %v", r, i, tail(got.Token))
				}
				if err == nil && got.Keys[15*256] != float32(i*1000+15) {
					return fmt.Errorf("round %d: prompt %d reads key %v", r, i, got.Keys[15*256])
				}
				if err == nil || !errors.Is(err, state.ErrEvicted) && !errors.Is(err, state.ErrNoMemory) {
					if err != nil {
						return err
					}
					continue
				}
				if err := c.Release(); err != nil {
					return err
				}
			}
			c, err := cache.NewPromptCacheState(p, state.Owner(fmt.Sprint("prompt-", i)))
			if err != nil {
				return err
			}
			pcs[i] = c
			if err := c.Append(promptBatch(i)); err != nil {
				if !tolerable(err) {
					return err
				}
				delete(pcs, i) // computed again on the next visit
				if err := c.Release(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Optional prompt states moved to the host tier, dropped and brought back
// by other goroutines' allocations while sessions snapshot and roll back in
// the same capped pool: every prompt reads as its own rows or as evicted.
func TestReuseTierMoves(t *testing.T) {
	const block = 16 << 10
	p, err := state.NewPool(device.Host(), state.PoolOptions{BlockBytes: block, MaxBytes: 20 * block, HostTier: 40 * block})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// One goroutine first, so that the tier is used however the
	// goroutines after it are scheduled.
	if err := promptVisits(p, 0, 16, 3); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := promptVisits(p, w*4, w*4+4, 30); err != nil {
				errs <- fmt.Errorf("prompts %d: %w", w, err)
			}
		}()
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sharedSession(p, 100+w, 60, nil, new(atomic.Int64)); err != nil {
				errs <- fmt.Errorf("session %d: %w", w, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	p.ForgetPrefixes("tenant")
	st := p.Stats()
	t.Logf("%+v", st)
	if st.Live != 0 || st.LogicalBytes != 0 || st.PhysicalBytes != 0 || st.TierBytes != 0 {
		t.Errorf("after every handle's release: %+v", st)
	}
	if st.TierOut == 0 || st.TierIn == 0 {
		t.Errorf("no move to or from the host tier: %+v", st)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
