package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// The sharing model: the same seeded sessions run on a pool whose heads
// share prefixes and on one whose heads share nothing, and after every
// step every session reads the same on both as the tokens it holds say
// it must. Sessions start from a few prompt templates, so most adopt
// something; they append from the host and through device spans, take
// snapshots, roll back, branch and end.
//
// A session is a reference head (ref_model_test.go) of the sharing pool's
// head, whose rows are those of its tokens: a new one adopts the rows of
// the longest prefix registered, then appends. The extension adds the
// tokens, which key the prefixes, and the same session's head in the pool
// that shares nothing, which reads as the reference too.
type shareSession struct {
	ref        *RefHandle // Head: the head of the sharing pool
	toks       []int32
	off        *Head
	snap       *RefHandle // Snap: a snapshot in the sharing pool, or nil
	snapOff    *Snap
	snapTokens []int32
}

// shareTierSeeds is the first seed of the sharing model whose capped pool
// has a host tier.
const shareTierSeeds = 100

func TestShareModel(t *testing.T) {
	steps := modelSteps(t, 1000)
	for _, seed := range statetest.Seeds(0, 1, 2, 3, 4, 5, shareTierSeeds+2) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			capped := seed%3 == 2
			adopted, evicted := runShareModel(t, seed, steps, capped)
			if adopted == 0 {
				t.Fatalf("seed %d: no session adopted a row: the model tested no sharing", seed)
			}
			if capped && evicted == 0 {
				t.Fatalf("seed %d: nothing evicted under the cap: the model tested no eviction", seed)
			}
		})
	}
}

// FuzzShareModel runs the sharing model from fuzzed seeds (make fuzz).
func FuzzShareModel(f *testing.F) {
	for seed := range uint64(6) {
		f.Add(seed, uint8(60))
	}
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		runShareModel(t, seed, int(steps), false)
	})
}

// runShareModel runs steps seeded steps, with a cap on the sharing pool
// when capped, and returns the rows adopted and the bytes evicted.
func runShareModel(t *testing.T, seed uint64, steps int, capped bool) (adopted int, evicted int64) {
	statetest.LogReplay(t, seed)
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	l := prompt(4, 96)
	l.Descendants = Keep
	if seed%2 == 1 {
		l.BlockRows = 0 // the default rows of a shared layout
	}
	opt := PoolOptions{}
	if capped {
		// A cap the live sessions fit under but not every cached block:
		// eviction of cached blocks runs between adoptions.
		opt.BlockBytes, opt.MaxBytes = 256, 32<<10
		if seed >= shareTierSeeds {
			// A host tier that holds part of what the cap pushes out:
			// cached blocks move there, come back on adoption, and go.
			opt.HostTier = 16 << 10
		}
	}
	on := newPool(t, opt)
	off := newPool(t, PoolOptions{BlockBytes: opt.BlockBytes}) // the same blocks, no cap
	templates := [][]int32{tokens(1, 40), tokens(2, 40), tokens(3, 24)}
	var live []*shareSession
	owners := 0

	newTokens := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = 900000 + rng.Int32N(3) // few values: private tails collide too
		}
		return out
	}
	// appendOn appends rows [from, len(s.toks)) to the sharing session and
	// reports whether it could: under the cap, live sessions may fill the
	// pool (ErrNoMemory, which changes nothing), and the step is skipped.
	appendOn := func(s *shareSession, from int) bool {
		var err error
		if rng.IntN(3) == 0 {
			var spans [][]device.Span
			if spans, err = s.ref.Head.AppendDevice(len(s.toks) - from); err == nil {
				kernelFill(t, on.Backend(), spans, promptRows(s.toks, from, len(s.toks)), []int{32, 4})
			}
		} else {
			err = s.ref.Head.Append(promptRows(s.toks, from, len(s.toks)))
		}
		if capped && errors.Is(err, ErrNoMemory) {
			return false
		}
		check(t, err)
		s.ref.Append(promptRows(s.toks, from, len(s.toks)))
		return true
	}
	for step := range steps {
		op := rng.IntN(10)
		switch {
		case len(live) == 0 || (op < 3 && len(live) < 8):
			tpl := templates[rng.IntN(len(templates))]
			toks := append(append([]int32(nil), tpl[:rng.IntN(len(tpl)+1)]...), newTokens(rng.IntN(6))...)
			owners++
			owner := Owner(fmt.Sprint("s", owners))
			s := &shareSession{toks: toks}
			s.ref = NewRefLineage(owner, l).NewHead(must[*Head](t)(on.NewSharedHead(l, owner, "d")))
			n := must[int](t)(s.ref.Head.AdoptPrefix(keyBytes(toks)))
			if n > 0 {
				s.ref.Append(promptRows(toks, 0, n)) // adopted
			}
			if !appendOn(s, n) {
				check(t, s.ref.Head.Release())
				continue
			}
			adopted += n
			s.off = must[*Head](t)(off.NewHead(l, owner))
			check(t, s.off.Append(promptRows(toks, 0, len(toks))))
			live = append(live, s)
		case op < 5:
			s := live[rng.IntN(len(live))]
			more := newTokens(1 + rng.IntN(6))
			if len(s.toks)+len(more) > l.Bound {
				continue
			}
			from := len(s.toks)
			s.toks = append(s.toks[:from:from], more...)
			if !appendOn(s, from) {
				s.toks = s.toks[:from]
				continue
			}
			check(t, s.off.Append(promptRows(s.toks, from, len(s.toks))))
		case op < 6:
			s := live[rng.IntN(len(live))]
			if s.snap != nil {
				check(t, s.snap.Snap.Release())
				s.snap.Release()
				check(t, s.snapOff.Release())
			}
			s.snap = s.ref.Snapshot(must[*Snap](t)(s.ref.Head.Snapshot()))
			s.snapOff = must[*Snap](t)(s.off.Snapshot())
			s.snapTokens = s.toks
		case op < 7:
			s := live[rng.IntN(len(live))]
			if s.snap == nil {
				continue
			}
			check(t, s.ref.Head.Rollback(s.snap.Snap))
			check(t, s.off.Rollback(s.snapOff))
			s.ref.Rollback(s.snap)
			s.toks = s.snapTokens
		case op < 8 && len(live) < 8:
			s := live[rng.IntN(len(live))]
			c := &shareSession{toks: s.toks}
			c.ref = s.ref.Branch(must[*Head](t)(s.ref.Head.Branch()))
			c.off = must[*Head](t)(s.off.Branch())
			live = append(live, c)
		default:
			i := rng.IntN(len(live))
			s := live[i]
			for _, r := range []interface{ Release() error }{s.ref.Head, s.off} {
				check(t, r.Release())
			}
			s.ref.Release()
			if s.snap != nil {
				check(t, s.snap.Snap.Release())
				s.snap.Release()
				check(t, s.snapOff.Release())
			}
			live = append(live[:i], live[i+1:]...)
		}
		for i, s := range live {
			what := fmt.Sprintf("seed %d step %d session %d", seed, step, i)
			samePrompt(t, what+" with sharing", readPrompt(t, s.ref.Head), s.ref.Cols)
			samePrompt(t, what+" without sharing", readPrompt(t, s.off), s.ref.Cols)
			if v := s.ref.Head.Version(); v != s.ref.V {
				t.Fatalf("%s: at version %d, the reference at %d", what, v, s.ref.V)
			}
		}
		if got, want := on.Stats().CachedBytes, scanCachedBytes(on); got != want {
			t.Fatalf("seed %d step %d: CachedBytes %d, a scan of the cache finds %d", seed, step, got, want)
		}
		if err := checkFreeList(on); err != nil {
			t.Fatalf("seed %d step %d: %v", seed, step, err)
		}
		// A rollback past rows the cache registered copies the tail
		// block the cache keeps, where the pool without sharing writes
		// on in it (lowerTails): a tail block per column and session.
		var tails int64
		for _, bb := range on.columnBlockBytes(l) {
			tails += int64(bb) * int64(len(live))
		}
		if a, b := on.Stats().PhysicalBytes-on.Stats().CachedBytes, off.Stats().PhysicalBytes; a > b+tails {
			t.Fatalf("seed %d step %d: the heads hold %d physical bytes with sharing, %d without and %d of tails", seed, step, a, b, tails)
		}
	}
	for _, s := range live {
		check(t, s.ref.Head.Release())
		check(t, s.off.Release())
		if s.snap != nil {
			check(t, s.snap.Snap.Release())
			check(t, s.snapOff.Release())
		}
	}
	if st := on.Stats(); capped && seed >= shareTierSeeds && (st.TierOut == 0 || st.TierIn == 0) {
		t.Fatalf("seed %d: the host tier took %d bytes and gave back %d: the model tested no tier", seed, st.TierOut, st.TierIn)
	}
	return adopted, on.Stats().EvictedBytes
}

// TestShareConcurrentAdoption runs sessions that adopt, append, read and
// end on many goroutines at once, in a pool too small to keep every
// cached block, so eviction runs beside adoption.
func TestShareConcurrentAdoption(t *testing.T) {
	l := prompt(4, 64)
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 256 << 8})
	templates := [][]int32{tokens(1, 32), tokens(2, 32), tokens(3, 20)}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var mu sync.Mutex
	adopted := 0
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := range 40 {
				tpl := templates[rng.IntN(len(templates))]
				toks := append(append([]int32(nil), tpl[:rng.IntN(len(tpl)+1)]...), tokens(int32(100+g), rng.IntN(8))...)
				h, err := p.NewSharedHead(l, Owner(fmt.Sprint("g", g, "-", i)), "d")
				if err != nil {
					errs <- err
					return
				}
				n, err := h.AdoptPrefix(keyBytes(toks))
				if err == nil {
					err = h.Append(promptRows(toks, n, len(toks)))
				}
				if err == nil {
					dst := [][]byte{make([]byte, len(toks)*32), make([]byte, len(toks)*4)}
					if err = h.Read(0, len(toks), dst); err == nil {
						want := promptRows(toks, 0, len(toks))
						for c := range want {
							if string(dst[c]) != string(want[c]) {
								err = fmt.Errorf("goroutine %d session %d: column %d differs after adopting %d rows", g, i, c, n)
							}
						}
					}
				}
				if rerr := h.Release(); err == nil {
					err = rerr
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				adopted += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if adopted == 0 {
		t.Fatal("no session adopted a row")
	}
	if p.Stats().EvictedBytes == 0 {
		t.Fatal("nothing was evicted: the test ran no eviction beside adoption")
	}
	if got, want := p.Stats().CachedBytes, scanCachedBytes(p); got != want {
		t.Fatalf("CachedBytes %d after concurrent sessions, a scan of the cache finds %d", got, want)
	}
	if err := checkFreeList(p); err != nil {
		t.Fatalf("after concurrent sessions: %v", err)
	}
}

// scanCachedBytes counts the bytes of the cached blocks only the cache
// holds by looking at every entry: what CachedBytes keeps as it goes.
func scanCachedBytes(p *Pool) int64 {
	c := &p.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, t := range c.tables {
		for _, bucket := range t.buckets {
			for _, e := range bucket {
				for _, b := range e.blks {
					if b.Refs() == 1 {
						n += int64(b.Bytes())
					}
				}
			}
		}
	}
	return n
}

// checkFreeList checks the cache's list of free entries against a scan of
// every entry: it holds exactly the entries whose blocks, and those of
// every entry after them, only the cache holds; each comes after the
// entries that follow it in its chain, and later in the list is later in
// the pool's clock.
func checkFreeList(p *Pool) error {
	c := &p.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	kids := map[*prefixEntry][]*prefixEntry{}
	var all []*prefixEntry
	for _, t := range c.tables {
		for _, bucket := range t.buckets {
			for _, e := range bucket {
				all = append(all, e)
				if e.parent != nil {
					kids[e.parent] = append(kids[e.parent], e)
				}
			}
		}
	}
	memo := map[*prefixEntry]bool{}
	var free func(e *prefixEntry) bool
	free = func(e *prefixEntry) bool {
		if f, ok := memo[e]; ok {
			return f
		}
		f := true
		for _, b := range e.blks {
			f = f && b.Refs() == 1
		}
		for _, k := range kids[e] {
			f = free(k) && f
		}
		memo[e] = f
		return f
	}
	at := map[*prefixEntry]int{}
	var last uint64
	var prev *prefixEntry
	for e := c.free.front; e != nil; e = e.next {
		if e.prev != prev {
			return fmt.Errorf("entry %d of the free list does not point back at the one before it", len(at))
		}
		if e.gone || !e.listed || e.busy != 0 {
			return fmt.Errorf("entry %d of the free list: gone %v, listed %v, busy %d", len(at), e.gone, e.listed, e.busy)
		}
		if e.used <= last && len(at) > 0 {
			return fmt.Errorf("entry %d of the free list used at %d, after one used at %d", len(at), e.used, last)
		}
		at[e], last, prev = len(at), e.used, e
	}
	if c.free.back != prev || c.free.n != len(at) {
		return fmt.Errorf("the free list counts %d entries, %d are linked", c.free.n, len(at))
	}
	if f := c.free.front; f != nil && len(kids[f]) != 0 {
		return fmt.Errorf("the front of the free list has %d entries after it", len(kids[f]))
	}
	for _, e := range all {
		i, listed := at[e]
		if listed != free(e) {
			return fmt.Errorf("an entry whose subtree only the cache holds is %v, in the list %v", free(e), listed)
		}
		for _, k := range kids[e] {
			if j, ok := at[k]; listed && (!ok || j > i) {
				return fmt.Errorf("a free entry at %d of the list comes before its child at %d", i, j)
			}
		}
	}
	return nil
}
