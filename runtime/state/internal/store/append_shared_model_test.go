package store

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// The adversarial tests of the in-place append past a shared tail
// (tree.appendsInPlace, Block.ClaimFill): every head and snapshot reads
// its own rows, whatever mix of branches, snapshots, rollbacks, merges,
// writes, device appends and windows went on around the shared blocks.

// tailObj is a live head or snapshot and the tokens it must read.
type tailObj struct {
	vers map[Version][]uint32 // a head's versions and their tokens
	h    *Head
	s    *Snap
	toks []uint32
	name string
}

func (o *tailObj) read(from, to int, dst [][]byte) error {
	if o.h != nil {
		return o.h.Read(from, to, dst)
	}
	return o.s.Read(from, to, dst)
}

func (o *tailObj) oldest() int {
	if o.h != nil {
		return o.h.Oldest()
	}
	return o.s.Oldest()
}

// tailWant returns the bytes of tokens toks[from:to] per column.
func tailWant(toks []uint32) [2][]byte {
	var w [2][]byte
	for _, tok := range toks {
		r := tokRow(tok)
		w[0], w[1] = append(w[0], r[0]...), append(w[1], r[1]...)
	}
	return w
}

// tailCheck reads o's readable rows and compares them with its tokens. It
// reports false when o answers ErrInvalidated (a rollback's descendant).
func tailCheck(t *testing.T, step int, o *tailObj) bool {
	t.Helper()
	from, to := o.oldest(), len(o.toks)
	got := [][]byte{make([]byte, 4*(to-from)), make([]byte, 8*(to-from))}
	err := o.read(from, to, got)
	if errors.Is(err, ErrInvalidated) && o.s != nil {
		return false
	}
	if errors.Is(err, ErrInvalidated) && o.h != nil || errors.Is(err, ErrEvicted) {
		return false
	}
	if err != nil {
		t.Fatalf("step %d: %s: read [%d,%d): %v", step, o.name, from, to, err)
	}
	w := tailWant(o.toks[from:to])
	if !bytes.Equal(got[0], w[0]) || !bytes.Equal(got[1], w[1]) {
		for i := from; i < to; i++ {
			k := got[0][4*(i-from) : 4*(i-from+1)]
			if !bytes.Equal(k, w[0][4*(i-from):4*(i-from+1)]) {
				t.Fatalf("step %d: %s reads other rows than its own: row %d of [%d,%d) reads key %x, want token %d", step, o.name, i, from, to, k, o.toks[i])
			}
		}
		t.Fatalf("step %d: %s reads other values than its own", step, o.name)
	}
	return true
}

// tailAppendDevice appends toks through AppendDevice, writing the rows
// through the spans as a kernel would.
func tailAppendDevice(t *testing.T, p *Pool, h *Head, toks []uint32) error {
	t.Helper()
	spans, err := h.AppendDevice(len(toks))
	if err != nil {
		return err
	}
	w := tailWant(toks)
	for c, cs := range spans {
		rb := []int{4, 8}[c]
		off := 0
		for _, sp := range cs {
			check(t, p.Backend().CopyHtoD(sp.Ptr, w[c][off:off+sp.Rows*rb]))
			off += sp.Rows * rb
		}
		if off != len(w[c]) {
			t.Fatalf("AppendDevice's spans cover %d bytes of column %d, want %d", off, c, len(w[c]))
		}
	}
	return nil
}

type tailVariant struct {
	name string
	l    *Layout
}

func tailVariants() []tailVariant {
	base := func(d Descendants) *Layout {
		return &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 4096, BlockRows: 4, Descendants: d}
	}
	keep, inval := base(Keep), base(Invalidate)
	win := base(Keep)
	win.Window, win.Bound = 7, 0
	winInv := base(Invalidate)
	winInv.Window, winInv.Bound = 9, 0
	cp := base(Keep)
	cp.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 2}
	cpInv := base(Invalidate)
	cpInv.Checkpoint = &CheckpointPolicy{Every: 2, Keep: 3}
	return []tailVariant{{"keep", keep}, {"invalidate", inval}, {"window", win}, {"window-invalidate", winInv}, {"checkpoints", cp}, {"checkpoints-invalidate", cpInv}}
}

// TestAppendInPlaceModel runs random appends (host, per row, device),
// writes, branches, snapshots, rollbacks, merges and releases, and checks
// after each that every live head and snapshot reads its own tokens, then
// that releasing everything gives every block back.
func TestAppendInPlaceModel(t *testing.T) {
	for _, v := range tailVariants() {
		for _, seed := range statetest.Seeds(seedRange(12)...) {
			t.Run(fmt.Sprintf("%s/%d", v.name, seed), func(t *testing.T) {
				tailModel(t, v.l, PoolOptions{}, seed, statetest.Steps(300, 1))
			})
		}
	}
}

// TestAppendInPlaceEvict is the model on optional states in a pool too
// small for them: heads and snapshots evicted while others share their
// tails.
func TestAppendInPlaceEvict(t *testing.T) {
	for _, v := range tailVariants() {
		l := *v.l
		l.Retention = Optional
		for _, seed := range statetest.Seeds(seedRange(8)...) {
			t.Run(fmt.Sprintf("%s/%d", v.name, seed), func(t *testing.T) {
				tailModel(t, &l, PoolOptions{BlockBytes: 256, MaxBytes: 40 * 256}, seed, statetest.Steps(300, 1))
			})
		}
	}
}

// seedRange returns the seeds 1 to n: a model's default seeds, which
// -model.seed replaces by one.
func seedRange(n uint64) []uint64 {
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i) + 1
	}
	return seeds
}

// tailSoft reports whether err is one an optional state in a small pool
// may answer: the write did nothing, or the state is gone.
func tailSoft(err error) bool { return errors.Is(err, ErrNoMemory) || errors.Is(err, ErrEvicted) }

func tailModel(t *testing.T, l *Layout, opt PoolOptions, seed uint64, steps int) {
	statetest.LogReplay(t, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	p := newPool(t, opt)
	soft := l.Retention == Optional
	next := uint32(1)
	tok := func() uint32 { next++; return next }
	root := must[*Head](t)(p.NewHead(l, "me"))
	objs := []*tailObj{{h: root, name: "head0"}}
	heads := func() []*tailObj {
		var hs []*tailObj
		for _, o := range objs {
			if o.h != nil {
				hs = append(hs, o)
			}
		}
		return hs
	}
	snaps := func() []*tailObj {
		var ss []*tailObj
		for _, o := range objs {
			if o.s != nil {
				ss = append(ss, o)
			}
		}
		return ss
	}
	drop := func(o *tailObj) {
		for i, x := range objs {
			if x == o {
				objs = append(objs[:i], objs[i+1:]...)
				return
			}
		}
	}
	var ops []string
	t.Cleanup(func() {
		for _, o := range objs {
			if o.h != nil {
				o.h.Release()
			} else {
				o.s.Release()
			}
		}
	})
	for step := 0; step < steps; step++ {
		hs := heads()
		if len(hs) == 0 {
			h := must[*Head](t)(p.NewHead(l, "me"))
			objs = append(objs, &tailObj{h: h, name: fmt.Sprint("head", step)})
			continue
		}
		h := hs[rng.IntN(len(hs))]
		switch k := rng.IntN(20); {
		case k < 6: // host append
			n := 1 + rng.IntN(7)
			var ts []uint32
			for range n {
				ts = append(ts, tok())
			}
			w := tailWant(ts)
			var err error
			if rng.IntN(2) == 0 {
				err = h.h.Append([][]byte{w[0], w[1]})
			} else {
				for i, x := range ts {
					if err = h.h.Append(tokRow(x)); err != nil {
						if soft && tailSoft(err) {
							h.toks = append(h.toks, ts[:i]...)
							n, err = 0, nil
						}
						break
					}
				}
				if n == 0 {
					continue
				}
			}
			if err != nil && soft && tailSoft(err) && n == len(ts) {
				continue
			}
			check(t, err)
			h.toks = append(h.toks, ts...)
			ops = append(ops, fmt.Sprintf("%s append %d", h.name, n))
		case k < 8: // device append
			n := 1 + rng.IntN(6)
			var ts []uint32
			for range n {
				ts = append(ts, tok())
			}
			if err := tailAppendDevice(t, p, h.h, ts); err != nil {
				if soft && tailSoft(err) {
					continue
				}
				t.Fatal(err)
			}
			h.toks = append(h.toks, ts...)
			ops = append(ops, fmt.Sprintf("%s appenddevice %d", h.name, n))
		case k < 9: // an append of no rows, and a read of a snapshot meanwhile
			if err := h.h.Append([][]byte{nil, nil}); !(soft && tailSoft(err)) {
				check(t, err)
			}
		case k < 12: // snapshot
			s, err := h.h.Snapshot()
			if soft && tailSoft(err) {
				continue
			}
			check(t, err)
			objs = append(objs, &tailObj{s: s, toks: append([]uint32(nil), h.toks...), name: fmt.Sprintf("snap%d(%s)", step, h.name)})
			ops = append(ops, fmt.Sprintf("snapshot %s", h.name))
		case k < 14: // branch
			b, err := h.h.Branch()
			if soft && tailSoft(err) {
				continue
			}
			check(t, err)
			objs = append(objs, &tailObj{h: b, vers: maps.Clone(h.vers), toks: append([]uint32(nil), h.toks...), name: fmt.Sprintf("branch%d(%s)", step, h.name)})
			ops = append(ops, fmt.Sprintf("branch %s", h.name))
		case k < 16: // rollback to a snapshot
			ss := snaps()
			if len(ss) == 0 {
				continue
			}
			s := ss[rng.IntN(len(ss))]
			err := h.h.Rollback(s.s)
			if err == nil {
				h.toks = append([]uint32(nil), s.toks...)
				ops = append(ops, fmt.Sprintf("%s rollback %s", h.name, s.name))
			}
		case k < 17 && rng.IntN(2) == 0: // a past version (At)
			var vs []Version
			for v := range h.vers {
				vs = append(vs, v)
			}
			if len(vs) == 0 {
				continue
			}
			slices.Sort(vs)
			v := vs[rng.IntN(len(vs))]
			s, err := h.h.At(v)
			if err != nil {
				continue
			}
			o := &tailObj{s: s, toks: append([]uint32(nil), h.vers[v]...), name: fmt.Sprintf("at%d(%s,v%d)", step, h.name, v)}
			objs = append(objs, o)
			ops = append(ops, fmt.Sprintf("at %s v%d", h.name, v))
		case k < 17: // merge a branch
			c := hs[rng.IntN(len(hs))]
			if c == h {
				continue
			}
			if err := h.h.Merge(c.h); err == nil {
				h.toks = append([]uint32(nil), c.toks...)
				ops = append(ops, fmt.Sprintf("%s merge %s", h.name, c.name))
			}
		default: // release
			o := objs[rng.IntN(len(objs))]
			if o.h != nil {
				check(t, o.h.Release())
			} else {
				check(t, o.s.Release())
			}
			drop(o)
			ops = append(ops, fmt.Sprintf("release %s", o.name))
		}
		for _, o := range objs {
			if o.h != nil {
				if o.vers == nil {
					o.vers = map[Version][]uint32{}
				}
				if _, ok := o.vers[o.h.Version()]; !ok {
					o.vers[o.h.Version()] = append([]uint32(nil), o.toks...)
				}
			}
		}
		for _, o := range append([]*tailObj(nil), objs...) {
			if !tailCheck(t, step, o) {
				if o.h != nil {
					o.h.Release()
				} else {
					o.s.Release()
				}
				drop(o)
			}
		}
		if t.Failed() {
			t.Logf("ops: %v", ops)
			return
		}
	}
	if err := checkInvariants(p); err != nil {
		t.Fatalf("%v (ops %v)", err, ops)
	}
	for _, o := range objs {
		if o.h != nil {
			check(t, o.h.Release())
		} else {
			check(t, o.s.Release())
		}
	}
	objs = nil
	if soft {
		t.Logf("evictions: %d", p.Stats().Evictions)
	}
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
		t.Fatalf("after releasing everything: %d live, %d physical bytes", st.Live, st.PhysicalBytes)
	}
}

var _ = sync.Mutex{}
var _ device.Span
