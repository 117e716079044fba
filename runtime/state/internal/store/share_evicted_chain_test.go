package store

import (
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestShareRegistersAfterItsChainWasEvicted: a head whose blocks were
// registered as another head's entries (the same keys, cached first)
// goes on registering the blocks it fills once those entries are evicted:
// its chain starts again from what the cache still holds, and a prompt of
// its keys adopts every full block it holds. The chain used to end at the
// evicted entry, so that a live head's later blocks were never cached.
// The later rows come from the host (Append) or from a kernel through
// AppendDevice's spans, registered at the next call, which reads back the
// keys of every block from where the head's own entries end.
func TestShareRegistersAfterItsChainWasEvicted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		append func(t *testing.T, p *Pool, x *Head, rows [][]byte)
	}{
		{"host", func(t *testing.T, _ *Pool, x *Head, rows [][]byte) { check(t, x.Append(rows)) }},
		{"device", func(t *testing.T, p *Pool, x *Head, rows [][]byte) {
			spans := must[[][]device.Span](t)(x.AppendDevice(8))
			kernelFill(t, p.Backend(), spans, rows, []int{32, 4})
			if _, err := x.Spans(0, 1); err != nil { // the next call on x
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := prompt(4, 64)
			p := newPool(t, PoolOptions{BlockBytes: 256})
			toks := tokens(1, 16)
			w, _ := session(t, p, l, "w", "d", toks[:8]) // caches blocks 0 and 1 first
			x := must[*Head](t)(p.NewSharedHead(l, "x", "d"))
			defer x.Release()
			check(t, x.Append(promptRows(toks, 0, 8))) // the same keys: its chain goes on w's entries
			check(t, w.Release())
			evictCached(t, p)

			tc.append(t, p, x, promptRows(toks, 8, 16))
			probe := must[*Head](t)(p.NewSharedHead(l, "probe", "d"))
			defer probe.Release()
			if n := must[int](t)(probe.AdoptPrefix(keyBytes(toks))); n != 16 {
				t.Fatalf("a prompt of the live head's keys adopted %d rows, want 16", n)
			}
			samePrompt(t, "the adopted rows", readPrompt(t, probe), readPrompt(t, x))
		})
	}
}

// TestShareForgottenChainStaysForgotten: after ForgetPrefixes, the blocks
// a head fills after its forgotten ones start no chain (a forgotten
// prefix is not to be adopted again), as an evicted one does.
func TestShareForgottenChainStaysForgotten(t *testing.T) {
	l := prompt(4, 64)
	p := newPool(t, PoolOptions{BlockBytes: 256})
	toks := tokens(1, 16)
	x, _ := session(t, p, l, "x", "d", toks[:8])
	defer x.Release()
	p.ForgetPrefixes("d")
	check(t, x.Append(promptRows(toks, 8, 16)))
	probe := must[*Head](t)(p.NewSharedHead(l, "probe", "d"))
	defer probe.Release()
	if n := must[int](t)(probe.AdoptPrefix(keyBytes(toks))); n != 0 {
		t.Fatalf("a prompt of a forgotten head's keys adopted %d rows, want 0", n)
	}
}

// evictCached evicts every cached entry no head holds.
func evictCached(t *testing.T, p *Pool) {
	t.Helper()
	for {
		xs := p.cache.victims(p)
		if len(xs) == 0 {
			return
		}
		for _, x := range xs {
			if _, ok := x.evict(); !ok {
				t.Fatal("a listed free entry was not evicted")
			}
		}
	}
}

// TestSharePollRegistersAfterItsChainWasEvicted: a shared head with a
// stream recorded on it, whose chain went on from another head's entries
// of the same keys, appends a kernel's rows after those were evicted and
// goes idle; an adoption that polls it (pollWaiting) registers its blocks.
// The poll found its place again with resync, which dropped the events
// that said the kernel was done, so the rows were never cached, not even
// at the writer's Release.
func TestSharePollRegistersAfterItsChainWasEvicted(t *testing.T) {
	l := prompt(4, 64)
	p := newPool(t, PoolOptions{BlockBytes: 256})
	st := must[device.Stream](t)(p.Backend().(device.Streams).NewStream())
	defer st.Close()
	toks := tokens(1, 16)
	w, _ := session(t, p, l, "w", "d", toks[:8])
	x := must[*Head](t)(p.NewSharedHead(l, "x", "d"))
	check(t, x.RecordStream(st))
	spans := must[[][]device.Span](t)(x.AppendDevice(8))
	kernelFill(t, p.Backend(), spans, promptRows(toks, 0, 8), []int{32, 4})
	_ = must[[][]device.Span](t)(x.Spans(0, 1)) // records a batch
	check(t, st.Sync())
	_ = must[[][]device.Span](t)(x.Spans(0, 1)) // its chain goes on w's entries
	check(t, w.Release())
	evictCached(t, p)

	spans = must[[][]device.Span](t)(x.AppendDevice(8))
	kernelFill(t, p.Backend(), spans, promptRows(toks, 8, 16), []int{32, 4})
	_ = must[[][]device.Span](t)(x.Spans(0, 1)) // records a batch
	check(t, st.Sync())
	// x is idle from here on; adoptions poll it.
	for i := range 2 {
		probe := must[*Head](t)(p.NewSharedHead(l, "probe", "d"))
		if n := must[int](t)(probe.AdoptPrefix(keyBytes(toks))); n != 16 {
			t.Errorf("adoption %d of the idle writer's keys adopted %d rows, want 16", i, n)
		}
		check(t, probe.Release())
	}
	check(t, x.Release())
	probe := must[*Head](t)(p.NewSharedHead(l, "probe", "d"))
	defer probe.Release()
	if n := must[int](t)(probe.AdoptPrefix(keyBytes(toks))); n != 16 {
		t.Errorf("after the writer's release a prompt of its keys adopted %d rows, want 16", n)
	}
}

// TestShareForgetAfterEvictionStaysForgotten is
// TestShareForgottenChainStaysForgotten where the chain's last entry was
// evicted before ForgetPrefixes: an evicted entry is forgotten too.
func TestShareForgetAfterEvictionStaysForgotten(t *testing.T) {
	l := prompt(4, 64)
	p := newPool(t, PoolOptions{BlockBytes: 256})
	toks := tokens(1, 16)
	w, _ := session(t, p, l, "w", "d", toks[:8])
	x := must[*Head](t)(p.NewSharedHead(l, "x", "d"))
	defer x.Release()
	check(t, x.Append(promptRows(toks, 0, 8)))
	check(t, w.Release())
	evictCached(t, p)
	p.ForgetPrefixes("d")
	check(t, x.Append(promptRows(toks, 8, 16)))
	probe := must[*Head](t)(p.NewSharedHead(l, "probe", "d"))
	defer probe.Release()
	if n := must[int](t)(probe.AdoptPrefix(keyBytes(toks))); n != 0 {
		t.Fatalf("a prompt of keys forgotten by ForgetPrefixes adopted %d rows, want 0", n)
	}
}
