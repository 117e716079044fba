package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// tokLayout is a shared append layout: a token column (the key) and a
// value per token, 16 rows to a block.
var tokLayout = &Layout{
	Type:      "Tok",
	Columns:   []Column{{Name: "Tok", ElemSize: 4, Width: 1}, {Name: "Val", ElemSize: 8, Width: 1}},
	Growth:    Append,
	Bound:     1024,
	BlockRows: 16,
	ShareKey:  "Tok",
}

var groupRecLayout = rec(Invalidate)

// tokRow is the row of token t: the recurrent state is a function of
// every token so far, so a restored one shows whether it is the state at
// the adopted prefix.
func tokRow(t uint32) [][]byte {
	k, v := make([]byte, 4), make([]byte, 8)
	binary.LittleEndian.PutUint32(k, t)
	binary.LittleEndian.PutUint64(v, uint64(t)*0x9e3779b97f4a7c15)
	return [][]byte{k, v}
}

func keysOf(tokens []uint32) []byte {
	out := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(out[4*i:], t)
	}
	return out
}

// feedTok feeds a token the way a hybrid decoder does: the recurrent
// state first, then the KV row, whose append registers the group's state
// when it fills a block. It returns the recurrent state after it.
func feedTok(t *testing.T, g *Group, tok uint32) []byte {
	t.Helper()
	h := readRec(t, g.Head(1))
	for i := range h {
		h[i] = h[i]*31 + byte(tok) + byte(i)
	}
	check(t, g.Head(1).Write(0, [][]byte{h}))
	check(t, g.Head(0).Append(tokRow(tok)))
	return h
}

func TestGroupPrefixSharing(t *testing.T) {
	p := newPool(t, PoolOptions{})
	prompt := make([]uint32, 40)
	for i := range prompt {
		prompt[i] = uint32(i*7 + 1)
	}
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
	recAt := map[int][]byte{}
	for i, tok := range prompt {
		recAt[i+1] = feedTok(t, a, tok)
	}
	kvA := readGroupCols(t, a.Head(0), 2)
	check(t, a.Release())
	if st := p.Stats(); st.Live != 0 || st.CachedBytes == 0 {
		t.Fatalf("after the first session: %d live, %d cached bytes; want 0 live and the registered states cached", st.Live, st.CachedBytes)
	}

	// Another owner of the tenant adopts the longest registered prefix:
	// 32 of the 40 rows, and the recurrent state after 32 tokens.
	b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, groupRecLayout))
	defer b.Release()
	n, err := b.AdoptPrefix(keysOf(prompt))
	if err != nil || n != 32 {
		t.Fatalf("AdoptPrefix = %d, %v; want 32", n, err)
	}
	if got := readGroupCols(t, b.Head(0), 2); !bytes.Equal(got[0], kvA[0][:32*4]) || !bytes.Equal(got[1], kvA[1][:32*8]) {
		t.Fatal("the adopted KV rows differ from the first session's")
	}
	if !bytes.Equal(readRec(t, b.Head(1)), recAt[32]) {
		t.Fatal("the recurrent state was not restored to its state at the adopted prefix")
	}
	// The rest is computed on top, and the shared blocks stay the first
	// session's: a write to the restored recurrent state copies its block.
	for _, tok := range prompt[32:] {
		feedTok(t, b, tok)
	}
	if !bytes.Equal(readRec(t, b.Head(1)), recAt[40]) {
		t.Fatal("after the rest of the prompt the recurrent state differs")
	}

	// A prompt that leaves the registered one at token 20 adopts 16 rows.
	c := must[*Group](t)(NewSharedGroup(p, "c", "tenant", tokLayout, groupRecLayout))
	defer c.Release()
	other := append([]uint32(nil), prompt...)
	other[20] = 999
	if n, err := c.AdoptPrefix(keysOf(other)); err != nil || n != 16 || !bytes.Equal(readRec(t, c.Head(1)), recAt[16]) {
		t.Fatalf("a prompt that differs at 20: AdoptPrefix = %d, %v; want 16 and the state at 16", n, err)
	}
	// A group that is not empty answers ErrRange and changes nothing.
	before := [2]Version{c.Head(0).Version(), c.Head(1).Version()}
	if _, err := c.AdoptPrefix(keysOf(prompt)); !errors.Is(err, ErrRange) || before != [2]Version{c.Head(0).Version(), c.Head(1).Version()} {
		t.Fatalf("AdoptPrefix on a group with rows: %v", err)
	}
	// Another domain, and a group made by NewGroup, adopt nothing.
	d := must[*Group](t)(NewSharedGroup(p, "d", "other", tokLayout, groupRecLayout))
	defer d.Release()
	e := must[*Group](t)(NewGroup(p, "e", tokLayout, groupRecLayout))
	defer e.Release()
	for _, x := range []*Group{d, e} {
		if n, err := x.AdoptPrefix(keysOf(prompt)); n != 0 || err != nil {
			t.Fatalf("AdoptPrefix outside the domain = %d, %v; want 0", n, err)
		}
	}
	// The member's own AdoptPrefix adopts nothing: it would leave the
	// recurrent state behind.
	f := must[*Group](t)(NewSharedGroup(p, "f", "tenant", tokLayout, groupRecLayout))
	defer f.Release()
	if n, err := f.Head(0).AdoptPrefix(keysOf(prompt)); n != 0 || err != nil {
		t.Fatalf("a member's own AdoptPrefix = %d, %v; want 0", n, err)
	}
	// Forgetting the tenant drops its registered states.
	if freed := p.ForgetPrefixes("tenant"); freed == 0 {
		t.Fatal("ForgetPrefixes freed nothing")
	}
	if n, _ := f.AdoptPrefix(keysOf(prompt)); n != 0 {
		t.Fatalf("adopted %d rows of a forgotten tenant", n)
	}
}

// readCols reads every row of a head of ncols columns, per column.
func readGroupCols(t *testing.T, h *Head, ncols int) [][]byte {
	t.Helper()
	n := h.Len()
	dst := make([][]byte, ncols)
	for c := range dst {
		dst[c] = make([]byte, n*h.l.Columns[c].ElemSize*h.l.Columns[c].Width)
	}
	check(t, h.Read(0, n, dst))
	return dst
}

// TestGroupPrefixEviction: registered states are optional retention: a
// mandatory allocation that needs their room evicts them.
func TestGroupPrefixEviction(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 64 << 10})
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
	for i := range 64 {
		feedTok(t, a, uint32(i))
	}
	check(t, a.Release())
	cached := p.Stats().CachedBytes
	if cached == 0 {
		t.Fatal("nothing cached")
	}
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 1024, Width: 1}}, Growth: Mutable, Bound: 60}
	h, err := p.NewHead(big, "z")
	if err != nil {
		t.Fatalf("a mandatory head that needs the cache's room: %v (cached %d)", err, cached)
	}
	defer h.Release()
	if st := p.Stats(); st.EvictedBytes == 0 || st.CachedBytes >= cached {
		t.Fatalf("evicted %d bytes, cached %d of %d before", st.EvictedBytes, st.CachedBytes, cached)
	}
}

// recAfter is the recurrent state feedTok leaves after tokens, from zero.
func recAfter(tokens []uint32) []byte {
	h := make([]byte, 4*8)
	for _, tok := range tokens {
		for i := range h {
			h[i] = h[i]*31 + byte(tok) + byte(i)
		}
	}
	return h
}

// TestGroupPrefixModel runs sessions whose prompts share prefixes at
// random against a reference that knows every prefix registered: each
// adoption takes the longest registered whole-block prefix, restores both
// members to their state there, and the session then reads as if it had
// computed every row; ForgetPrefixes forgets.
func TestGroupPrefixModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	p := newPool(t, PoolOptions{})
	bases := make([][]uint32, 3)
	for i := range bases {
		for range 80 {
			bases[i] = append(bases[i], uint32(rng.IntN(4)))
		}
	}
	registered := map[string]bool{}
	var live []*Group
	for step := range groupModelSteps(t, 60) {
		switch rng.IntN(8) {
		case 0:
			p.ForgetPrefixes("tenant")
			clear(registered)
			continue
		case 1, 2:
			if len(live) > 0 {
				i := rng.IntN(len(live))
				check(t, live[i].Release())
				live = slices.Delete(live, i, i+1)
			}
			continue
		}
		base := bases[rng.IntN(len(bases))]
		prompt := slices.Clone(base[:1+rng.IntN(len(base))])
		if rng.IntN(3) == 0 {
			prompt[rng.IntN(len(prompt))] = 7 // leaves the base somewhere
		}
		if len(live) > 16 {
			check(t, live[0].Release())
			live = live[1:]
		}
		g := must[*Group](t)(NewSharedGroup(p, Owner(fmt.Sprint("s", step)), "tenant", tokLayout, groupRecLayout))
		live = append(live, g)
		want := 0
		for n := 16; n <= len(prompt)-1; n += 16 {
			if registered[string(keysOf(prompt[:n]))] {
				want = n
			}
		}
		n, err := g.AdoptPrefix(keysOf(prompt[:len(prompt)-1]))
		if err != nil || n != want {
			t.Fatalf("step %d: AdoptPrefix = %d, %v; the reference says %d", step, n, err, want)
		}
		if !bytes.Equal(readRec(t, g.Head(1)), recAfter(prompt[:n])) {
			t.Fatalf("step %d: recurrent state after adopting %d rows", step, n)
		}
		h := recAfter(prompt[:n])
		for i, tok := range prompt[n:] {
			for j := range h {
				h[j] = h[j]*31 + byte(tok) + byte(j)
			}
			check(t, g.Head(1).Write(0, [][]byte{slices.Clone(h)}))
			check(t, g.Head(0).Append(tokRow(tok)))
			if k := n + i + 1; k%16 == 0 {
				registered[string(keysOf(prompt[:k]))] = true
			}
		}
		got := readGroupCols(t, g.Head(0), 2)
		var wantKeys, wantVals []byte
		for _, tok := range prompt {
			r := tokRow(tok)
			wantKeys, wantVals = append(wantKeys, r[0]...), append(wantVals, r[1]...)
		}
		if !bytes.Equal(got[0], wantKeys) || !bytes.Equal(got[1], wantVals) || !bytes.Equal(readRec(t, g.Head(1)), recAfter(prompt)) {
			t.Fatalf("step %d: the session does not read as its prompt computed", step)
		}
	}
	for _, g := range live {
		check(t, g.Release())
	}
	if p.ForgetPrefixes("tenant"); p.Stats().CachedBytes != 0 {
		t.Fatalf("%d cached bytes after forgetting the tenant", p.Stats().CachedBytes)
	}
}

// TestGroupPrefixConcurrent: sessions of one tenant adopt, feed and
// release at once; each reads as its prompt computed, whatever it adopted.
func TestGroupPrefixConcurrent(t *testing.T) {
	p := newPool(t, PoolOptions{})
	prompt := make([]uint32, 64)
	for i := range prompt {
		prompt[i] = uint32(i % 5)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				g, err := NewSharedGroup(p, Owner(fmt.Sprint(w, "-", i)), "tenant", tokLayout, groupRecLayout)
				if err != nil {
					t.Error(err)
					return
				}
				n, err := g.AdoptPrefix(keysOf(prompt[:len(prompt)-1]))
				if err == nil {
					h := recAfter(prompt[:n])
					for _, tok := range prompt[n:] {
						for j := range h {
							h[j] = h[j]*31 + byte(tok) + byte(j)
						}
						if err = g.Head(1).Write(0, [][]byte{slices.Clone(h)}); err == nil {
							err = g.Head(0).Append(tokRow(tok))
						}
						if err != nil {
							break
						}
					}
				}
				if err != nil {
					t.Error(err)
				} else if dst := [][]byte{make([]byte, 32)}; g.Head(1).Read(0, 4, dst) != nil || !bytes.Equal(dst[0], recAfter(prompt)) || g.Head(0).Len() != len(prompt) {
					t.Errorf("session %d-%d after adopting %d rows does not read as its prompt", w, i, n)
				}
				if err := g.Release(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}
