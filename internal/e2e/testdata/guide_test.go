package main

import (
	"errors"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// TestGuide checks that the functions of docs/GUIDE.md do what the guide
// says of them.
func TestGuide(t *testing.T) {
	// A one-token session holds one block per field: two blocks, of one
	// row each when the blocks follow the rows.
	for _, c := range []struct {
		blockBytes int
		physical   int64
	}{{0, 1 << 10}, {4 << 10, 8 << 10}} {
		p, err := state.NewPool(device.Host(), state.PoolOptions{BlockBytes: c.blockBytes})
		if err != nil {
			t.Fatal(err)
		}
		logical, physical, err := oneTokenCost(p)
		if err != nil || logical != 2*Dim*4 || physical != c.physical {
			t.Errorf("BlockBytes %d: oneTokenCost = %d, %d, %v; want %d, %d", c.blockBytes, logical, physical, err, 2*Dim*4, c.physical)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}

	p, err := newPool(device.Host())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	if bb := p.Stats().BlockBytes; bb != 4<<10 {
		t.Errorf("newPool: blocks of %d bytes, want 4 KiB", bb)
	}
	if s, err := openSession(p, ""); err == nil {
		s.Release()
		t.Error("openSession with no id succeeded")
	}
	s, err := openSession(p, "7")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()

	if err := appendTurn(s, tokens(0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := appendTurn(s, tokens(3, MaxTokens)); !errors.Is(err, state.ErrBound) || s.Len() != 3 {
		t.Errorf("appendTurn past the bound = %v with %d rows, want ErrBound and 3 rows", err, s.Len())
	}

	rows, err := prompt(s, tokens(3, 2))
	if err != nil || len(rows.Keys) != 3*Dim || s.Len() != 5 {
		t.Errorf("prompt = %d keys, %v with %d rows in the head; want 3 rows of keys and 5 in the head", len(rows.Keys), err, s.Len())
	}

	reject := func(KVCache) bool { return false }
	accept := func(KVCache) bool { return true }
	if err := draft(s, tokens(5, 2), reject); err != nil || s.Len() != 5 {
		t.Errorf("rejected draft: %v, %d rows; want 5", err, s.Len())
	}
	if err := draft(s, tokens(5, 2), accept); err != nil || s.Len() != 7 {
		t.Errorf("accepted draft: %v, %d rows; want 7", err, s.Len())
	}

	bad := errors.New("bad reply")
	if err := retry(s, tokens(7, 2), func(*KVCacheState) error { return bad }); !errors.Is(err, bad) || s.Len() != 7 {
		t.Errorf("retry of a bad reply = %v, %d rows; want the check's error and 7 rows", err, s.Len())
	}
	if err := retry(s, tokens(7, 2), func(*KVCacheState) error { return nil }); err != nil || s.Len() != 9 {
		t.Errorf("retry of a good reply = %v, %d rows; want 9", err, s.Len())
	}

}

// TestGuideSharing checks the guide's openTenantSession: on newPool's 4 KiB
// blocks a shared TenantKV holds 8 rows a block, so a second session of
// one tenant with a 20-token prompt adopts the 16 rows of its 2 full
// blocks, a session of another tenant adopts none, and both read back the
// rows computed for their prompt.
func TestGuideSharing(t *testing.T) {
	p, err := newPool(device.Host())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	compute := func(toks []int32, from int) TenantKV {
		kv := TenantKV{Keys: make([]float32, len(toks)*Dim), Values: make([]float32, len(toks)*Dim), Token: toks}
		for i, tok := range toks {
			for d := range Dim {
				kv.Keys[i*Dim+d] = float32(int(tok)*1000 + (from+i)*10 + d)
				kv.Values[i*Dim+d] = -kv.Keys[i*Dim+d]
			}
		}
		return kv
	}
	prompt := make([]int32, 20)
	for i := range prompt {
		prompt[i] = int32(100 + i)
	}
	want := compute(prompt, 0)
	for _, c := range []struct {
		tenant, session string
		adopted         int
	}{{"a", "a-1", 0}, {"a", "a-2", 16}, {"b", "b-1", 0}} {
		s, adopted, err := openTenantSession(p, c.tenant, c.session, prompt, compute)
		if err != nil {
			t.Fatalf("%s: %v", c.session, err)
		}
		defer s.Release()
		if adopted != c.adopted || s.Len() != len(prompt) {
			t.Errorf("%s of tenant %s: adopted %d rows, holds %d; want %d adopted and %d held", c.session, c.tenant, adopted, s.Len(), c.adopted, len(prompt))
		}
		got, err := s.Read(0, s.Len())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Keys, want.Keys) || !slices.Equal(got.Values, want.Values) || !slices.Equal(got.Token, want.Token) {
			t.Errorf("%s: its rows are not the rows computed for its prompt", c.session)
		}
	}
}

// TestGuideReplay checks the guide's replayed: At rebuilds the version
// after the first step from the recorded inputs, and its rows are those
// the first step wrote (h = 0/2 + x of the first input); and recurrence,
// through StepHost, leaves the head at the rows of every step.
func TestGuideReplay(t *testing.T) {
	b := device.Host()
	p, err := state.NewPool(b, state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	rec, err := NewRecurrentState(p, "session-1")
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var inputs []RecInput
	want := make([]float32, Layers*Dim) // the head's rows after every step
	for i := range 20 {
		in := RecInput{X: make([]float32, Layers*Dim)}
		for j := range in.X {
			in.X[j] = float32(i*1000 + j)
			want[j] = want[j]/2 + in.X[j]
		}
		inputs = append(inputs, in)
	}
	got, err := replayed(rec, inputs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.H, inputs[0].X) {
		t.Errorf("the version after the first step, rebuilt by At: %v..., want the first input %v...", got.H[:4], inputs[0].X[:4])
	}
	head, err := rec.Read(0, Layers)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(head.H, want) {
		t.Errorf("the head after 20 steps: %v..., want %v...", head.H[:4], want[:4])
	}
}

// TestGuideGroup checks the guide's acceptDrafts: of 4 drafts, the session
// keeps the accepted ones, in both members, and the rejected ones leave no
// trace in either.
func TestGuideGroup(t *testing.T) {
	b := device.Host()
	p, err := state.NewPool(b, state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	// feed appends a KV row and steps the recurrent state with the token.
	feed := func(s *DecoderState, tok int32) error {
		kv := AttnKV{Keys: make([]float32, Dim), Values: make([]float32, Dim)}
		kv.Keys[0] = float32(tok)
		if err := s.KV().Append(kv); err != nil {
			return err
		}
		in := RecInput{X: make([]float32, Layers*Dim)}
		for j := range in.X {
			in.X[j] = float32(tok)
		}
		return s.Rec().StepHost(in, recurrence)
	}
	for accepted := range 5 {
		s, err := NewDecoderState(p, "session-2")
		if err != nil {
			t.Fatal(err)
		}
		n, err := acceptDrafts(s, []int32{1, 2, 3, 4}, feed, func() int { return accepted })
		if err != nil || n != accepted {
			t.Errorf("acceptDrafts with %d accepted = %d, %v", accepted, n, err)
		}
		// The recurrence h = h/2 + tok over the accepted tokens 1..n.
		var h float32
		for tok := 1; tok <= accepted; tok++ {
			h = h/2 + float32(tok)
		}
		rec, err := s.Rec().Read(0, Layers)
		if err != nil {
			t.Fatal(err)
		}
		if s.KV().Len() != accepted || rec.H[0] != h {
			t.Errorf("%d accepted: %d KV rows and h[0] = %v; want %d rows and %v", accepted, s.KV().Len(), rec.H[0], accepted, h)
		}
		if err := s.Release(); err != nil {
			t.Error(err)
		}
	}
}

// TestGuideServing checks the guide's keysOf and upload: the keys alone,
// in the array given when it is large enough, and a turn appended and read
// back on a stream.
func TestGuideServing(t *testing.T) {
	b := device.Host()
	p, err := state.NewPool(b, state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	s, err := NewKVCacheState(p, "session-3")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	st, err := b.(device.Streams).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	turn := KVCache{Keys: make([]float32, 3*Dim), Values: make([]float32, 3*Dim)}
	for i := range turn.Keys {
		turn.Keys[i], turn.Values[i] = float32(i), -float32(i)
	}
	var back KVCache
	if err := upload(st, s, turn, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Keys, turn.Keys) || !slices.Equal(back.Values, turn.Values) {
		t.Error("upload read back other rows than it appended")
	}
	buf := make([]float32, 0, 3*Dim)
	keys, err := keysOf(s, buf, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, turn.Keys[Dim:3*Dim]) || &keys[0] != &buf[:1][0] {
		t.Error("keysOf read other keys, or not into the array it was given")
	}
	if keys, err := keysOf(s, nil, 0, 1); err != nil || !slices.Equal(keys, turn.Keys[:Dim]) {
		t.Errorf("keysOf into nil: %d keys, %v", len(keys), err)
	}
}
