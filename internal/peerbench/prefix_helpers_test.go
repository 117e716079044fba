package peerbench

import (
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// Helpers of the prefix-sharing model (prefix_model_test.go): rows whose
// keys and values depend on the domain and on every token up to them (as
// a decoder's KV does), so that a row adopted from another domain, or
// from another chain with the same block tokens, reads differently from
// the model's.

// FNV-1a, by hand so that a prefix's hash goes on from the shorter one's.
func pfxHashDomain(d state.Domain) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(d); i++ {
		h = (h ^ uint64(d[i])) * 1099511628211
	}
	return h
}

func pfxHashTok(h uint64, t int32) uint64 {
	u := uint32(t)
	for k := 0; k < 4; k++ {
		h = (h ^ uint64(byte(u>>(8*k)))) * 1099511628211
	}
	return (h ^ ',') * 1099511628211
}

// pfxRows are the rows of toks[from:] in domain d (each row's content
// depends on toks[:i+1]).
func pfxRows(d state.Domain, toks []int32, from int) Ctx {
	n := len(toks) - from
	c := Ctx{Keys: make([]float32, n*Dim), Values: make([]float32, n*Dim), Token: make([]int32, n)}
	h := pfxHashDomain(d)
	for i := range toks {
		h = pfxHashTok(h, toks[i])
		if i < from {
			continue
		}
		k := i - from
		fillKV(c.Keys[k*Dim:(k+1)*Dim], c.Values[k*Dim:(k+1)*Dim], int32(h%29999)+1)
		c.Token[k] = toks[i]
	}
	return c
}

// pfxReader is a CtxState or a CtxSnapshot.
type pfxReader interface {
	Len() int
	Read(from, to int) (Ctx, error)
}

func pfxDiff(r pfxReader, d state.Domain, toks []int32) error {
	if n := r.Len(); n != len(toks) {
		return fmt.Errorf("Len %d, model %d", n, len(toks))
	}
	got, err := r.Read(0, len(toks))
	if err != nil {
		return fmt.Errorf("Read: %w", err)
	}
	want := pfxRows(d, toks, 0)
	for i := range toks {
		if got.Token[i] != want.Token[i] {
			return fmt.Errorf("row %d: token %d, model %d", i, got.Token[i], want.Token[i])
		}
		for j := range Dim {
			if got.Keys[i*Dim+j] != want.Keys[i*Dim+j] || got.Values[i*Dim+j] != want.Values[i*Dim+j] {
				return fmt.Errorf("row %d (token %d): keys[%d]=%v values[%d]=%v, model %v %v", i, toks[i], j,
					got.Keys[i*Dim+j], j, got.Values[i*Dim+j], want.Keys[i*Dim+j], want.Values[i*Dim+j])
			}
		}
	}
	return nil
}

// pfxPool makes a host pool with opt; its cleanup closes it and checks
// that Close reports nothing.
func pfxPool(t testing.TB, opt state.PoolOptions) *state.Pool {
	t.Helper()
	b := device.Host()
	p, err := state.NewPool(b, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		b.Close()
	})
	return p
}

// pfxNoLeak forgets the domains' prefixes and checks the pool holds
// nothing: no live handle, no physical bytes.
func pfxNoLeak(t testing.TB, p *state.Pool, domains ...state.Domain) {
	t.Helper()
	for _, d := range domains {
		p.ForgetPrefixes(d)
	}
	st := p.Stats()
	if st.Live != 0 || st.PhysicalBytes != 0 || st.CachedBytes != 0 || st.Blocks != 0 || st.TierBytes != 0 {
		t.Fatalf("after releasing everything and forgetting the prefixes: Live %d, PhysicalBytes %d, CachedBytes %d, Blocks %d, TierBytes %d",
			st.Live, st.PhysicalBytes, st.CachedBytes, st.Blocks, st.TierBytes)
	}
}

// pfxSeeds is n seeds, fewer under the race detector, so that the
// randomized tests stay short there.
func pfxSeeds(n uint64) uint64 {
	if raceDetector {
		return max(1, n/4)
	}
	return n
}
