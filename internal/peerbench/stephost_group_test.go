package peerbench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/state"
)

// rpModel is a HybridR group's expected content.
type rpModel struct {
	toks []int32
	rec  []float32
}

func (m rpModel) clone() rpModel {
	return rpModel{toks: slices.Clone(m.toks), rec: slices.Clone(m.rec)}
}

func rpIn(tok int32) RecIn {
	x := make([]float32, RecRows*InDim)
	inputOf(x, tok)
	return RecIn{X: x}
}

// rpToken feeds g one token: the Rec step by StepHost, then the KV row.
func rpToken(g *HybridRState, m *rpModel, tok int32, row *Ctx) error {
	in := rpIn(tok)
	if err := g.Rec().StepHost(in, recurStep); err != nil {
		return err
	}
	rpStep(m.rec, in)
	if err := g.KV().Append(rowOf(row, tok)); err != nil {
		return err
	}
	m.toks = append(m.toks, tok)
	return nil
}

func rpCheck(g *HybridRState, m rpModel) error {
	kv, err := g.KV().Read(0, g.KV().Len())
	if err != nil {
		return err
	}
	if !slices.Equal(kv.Token, m.toks) {
		return fmt.Errorf("KV tokens %v, want %v", kv.Token, m.toks)
	}
	r, err := g.Rec().Read(0, RecRows)
	if err != nil {
		return err
	}
	if !slices.Equal(r.H, m.rec) {
		return errors.New("Rec reads otherwise")
	}
	return nil
}

// TestGroupModel: a HybridR group driven at random (tokens through
// StepHost, snapshots, rollbacks, branches merged back, Rec().At of every
// version seen), on the host backend and on one that copies, with and
// without a small MaxBytes; every read matches the model, no call
// panics, and the pool has no blocks once everything is released.
func TestGroupModel(t *testing.T) {
	for _, bk := range []string{"host", "counts"} {
		for _, maxBytes := range []int64{0, 2 << 20} {
			for seed := range uint64(1) {
				t.Run(fmt.Sprintf("%s/max%d/seed%d", bk, maxBytes, seed), func(t *testing.T) {
					p := rpPool(t, bk, state.PoolOptions{MaxBytes: maxBytes})
					err := rpSafe(func() error { return rpGroupRun(p, seed) })
					if err != nil {
						t.Error(err)
					}
					if st := p.Stats(); st.Blocks != 0 {
						t.Errorf("Blocks = %d after everything was released", st.Blocks)
					}
					if err := p.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
			}
		}
	}
}

func rpGroupRun(p *state.Pool, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	g, err := NewHybridRState(p, "me")
	if err != nil {
		return err
	}
	defer g.Release()
	row := newRow()
	m := rpModel{rec: make([]float32, RecRows*RecDim)}
	recRef := map[state.Version][]float32{g.Rec().Version(): slices.Clone(m.rec)}
	type cut struct {
		s *HybridRSnapshot
		m rpModel
	}
	var cuts []cut
	defer func() {
		for _, c := range cuts {
			c.s.Release()
		}
	}()
	tok := int32(1)
	for op := range 150 {
		switch k := rng.IntN(10); {
		case k < 5:
			for range 1 + rng.IntN(5) {
				if g.KV().Len() >= Tokens-1 {
					break
				}
				if err := rpToken(g, &m, tok, row); err != nil {
					return fmt.Errorf("op %d token: %w", op, err)
				}
				tok++
				recRef[g.Rec().Version()] = slices.Clone(m.rec)
			}
		case k == 5:
			s, err := g.Snapshot()
			if err != nil {
				return fmt.Errorf("op %d snapshot: %w", op, err)
			}
			cuts = append(cuts, cut{s, m.clone()})
		case k == 6 && len(cuts) > 0:
			i := rng.IntN(len(cuts))
			if err := g.Rollback(cuts[i].s); err != nil {
				return fmt.Errorf("op %d rollback to cut %d of %d: %w", op, i, len(cuts), err)
			}
			m = cuts[i].m.clone()
			for _, c := range cuts[i+1:] {
				c.s.Release()
			}
			cuts = cuts[:i+1]
		case k == 7:
			c, err := g.Branch()
			if err != nil {
				return fmt.Errorf("op %d branch: %w", op, err)
			}
			cm := m.clone()
			for range 1 + rng.IntN(20) {
				if err := rpToken(c, &cm, tok, row); err != nil {
					c.Release()
					return fmt.Errorf("op %d branch token: %w", op, err)
				}
				tok++
				recRef[c.Rec().Version()] = slices.Clone(cm.rec)
			}
			// At of the branch's versions, across its checkpoints.
			for v, want := range recRef {
				a, err := c.Rec().At(v)
				if err != nil {
					continue
				}
				got, err := a.Read(0, RecRows)
				a.Release()
				if err != nil {
					c.Release()
					return err
				}
				if !slices.Equal(got.H, want) {
					c.Release()
					return fmt.Errorf("op %d: branch Rec().At(%d) reads otherwise", op, v)
				}
			}
			if rng.IntN(3) > 0 {
				if err := g.Merge(c); err != nil {
					c.Release()
					return fmt.Errorf("op %d merge: %w", op, err)
				}
				m = cm
			}
			if err := c.Release(); err != nil {
				return err
			}
		case k == 8:
			for v, want := range recRef {
				a, err := g.Rec().At(v)
				if err != nil {
					if errors.Is(err, state.ErrNotRetained) {
						continue
					}
					return fmt.Errorf("op %d: Rec().At(%d): %w", op, v, err)
				}
				got, err := a.Read(0, RecRows)
				a.Release()
				if err != nil {
					return err
				}
				if !slices.Equal(got.H, want) {
					return fmt.Errorf("op %d: Rec().At(%d) reads otherwise", op, v)
				}
			}
		case k == 9:
			// A member's snapshot of an At, then a group rollback to a cut.
			s, err := g.Rec().Snapshot()
			if err != nil {
				return err
			}
			s.Release()
		}
		if err := rpCheck(g, m); err != nil {
			return fmt.Errorf("op %d: %w", op, err)
		}
	}
	return nil
}

// TestGroupAdoptReplay: a shared HybridR group steps its Rec member by
// StepHost for a prompt; a second group adopts the prefix, steps on, and
// its Rec member's At rebuilds every version it made since the adoption
// (across checkpoints), rollback to a cut before and after the adoption
// works, and everything released leaves no blocks.
func TestGroupAdoptReplay(t *testing.T) {
	for _, bk := range []string{"host", "counts"} {
		t.Run(bk, func(t *testing.T) {
			p := rpPool(t, bk, state.PoolOptions{})
			if err := rpSafe(func() error { return rpAdopt(p) }); err != nil {
				t.Error(err)
			}
			p.ForgetPrefixes("dom")
			if st := p.Stats(); st.Blocks != 0 {
				t.Errorf("Blocks = %d after everything was released", st.Blocks)
			}
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func rpAdopt(p *state.Pool) error {
	row := newRow()
	a, err := NewHybridRStateShared(p, "a", "dom")
	if err != nil {
		return err
	}
	ma := rpModel{rec: make([]float32, RecRows*RecDim)}
	prefix := map[int][]float32{} // rec after n tokens
	for i := range 300 {
		if err := rpToken(a, &ma, int32(i+1), row); err != nil {
			a.Release()
			return err
		}
		prefix[i+1] = slices.Clone(ma.rec)
	}
	a.Release()
	g, err := NewHybridRStateShared(p, "b", "dom")
	if err != nil {
		return err
	}
	defer g.Release()
	empty, err := g.Snapshot()
	if err != nil {
		return err
	}
	defer empty.Release()
	n, err := g.AdoptPrefix(ma.toks)
	if err != nil {
		return fmt.Errorf("adopt: %w", err)
	}
	if n == 0 {
		return errors.New("adopted nothing")
	}
	m := rpModel{toks: slices.Clone(ma.toks[:n]), rec: slices.Clone(prefix[n])}
	if err := rpCheck(g, m); err != nil {
		return fmt.Errorf("after adopting %d: %w", n, err)
	}
	adopted, err := g.Snapshot()
	if err != nil {
		return err
	}
	defer adopted.Release()
	ref := map[state.Version][]float32{g.Rec().Version(): slices.Clone(m.rec)}
	var mid *HybridRSnapshot
	var mm rpModel
	for i := range 40 {
		if err := rpToken(g, &m, int32(5000+i), row); err != nil {
			return err
		}
		ref[g.Rec().Version()] = slices.Clone(m.rec)
		if i == 25 {
			if mid, err = g.Snapshot(); err != nil {
				return err
			}
			mm = m.clone()
		}
	}
	defer mid.Release()
	for v, want := range ref {
		s, err := g.Rec().At(v)
		if err != nil {
			return fmt.Errorf("Rec().At(%d) after adoption: %w", v, err)
		}
		got, err := s.Read(0, RecRows)
		s.Release()
		if err != nil {
			return err
		}
		if !slices.Equal(got.H, want) {
			return fmt.Errorf("Rec().At(%d) reads otherwise", v)
		}
	}
	if err := g.Rollback(mid); err != nil {
		return fmt.Errorf("rollback to mid: %w", err)
	}
	if err := rpCheck(g, mm); err != nil {
		return fmt.Errorf("after rollback to mid: %w", err)
	}
	if err := g.Rollback(adopted); err != nil {
		return fmt.Errorf("rollback to adopted: %w", err)
	}
	if err := rpCheck(g, rpModel{toks: ma.toks[:n], rec: prefix[n]}); err != nil {
		return fmt.Errorf("after rollback to adopted: %w", err)
	}
	if err := g.Rollback(empty); err != nil {
		return fmt.Errorf("rollback to empty: %w", err)
	}
	if err := rpCheck(g, rpModel{rec: make([]float32, RecRows*RecDim)}); err != nil {
		return fmt.Errorf("after rollback to empty: %w", err)
	}
	// Step on after the rollbacks: a fresh line.
	m = rpModel{rec: make([]float32, RecRows*RecDim)}
	for i := range 20 {
		if err := rpToken(g, &m, int32(9000+i), row); err != nil {
			return err
		}
	}
	return rpCheck(g, m)
}
