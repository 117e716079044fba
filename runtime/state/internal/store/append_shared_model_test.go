package store

import (
	"bytes"
	"encoding/binary"
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

// tailRef is a live head or snapshot: its reference (ref_model_test.go),
// whose rows are those of tokens (tokRow), and what the model adds: the
// versions a head was at, which At picks from, and a name for messages.
type tailRef struct {
	*RefHandle
	seen map[Version]bool // a head's versions at the end of each step
	name string
}

func (o *tailRef) read(from, to int, dst [][]byte) error {
	if o.Head != nil {
		return o.Head.Read(from, to, dst)
	}
	return o.Snap.Read(from, to, dst)
}

func (o *tailRef) oldest() int {
	if o.Head != nil {
		return o.Head.Oldest()
	}
	return o.Snap.Oldest()
}

// release releases o in the store and the reference.
func (o *tailRef) release() error {
	o.Release()
	if o.Head != nil {
		return o.Head.Release()
	}
	return o.Snap.Release()
}

// tailWant returns the bytes of tokens toks per column.
func tailWant(toks []uint32) [][]byte {
	w := [][]byte{{}, {}}
	for _, tok := range toks {
		r := tokRow(tok)
		w[0], w[1] = append(w[0], r[0]...), append(w[1], r[1]...)
	}
	return w
}

// tailRefCheck reads o's readable rows and compares them with its reference.
// It reports false when o answers ErrInvalidated (a rollback's
// descendant, which the reference must say too) or ErrEvicted.
func tailRefCheck(t *testing.T, step int, o *tailRef) bool {
	t.Helper()
	if msg := tailRefCheckMsg(o); msg != "" {
		t.Fatalf("step %d: %s", step, msg)
	}
	return !o.Invalid && !o.Evicted
}

// tailRefCheckMsg is tailRefCheck's check, which it describes when it fails; it
// marks o evicted when o answers ErrEvicted.
func tailRefCheckMsg(o *tailRef) string {
	from, to := o.oldest(), o.Rows()
	got := [][]byte{make([]byte, 4*(to-from)), make([]byte, 8*(to-from))}
	err := o.read(from, to, got)
	if inv := errors.Is(err, ErrInvalidated); inv != o.Invalid {
		return fmt.Sprintf("%s: read [%d,%d): %v; invalidated by a rollback in the reference: %v", o.name, from, to, err, o.Invalid)
	}
	if o.Invalid {
		return ""
	}
	if errors.Is(err, ErrEvicted) {
		o.Evicted = true
		return ""
	}
	if err != nil {
		return fmt.Sprintf("%s: read [%d,%d): %v", o.name, from, to, err)
	}
	if !o.Same(from, to, got) {
		for i := from; i < to; i++ {
			k, w := got[0][4*(i-from):4*(i-from+1)], o.Cols[0][4*i:4*(i+1)]
			if !bytes.Equal(k, w) {
				return fmt.Sprintf("%s reads other rows than its own: row %d of [%d,%d) reads key %x, want token %d", o.name, i, from, to, k, binary.LittleEndian.Uint32(w))
			}
		}
		return fmt.Sprintf("%s reads other values than its own", o.name)
	}
	return ""
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
	newHead := func(name string) *tailRef {
		lin := NewRefLineage("me", l)
		lin.KeepVersions()
		return &tailRef{RefHandle: lin.NewHead(must[*Head](t)(p.NewHead(l, "me"))), name: name}
	}
	objs := []*tailRef{newHead("head0")}
	heads := func() []*tailRef {
		var hs []*tailRef
		for _, o := range objs {
			if o.Head != nil {
				hs = append(hs, o)
			}
		}
		return hs
	}
	snaps := func() []*tailRef {
		var ss []*tailRef
		for _, o := range objs {
			if o.Snap != nil {
				ss = append(ss, o)
			}
		}
		return ss
	}
	drop := func(o *tailRef) {
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
			o.release()
		}
	})
	for step := 0; step < steps; step++ {
		hs := heads()
		if len(hs) == 0 {
			objs = append(objs, newHead(fmt.Sprint("head", step)))
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
			var err error
			if rng.IntN(2) == 0 {
				w := tailWant(ts)
				if err = h.Head.Append(w); err == nil {
					h.Append(w)
				}
			} else {
				for _, x := range ts {
					if err = h.Head.Append(tokRow(x)); err != nil {
						if soft && tailSoft(err) {
							n, err = 0, nil // the rows before stay
						}
						break
					}
					h.Append(tokRow(x))
				}
				if n == 0 {
					continue
				}
			}
			if err != nil && soft && tailSoft(err) && n == len(ts) {
				continue
			}
			check(t, err)
			ops = append(ops, fmt.Sprintf("%s append %d", h.name, n))
		case k < 8: // device append
			n := 1 + rng.IntN(6)
			var ts []uint32
			for range n {
				ts = append(ts, tok())
			}
			if err := tailAppendDevice(t, p, h.Head, ts); err != nil {
				if soft && tailSoft(err) {
					continue
				}
				t.Fatal(err)
			}
			h.Append(tailWant(ts))
			ops = append(ops, fmt.Sprintf("%s appenddevice %d", h.name, n))
		case k < 9: // an append of no rows, and a read of a snapshot meanwhile
			if err := h.Head.Append([][]byte{nil, nil}); err == nil {
				h.Append([][]byte{nil, nil})
			} else if !(soft && tailSoft(err)) {
				check(t, err)
			}
		case k < 12: // snapshot
			s, err := h.Head.Snapshot()
			if soft && tailSoft(err) {
				continue
			}
			check(t, err)
			objs = append(objs, &tailRef{RefHandle: h.Snapshot(s), name: fmt.Sprintf("snap%d(%s)", step, h.name)})
			ops = append(ops, fmt.Sprintf("snapshot %s", h.name))
		case k < 14: // branch
			b, err := h.Head.Branch()
			if soft && tailSoft(err) {
				continue
			}
			check(t, err)
			objs = append(objs, &tailRef{RefHandle: h.Branch(b), seen: maps.Clone(h.seen), name: fmt.Sprintf("branch%d(%s)", step, h.name)})
			ops = append(ops, fmt.Sprintf("branch %s", h.name))
		case k < 16: // rollback to a snapshot
			ss := snaps()
			if len(ss) == 0 {
				continue
			}
			s := ss[rng.IntN(len(ss))]
			err := h.Head.Rollback(s.Snap)
			if ok := h.CanRollback(s.RefHandle); ok && err != nil && !errors.Is(err, ErrNotAncestor) {
				continue // an invalidated or evicted one: tailRefCheck tells
			} else if ok != (err == nil) {
				t.Fatalf("step %d: %s rollback %s: %v, the reference says possible %v (ops %v)", step, h.name, s.name, err, ok, ops)
			}
			if err == nil {
				h.Rollback(s.RefHandle)
				ops = append(ops, fmt.Sprintf("%s rollback %s", h.name, s.name))
			}
		case k < 17 && rng.IntN(2) == 0: // a past version (At)
			var vs []Version
			for v := range h.seen {
				vs = append(vs, v)
			}
			if len(vs) == 0 {
				continue
			}
			slices.Sort(vs)
			v := vs[rng.IntN(len(vs))]
			s, err := h.Head.At(v)
			if err != nil {
				continue
			}
			objs = append(objs, &tailRef{RefHandle: h.At(s, v), name: fmt.Sprintf("at%d(%s,v%d)", step, h.name, v)})
			ops = append(ops, fmt.Sprintf("at %s v%d", h.name, v))
		case k < 17: // merge a branch
			c := hs[rng.IntN(len(hs))]
			if c == h {
				continue
			}
			err := h.Head.Merge(c.Head)
			if err == nil && !h.CanMerge(c.RefHandle) {
				t.Fatalf("step %d: %s merged %s, which the reference says it may not (ops %v)", step, h.name, c.name, ops)
			}
			if err == nil {
				h.Merge(c.RefHandle)
				ops = append(ops, fmt.Sprintf("%s merge %s", h.name, c.name))
			}
		default: // release
			o := objs[rng.IntN(len(objs))]
			check(t, o.release())
			drop(o)
			ops = append(ops, fmt.Sprintf("release %s", o.name))
		}
		for _, o := range objs {
			if o.Head != nil {
				if o.seen == nil {
					o.seen = map[Version]bool{}
				}
				o.seen[o.V] = true
			}
		}
		for _, o := range append([]*tailRef(nil), objs...) {
			if !tailRefCheck(t, step, o) {
				o.release()
				drop(o)
				continue
			}
			if v := o.version(); v != o.V {
				t.Fatalf("step %d: %s at version %d, the reference at %d (ops %v)", step, o.name, v, o.V, ops)
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
		check(t, o.release())
	}
	objs = nil
	if soft {
		t.Logf("evictions: %d", p.Stats().Evictions)
	}
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
		t.Fatalf("after releasing everything: %d live, %d physical bytes", st.Live, st.PhysicalBytes)
	}
}

func (o *tailRef) version() Version {
	if o.Head != nil {
		return o.Head.Version()
	}
	return o.Snap.Version()
}

var _ = sync.Mutex{}
var _ device.Span
