package store_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpustate/gpustate/examples/hybrid/decoder"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// The Decoder group half of reuse_test.go: group cuts hold their
// members' snapshots inline, group handles hold their members by value,
// and Step reaches the store as a Stepper.

// decModel is what a Decoder group reads as: its KV tokens and its
// recurrent rows.
type decModel struct {
	tok []int32
	h   []float32
}

func (m decModel) clone() decModel {
	return decModel{slices.Clone(m.tok), slices.Clone(m.h)}
}

// decCheck reports where the KV and Rec handles do not read as m.
func decCheck(kv interface {
	Read(from, to int) (decoder.KVCache, error)
}, rec interface {
	Read(from, to int) (decoder.Recurrent, error)
}, m decModel) error {
	k, err := kv.Read(0, len(m.tok))
	if err != nil {
		return fmt.Errorf("KV: %w", err)
	}
	for i, v := range m.tok {
		if k.Token[i] != v || k.Keys[i*32] != float32(v) {
			return fmt.Errorf("KV row %d reads %d, want %d", i, k.Token[i], v)
		}
	}
	r, err := rec.Read(0, decoder.RecLayers)
	if err != nil {
		return fmt.Errorf("Rec: %w", err)
	}
	if !slices.Equal(r.H, m.h) {
		return fmt.Errorf("Rec reads %v, want %v", r.H[:4], m.h[:4])
	}
	return nil
}

// recStep is a Step function on the host backend: h += x, row by row.
func recStep(b device.Backend, fail bool) func(decoder.RecurrentSpans, decoder.RecInput) error {
	return func(dst decoder.RecurrentSpans, in decoder.RecInput) error {
		row := 0
		for _, sp := range dst.H {
			mem, ok := device.HostBytes(b, sp.Ptr, sp.Rows*decoder.Dim*4)
			if !ok {
				return errors.New("no host bytes")
			}
			h := state.Rows[float32](mem)
			for j := range h {
				h[j] += in.X[row*decoder.Dim+j]
				if fail {
					h[j] = -1
				}
			}
			row += sp.Rows
		}
		if fail {
			return errors.New("step failed")
		}
		return nil
	}
}

// stepInput is the recurrent step's input for token tok.
func stepInput(tok int32) []float32 {
	x := make([]float32, decoder.RecLayers*decoder.Dim)
	for i := range x {
		x[i] = float32(tok%97) + float32(i)
	}
	return x
}

// advance is decAdvance on the model alone.
func (m *decModel) advance(tok int32) {
	m.tok = append(m.tok, tok)
	for i, x := range stepInput(tok) {
		m.h[i] += x
	}
}

// decAdvance steps g's Rec by token tok's input, then appends tok to its
// KV (the order a shared group registers its members in).
func decAdvance(b device.Backend, g *decoder.DecoderState, m *decModel, tok int32) error {
	if err := g.Rec().Step(decoder.RecInput{X: stepInput(tok)}, recStep(b, false)); err != nil {
		return err
	}
	kv := decoder.KVCache{Keys: make([]float32, 32), Values: make([]float32, 32), Token: []int32{tok}}
	kv.Keys[0] = float32(tok)
	if err := g.KV().Append(kv); err != nil {
		return err
	}
	m.advance(tok)
	return nil
}

// decSess is one owner's Decoder group, with the model it reads as, the
// cuts it keeps and the versions At may rebuild.
type decSess struct {
	b    device.Backend
	g    *decoder.DecoderState
	m    decModel
	keep []decKept
	vers map[state.Version][]float32
	tok  int32
}

// decKept is a cut kept and what it reads as.
type decKept struct {
	v *decoder.DecoderSnapshot
	m decModel
}

// decSession runs one owner's Decoder group: cuts rolled back to, cuts kept
// and read later, group branches merged, failed steps.
func decSession(b device.Backend, p *state.Pool, id, rounds int) error {
	g, err := decoder.NewDecoderState(p, state.Owner(fmt.Sprint("d", id)))
	if err != nil {
		return err
	}
	defer g.Release()
	d := &decSess{b: b, g: g, m: decModel{h: make([]float32, decoder.RecLayers*decoder.Dim)}, tok: int32(id * 1_000_000)}
	if err := g.Rec().Write(0, decoder.Recurrent{H: slices.Clone(d.m.h)}); err != nil {
		return err
	}
	d.vers = map[state.Version][]float32{g.Rec().Version(): slices.Clone(d.m.h)}
	defer func() {
		for _, k := range d.keep {
			k.v.Release()
		}
	}()
	for r := range rounds {
		if r%5 == 4 {
			if err := recAt(g.Rec(), d.vers); err != nil {
				return fmt.Errorf("round %d: %w", r, err)
			}
		}
		if err := d.round(r); err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		x := decoder.RecInput{X: make([]float32, decoder.RecLayers*decoder.Dim)}
		if err := g.Rec().Step(x, recStep(b, true)); err == nil {
			return errors.New("a failed step answers nil")
		}
		if err := decCheck(g.KV(), g.Rec(), d.m); err != nil {
			return fmt.Errorf("round %d group: %w", r, err)
		}
		for i, k := range d.keep {
			if err := decCheck(k.v.KV(), k.v.Rec(), k.m); err != nil && !errors.Is(err, state.ErrInvalidated) {
				return fmt.Errorf("round %d kept cut %d: %w", r, i, err)
			}
		}
	}
	return nil
}

// round takes a cut, advances a token, then rolls back to the cut,
// releases it, keeps it or branches, by r.
func (d *decSess) round(r int) error {
	g := d.g
	cut, err := g.Snapshot()
	if err != nil {
		return err
	}
	at := d.m.clone()
	d.tok++
	if err := decAdvance(d.b, g, &d.m, d.tok); err != nil {
		cut.Release()
		return err
	}
	d.vers[g.Rec().Version()] = slices.Clone(d.m.h)
	switch r % 4 {
	case 0:
		if err := g.Rollback(cut); err != nil {
			cut.Release()
			return fmt.Errorf("rollback: %w", err)
		}
		d.m = at
		cv := cut.Rec().Version()
		maps.DeleteFunc(d.vers, func(v state.Version, _ []float32) bool { return v > cv })
		fallthrough
	case 1:
		if err := decCheck(cut.KV(), cut.Rec(), at); err != nil {
			cut.Release()
			return fmt.Errorf("cut: %w", err)
		}
		if err := cut.Release(); err != nil {
			return err
		}
		if _, err := cut.KV().Read(0, 0); !errors.Is(err, state.ErrReleased) {
			return fmt.Errorf("a released cut's KV reads: %v", err)
		}
		if _, err := cut.Rec().Read(0, 1); !errors.Is(err, state.ErrReleased) {
			return fmt.Errorf("a released cut's Rec reads: %v", err)
		}
	case 2:
		d.keep = append(d.keep, decKept{cut, at})
		if len(d.keep) > 3 {
			d.keep[0].v.Release()
			d.keep = d.keep[1:]
		}
	case 3:
		cut.Release()
		return d.branch()
	}
	return nil
}

// branch advances a token on a branch of the group, checks the group did
// not see it, and brings it back by Merge.
func (d *decSess) branch() error {
	br, err := d.g.Branch()
	if err != nil {
		return err
	}
	bm := d.m.clone()
	d.tok++
	err = decAdvance(d.b, br, &bm, d.tok)
	if err == nil {
		err = decCheck(d.g.KV(), d.g.Rec(), d.m)
	}
	if err == nil {
		err = d.g.Merge(br)
	}
	br.Release()
	if err != nil {
		return fmt.Errorf("branch: %w", err)
	}
	d.m = bm
	d.vers[d.g.Rec().Version()] = slices.Clone(d.m.h)
	if err := br.KV().Append(decoder.KVCache{}); !errors.Is(err, state.ErrReleased) {
		return fmt.Errorf("a released branch's member appends: %v", err)
	}
	return nil
}

// atRebuilt counts the versions recAt read back.
var atRebuilt atomic.Int64

// recAt reads every version of vers that rec's history still holds
// through At, rebuilt by replaying the steps, and compares it.
func recAt(rec *decoder.RecurrentState, vers map[state.Version][]float32) error {
	for v, want := range vers {
		at, err := rec.At(v)
		if errors.Is(err, state.ErrNotRetained) {
			continue
		}
		if err != nil {
			return fmt.Errorf("At(%d): %w", v, err)
		}
		atRebuilt.Add(1)
		got, err := at.Read(0, decoder.RecLayers)
		at.Release()
		if err != nil {
			return fmt.Errorf("At(%d) read: %w", v, err)
		}
		if !slices.Equal(got.H, want) {
			return fmt.Errorf("At(%d) reads %v, want %v", v, got.H[:4], want[:4])
		}
	}
	return nil
}

// Decoder groups side by side: their cuts hold their members' snapshots
// inline, their handles hold the members by value, and their steps reach
// the store as Steppers; rows never cross groups, and the pool ends empty.
func TestReuseGroups(t *testing.T) {
	b := device.Host()
	p, err := state.NewPool(b, state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for id := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := decSession(b, p, id+1, 120); err != nil {
				errs <- fmt.Errorf("group %d: %w", id+1, err)
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
	if atRebuilt.Load() == 0 {
		t.Error("no version rebuilt by At")
	}
	t.Logf("%d versions rebuilt by At", atRebuilt.Load())
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// sharedDecSession adopts what a Decoder group of its domain registered
// for prompt, computes the rest, then decodes with cuts rolled back: both
// members read as this session's model all along.
func sharedDecSession(b device.Backend, p *state.Pool, id int, prompt []int32, adopted *atomic.Int64) error {
	g, err := decoder.NewDecoderStateShared(p, state.Owner(fmt.Sprint("sd", id)), "tenant")
	if err != nil {
		return err
	}
	defer g.Release()
	n, err := g.AdoptPrefix(prompt)
	if err != nil {
		return err
	}
	adopted.Add(int64(n))
	m := decModel{h: make([]float32, decoder.RecLayers*decoder.Dim)}
	if n == 0 {
		if err := g.Rec().Write(0, decoder.Recurrent{H: slices.Clone(m.h)}); err != nil {
			return err
		}
	}
	for _, tok := range prompt {
		if len(m.tok) < n { // adopted: the model computes it, the group does not
			m.advance(tok)
			if len(m.tok) == n { // a failed step right after adoption
				x := decoder.RecInput{X: make([]float32, decoder.RecLayers*decoder.Dim)}
				if err := g.Rec().Step(x, recStep(b, true)); err == nil {
					return errors.New("a failed step answers nil")
				}
			}
			continue
		}
		if err := decAdvance(b, g, &m, tok); err != nil {
			return err
		}
	}
	if err := decCheck(g.KV(), g.Rec(), m); err != nil {
		return fmt.Errorf("after the prompt (%d adopted): %w", n, err)
	}
	tok := int32(id * 1_000_000)
	for r := range 40 {
		cut, err := g.Snapshot()
		if err != nil {
			return err
		}
		at := m.clone()
		tok++
		err = decAdvance(b, g, &m, tok)
		if err == nil && r%2 == 0 {
			if err = g.Rollback(cut); err == nil {
				m = at
			}
		}
		if err == nil {
			err = decCheck(cut.KV(), cut.Rec(), at)
		}
		x := decoder.RecInput{X: make([]float32, decoder.RecLayers*decoder.Dim)}
		if err == nil && g.Rec().Step(x, recStep(b, true)) == nil {
			err = errors.New("a failed step answers nil")
		}
		cut.Release()
		if err == nil {
			err = decCheck(g.KV(), g.Rec(), m)
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
	}
	return nil
}

// Decoder groups of one domain adopting one another's registered states
// (the group cache's roots) while others register, roll back and release:
// an adopted group reads as if it had computed the prompt itself.
func TestReuseSharedGroups(t *testing.T) {
	t.Run("roomy", func(t *testing.T) { sharedGroups(t, state.PoolOptions{BlockBytes: 1 << 10}) })
	t.Run("pressed", func(t *testing.T) { sharedGroups(t, state.PoolOptions{BlockBytes: 1 << 10, MaxBytes: 240 << 10}) })
}

func sharedGroups(t *testing.T, opt state.PoolOptions) {
	b := device.Host()
	p, err := state.NewPool(b, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	prompt := make([]int32, 50)
	for i := range prompt {
		prompt[i] = int32(i + 1)
	}
	var adopted atomic.Int64
	for wave := range 4 {
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for id := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := sharedDecSession(b, p, wave*10+id+1, prompt, &adopted); err != nil && !tolerable(err) {
					errs <- fmt.Errorf("session %d: %w", wave*10+id+1, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	if adopted.Load() == 0 {
		t.Error("no group adopted a registered state")
	}
	t.Logf("%d rows adopted; %+v", adopted.Load(), p.Stats())
	p.ForgetPrefixes("tenant")
	if st := p.Stats(); st.Live != 0 || st.LogicalBytes != 0 || st.PhysicalBytes != 0 {
		t.Errorf("after every handle's release: %+v", st)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
