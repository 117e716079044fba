package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Eviction under a MaxBytes cap of windowed (Optional) and
// checkpointed (Reconstructable) heads, followed by At, Read and Rollback,
// against a model of every version's rows.

// beLayout is one 256-byte row per 256-byte block: window w (0: none),
// a checkpoint policy when every > 0.
func beLayout(typ string, ret Retention, w, every, keep int) *Layout {
	l := &Layout{Type: typ, Columns: []Column{{Name: "Row", ElemSize: 8, Width: 32}}, Retention: ret, Window: w, Descendants: Keep}
	if every > 0 {
		l.Checkpoint = &CheckpointPolicy{Every: every, Keep: keep}
	}
	return l
}

func beRows(vals []uint32) [][]byte {
	b := make([]byte, 256*len(vals))
	for i, v := range vals {
		r := b[256*i : 256*(i+1)]
		for k := range r {
			r[k] = byte(v) ^ byte(k)
		}
		binary.LittleEndian.PutUint32(r, v)
	}
	return [][]byte{b}
}

type beHandle struct {
	name    string
	h       *Head // nil for a snapshot
	s       *Snap
	head    *beHead // the head a snapshot was taken of
	v       Version
	ret     Retention
	evicted bool
}

type beHead struct {
	beHandle
	w        int
	versions []Version // the versions this head made, in order
}

type beModel struct {
	rows   map[beKey][]uint32
	parent map[beKey]beKey
}

func (m *beModel) isAncestor(a, b beKey) bool { return ancestorIn(m.parent, a, b) }

type beKey struct {
	lin string
	v   Version
}

// beCheck compares x with the model; an Optional handle may answer
// ErrEvicted, once and for good.
func beCheck(t *testing.T, what string, x *beHandle, w int, m *beModel) {
	t.Helper()
	var r bwReader = x.s
	if x.h != nil {
		r = x.h
	}
	lin := x.name
	if x.head != nil {
		lin = x.head.name
	}
	want := m.rows[beKey{lin, x.v}]
	n := len(want)
	old := 0
	if w > 0 {
		old = max(0, n-w)
	}
	dst := [][]byte{make([]byte, 256*(n-old))}
	err := r.Read(old, n, dst)
	if errors.Is(err, ErrEvicted) {
		if x.ret != Optional {
			t.Fatalf("%s: a %v handle answers ErrEvicted: %v", what, x.ret, err)
		}
		x.evicted = true
		return
	}
	if errors.Is(err, ErrNoMemory) && x.ret != Mandatory { // rebuilding, or back from the host tier
		return
	}
	if x.evicted {
		t.Fatalf("%s: evicted before, now reads: %v", what, err)
	}
	if err != nil {
		t.Fatalf("%s: Read(%d, %d): %v", what, old, n, err)
	}
	if r.Len() != n || r.Oldest() != old || r.Version() != x.v {
		t.Fatalf("%s: Len %d Oldest %d Version %d, want %d %d %d", what, r.Len(), r.Oldest(), r.Version(), n, old, x.v)
	}
	if exp := beRows(want[old:]); string(dst[0]) != string(exp[0]) {
		t.Fatalf("%s (v%d): reads other rows than %v", what, x.v, want[old:])
	}
	if old > 0 {
		if err := r.Read(old-1, old, [][]byte{make([]byte, 256)}); !errors.Is(err, ErrExpired) && !errors.Is(err, ErrEvicted) && !errors.Is(err, ErrNoMemory) {
			t.Fatalf("%s: Read(%d, %d) below the window: %v, want ErrExpired", what, old-1, old, err)
		}
	}
}

func TestEvictModel(t *testing.T) {
	for seed := uint64(0); seed < 16; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runBEModel(t, seed, 250, 0) })
		t.Run(fmt.Sprint("tier", seed), func(t *testing.T) { runBEModel(t, seed, 250, int64(seed%4)*1024) })
	}
}

func runBEModel(t *testing.T, seed uint64, steps int, tier int64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	capBytes := int64(12+rng.IntN(12)) * 256
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: capBytes, HostTier: tier})
	m := &beModel{rows: map[beKey][]uint32{}, parent: map[beKey]beKey{}}
	mk := func(name string, l *Layout) *beHead {
		h := must[*Head](t)(p.NewHead(l, Owner(name)))
		x := &beHead{beHandle: beHandle{name: name, h: h, v: h.Version(), ret: l.Retention}, w: l.Window}
		x.versions = []Version{x.v}
		m.rows[beKey{name, x.v}] = nil
		return x
	}
	heads := []*beHead{
		mk("win", beLayout("Win", Optional, 3+rng.IntN(4), 0, 0)),
		mk("rec", beLayout("Rec", Reconstructable, 0, 1+rng.IntN(3), 2+rng.IntN(3))),
		mk("opt", beLayout("Opt", Optional, 0, 0, 0)),
		mk("man", beLayout("Man", Mandatory, 0, 0, 0)),
	}
	var snaps []*beHandle
	next := uint32(1)
	relaunched := 0
	for step := 0; step < steps; step++ {
		xi := rng.IntN(len(heads))
		x := heads[xi]
		if x.evicted {
			// Start a fresh head in its place.
			l := x.h.Layout()
			check(t, x.h.Release())
			if err := x.h.Read(0, 0, [][]byte{{}}); err == nil {
				t.Fatalf("a released head reads")
			}
			heads[xi] = mk(fmt.Sprintf("%s.%d", x.name, step), l)
			x = heads[xi]
			relaunched++
		}
		op := rng.IntN(100)
		what := fmt.Sprintf("step %d op %d %s", step, op, x.name)
		switch {
		case op < 40: // append
			n := 1 + rng.IntN(3)
			if x.w > 0 {
				n = min(n, x.w)
			}
			if x.name == "man" && len(m.rows[beKey{x.name, x.v}]) > 6 {
				n = 1
			}
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = next
				next++
			}
			err := x.h.Append(beRows(vals))
			switch {
			case err == nil:
				if x.evicted {
					t.Fatalf("%s: an evicted head appended", what)
				}
				nv := x.h.Version()
				if _, dup := m.rows[beKey{x.name, nv}]; dup {
					t.Fatalf("%s: new version %d was a version already", what, nv)
				}
				m.parent[beKey{x.name, nv}] = beKey{x.name, x.v}
				m.rows[beKey{x.name, nv}] = append(slices.Clone(m.rows[beKey{x.name, x.v}]), vals...)
				x.v = nv
				x.versions = append(x.versions, nv)
			case errors.Is(err, ErrEvicted) && x.ret == Optional:
				x.evicted = true
			case errors.Is(err, ErrNoMemory):
			default:
				t.Fatalf("%s: Append(%d): %v", what, n, err)
			}
		case op < 55: // snapshot
			s, err := x.h.Snapshot()
			switch {
			case err == nil:
				snaps = append(snaps, &beHandle{name: x.name + "-snap", s: s, head: x, v: x.v, ret: x.ret})
			case errors.Is(err, ErrEvicted) && x.ret == Optional:
				x.evicted = true
			case errors.Is(err, ErrNoMemory):
			default:
				t.Fatalf("%s: Snapshot: %v", what, err)
			}
		case op < 65: // release a snapshot
			if len(snaps) == 0 {
				continue
			}
			i := rng.IntN(len(snaps))
			check(t, snaps[i].s.Release())
			snaps = slices.Delete(snaps, i, i+1)
		case op < 78: // rollback to a snapshot of x
			var mine []*beHandle
			for _, s := range snaps {
				if s.head == x {
					mine = append(mine, s)
				}
			}
			if len(mine) == 0 {
				continue
			}
			s := mine[rng.IntN(len(mine))]
			err := x.h.Rollback(s.s)
			switch {
			case err == nil:
				if !m.isAncestor(beKey{x.name, s.v}, beKey{x.name, x.v}) {
					t.Fatalf("%s: Rollback to v%d, not an ancestor of v%d, succeeded", what, s.v, x.v)
				}
				if x.evicted || s.evicted {
					// An evicted head taking a live snapshot's rows is
					// fine only if it reads them now.
					t.Logf("%s: Rollback of an evicted handle succeeded (head %v snap %v)", what, x.evicted, s.evicted)
					x.evicted = false
				}
				x.v = s.v
			case errors.Is(err, ErrEvicted) && x.ret == Optional:
				if !x.evicted && !s.evicted {
					// either may have been evicted since the last check
					x.evicted = x.h.Read(0, 0, [][]byte{{}}) != nil
				}
			case errors.Is(err, ErrNoMemory):
			case errors.Is(err, ErrNotAncestor) && !m.isAncestor(beKey{x.name, s.v}, beKey{x.name, x.v}):
			default:
				t.Fatalf("%s: Rollback to v%d: %v", what, s.v, err)
			}
		default: // At
			if x.name != "rec" {
				continue
			}
			v := x.versions[rng.IntN(len(x.versions))]
			if _, ok := m.rows[beKey{x.name, v}]; !ok {
				continue
			}
			s, err := x.h.At(v)
			switch {
			case err == nil:
				if s.Version() != v {
					t.Fatalf("%s: At(%d) has version %d", what, v, s.Version())
				}
				snaps = append(snaps, &beHandle{name: "rec-at", s: s, head: x, v: v, ret: x.ret})
			case errors.Is(err, ErrNotRetained), errors.Is(err, ErrNoMemory):
			default:
				t.Fatalf("%s: At(%d): %v", what, v, err)
			}
		}
		for _, y := range heads {
			beCheck(t, what+" check "+y.name, &y.beHandle, y.w, m)
		}
		for i, s := range snaps {
			beCheck(t, fmt.Sprintf("%s check snap %d %s", what, i, s.name), s, s.head.w, m)
		}
		if ps := p.Stats(); ps.ReservedBytes > capBytes {
			t.Fatalf("%s: reserved %d over the cap", what, ps.ReservedBytes)
		}
	}
	ps := p.Stats()
	t.Logf("evicted %d bytes, rebuilt %d bytes; %d heads evicted", ps.EvictedBytes, ps.RebuiltBytes, relaunched)
	for _, s := range snaps {
		check(t, s.s.Release())
	}
	for _, y := range heads {
		check(t, y.h.Release())
	}
	if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.Live != 0 || ps.LogicalBytes != 0 || ps.Blocks != 0 || ps.HistoryBytes != 0 {
		t.Fatalf("after releasing everything: %+v", ps)
	}
}
