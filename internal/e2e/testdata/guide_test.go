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
	if p.BlockBytes() != 4<<10 {
		t.Errorf("newPool: blocks of %d bytes, want 4 KiB", p.BlockBytes())
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
