package store

import "testing"

// TestTierCachedPrefixTwice: a chain whose last entry is in the host tier
// is registered again by a session that appends the same rows without
// adopting them, and that entry moves to the tier in its turn: the tier
// keeps one image of the chain and frees the other, and forgetting the
// domain empties it.
func TestTierCachedPrefixTwice(t *testing.T) {
	l := prompt(4, 64)
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 12 * 256, HostTier: 64 << 10})
	toks := tokens(5, 16)
	a, _ := session(t, p, l, "a", "d", toks)
	check(t, a.Release())
	m := headOf(t, p, l, "m")
	check(t, m.Append(promptRows(tokens(6, 12), 0, 12))) // the chain's last entry moves
	if st := p.Stats(); st.TierBytes != 2*256 {
		t.Fatalf("tier %d, want the chain's last entry, 512", st.TierBytes)
	}
	check(t, m.Release())
	x := must[*Head](t)(p.NewSharedHead(l, "a", "d"))
	check(t, x.Append(promptRows(toks, 0, 16))) // registers the chain's last entry again
	check(t, x.Release())
	m2 := headOf(t, p, l, "m")
	check(t, m2.Append(promptRows(tokens(6, 12), 0, 12))) // which moves too
	checkInv(t, p)
	p.ForgetPrefixes("d")
	if st := p.Stats(); st.TierBytes != 0 || st.CachedBytes != 0 {
		t.Fatalf("after ForgetPrefixes: tier %d, cached %d; want 0, 0", st.TierBytes, st.CachedBytes)
	}
}
