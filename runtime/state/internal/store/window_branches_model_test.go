package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// Windowed heads: snapshots, branches, merges and
// rollbacks against a model that keeps every version's rows.

// bwLayout is a window of w rows of one uint32 column, rows rows a block.
func bwLayout(w, rows int, desc Descendants, ret Retention) *Layout {
	return &Layout{Type: "BW", Columns: []Column{{Name: "X", ElemSize: 4, Width: 1}},
		Growth: Append, Window: w, BlockRows: rows, Descendants: desc, Retention: ret}
}

// bwVals encodes vals as one uint32 column.
func bwVals(vals []uint32) [][]byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return [][]byte{b}
}

func bwDecode(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// bwModel is the model: every version's rows (all ever appended), and
// each version's parent.
type bwModel struct {
	w      int
	rows   map[Version][]uint32
	parent map[Version]Version
}

func (m *bwModel) isAncestor(a, b Version) bool { return ancestorIn(m.parent, a, b) }

// ancestorIn reports whether a is b or an ancestor of b by parent, a
// model's map from each version to the one it was made from.
func ancestorIn[K comparable](parent map[K]K, a, b K) bool {
	for {
		if a == b {
			return true
		}
		p, ok := parent[b]
		if !ok {
			return false
		}
		b = p
	}
}

type bwReader interface {
	Read(from, to int, dst [][]byte) error
	ReadRows(idx []int, dst [][]byte) error
	Len() int
	Oldest() int
	Version() Version
}

// bwCheck compares x with the model at version v.
func bwCheck(t *testing.T, what string, x bwReader, m *bwModel, v Version, rng *rand.Rand) {
	t.Helper()
	want, ok := m.rows[v]
	if !ok {
		t.Fatalf("%s: version %d is unknown to the model", what, v)
	}
	if got := x.Version(); got != v {
		t.Fatalf("%s: Version %d, want %d", what, got, v)
	}
	n := len(want)
	old := max(0, n-m.w)
	if x.Len() != n || x.Oldest() != old {
		t.Fatalf("%s: Len %d Oldest %d, want %d %d", what, x.Len(), x.Oldest(), n, old)
	}
	dst := [][]byte{make([]byte, 4*(n-old))}
	if err := x.Read(old, n, dst); err != nil {
		t.Fatalf("%s: Read(%d, %d): %v", what, old, n, err)
	}
	if got := bwDecode(dst[0]); !slices.Equal(got, want[old:]) {
		t.Fatalf("%s (v%d): Read(%d, %d) = %v, want %v", what, v, old, n, got, want[old:])
	}
	if old > 0 {
		if err := x.Read(old-1, old, [][]byte{make([]byte, 4)}); !errors.Is(err, ErrExpired) {
			t.Fatalf("%s: Read(%d, %d) below the window: %v, want ErrExpired", what, old-1, old, err)
		}
	}
	if n > old {
		k := 1 + rng.IntN(4)
		idx := make([]int, k)
		for i := range idx {
			idx[i] = old + rng.IntN(n-old)
		}
		dst := [][]byte{make([]byte, 4*k)}
		if err := x.ReadRows(idx, dst); err != nil {
			t.Fatalf("%s: ReadRows(%v): %v", what, idx, err)
		}
		for i, r := range idx {
			if got := binary.LittleEndian.Uint32(dst[0][4*i:]); got != want[r] {
				t.Fatalf("%s: ReadRows row %d = %d, want %d", what, r, got, want[r])
			}
		}
	}
}

type bwSnap struct {
	s    *Snap
	v    Version
	dead bool
	// expectDead: the model says a rollback invalidated it.
	expectDead bool
}

type bwHead struct {
	h    *Head
	v    Version
	dead bool
	// expectDead: the model says a rollback invalidated it.
	expectDead bool
}

func TestWindowBranchesModel(t *testing.T) {
	for seed := uint64(0); seed < 12; seed++ {
		for _, desc := range []Descendants{Keep, Invalidate} {
			t.Run(fmt.Sprintf("%d/%v", seed, desc), func(t *testing.T) { runBWModel(t, seed, desc, 300) })
		}
	}
}

func runBWModel(t *testing.T, seed uint64, desc Descendants, steps int) {
	rng := rand.New(rand.NewPCG(seed, 77))
	w := 3 + rng.IntN(10)
	per := 1 + rng.IntN(5)
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := bwLayout(w, per, desc, Mandatory)
	m := &bwModel{w: w, rows: map[Version][]uint32{}, parent: map[Version]Version{}}
	main := must[*Head](t)(p.NewHead(l, "o"))
	heads := []*bwHead{{h: main, v: main.Version()}}
	m.rows[main.Version()] = nil
	var snaps []*bwSnap
	next := uint32(1)
	var merges, rollbacks, invalidated int
	newVersion := func(x *bwHead, rows []uint32) {
		t.Helper()
		nv := x.h.Version()
		if _, dup := m.rows[nv]; dup {
			t.Fatalf("a new version %d was already a version", nv)
		}
		m.parent[nv] = x.v
		m.rows[nv] = rows
		x.v = nv
	}
	for step := 0; step < steps; step++ {
		op := rng.IntN(100)
		x := heads[rng.IntN(len(heads))]
		if x.dead {
			// An invalidated branch: release it.
			for i := range heads {
				if heads[i] == x {
					check(t, x.h.Release())
					heads = slices.Delete(heads, i, i+1)
					break
				}
			}
			if len(heads) == 0 {
				break
			}
			continue
		}
		switch {
		case op < 35: // append
			n := 1 + rng.IntN(w)
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = next
				next++
			}
			if err := x.h.Append(bwVals(vals)); err != nil {
				t.Fatalf("step %d: Append(%d): %v", step, n, err)
			}
			newVersion(x, append(slices.Clone(m.rows[x.v]), vals...))
		case op < 42: // append device
			n := 1 + rng.IntN(w)
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = next
				next++
			}
			spans, err := x.h.AppendDevice(n)
			if err != nil {
				t.Fatalf("step %d: AppendDevice(%d): %v", step, n, err)
			}
			k := 0
			for _, sp := range spans[0] {
				mem, ok := device.HostBytes(p.Backend(), sp.Ptr, 4*sp.Rows)
				if !ok {
					t.Fatal("no host bytes")
				}
				copy(mem, bwVals(vals[k : k+sp.Rows])[0])
				k += sp.Rows
			}
			if k != n {
				t.Fatalf("step %d: AppendDevice(%d) spans cover %d rows", step, n, k)
			}
			newVersion(x, append(slices.Clone(m.rows[x.v]), vals...))
		case op < 44: // too large a batch
			if err := x.h.Append(bwVals(make([]uint32, w+1))); !errors.Is(err, ErrBound) {
				t.Fatalf("step %d: Append of w+1 rows: %v, want ErrBound", step, err)
			}
		case op < 58: // snapshot
			s, err := x.h.Snapshot()
			if err != nil {
				t.Fatalf("step %d: Snapshot: %v", step, err)
			}
			snaps = append(snaps, &bwSnap{s: s, v: x.v})
		case op < 66: // release a snapshot
			if len(snaps) == 0 {
				continue
			}
			i := rng.IntN(len(snaps))
			check(t, snaps[i].s.Release())
			snaps = slices.Delete(snaps, i, i+1)
		case op < 73: // branch
			if len(heads) > 5 {
				continue
			}
			b, err := x.h.Branch()
			if err != nil {
				t.Fatalf("step %d: Branch: %v", step, err)
			}
			heads = append(heads, &bwHead{h: b, v: x.v})
		case op < 77: // release a branch
			if len(heads) < 2 {
				continue
			}
			i := 1 + rng.IntN(len(heads)-1)
			check(t, heads[i].h.Release())
			heads = slices.Delete(heads, i, i+1)
		case op < 87: // merge
			c := heads[rng.IntN(len(heads))]
			if c == x || c.dead {
				continue
			}
			err := x.h.Merge(c.h)
			anc := m.isAncestor(x.v, c.v)
			if err == nil {
				if !anc {
					t.Fatalf("step %d: Merge of v%d into v%d succeeded, not an ancestor", step, c.v, x.v)
				}
				if x.h.Version() != c.v {
					t.Fatalf("step %d: after Merge the head has version %d, want %d", step, x.h.Version(), c.v)
				}
				x.v = c.v
				merges++
			} else if anc && !errors.Is(err, ErrDiverged) {
				t.Logf("step %d: Merge of an ancestor failed: %v", step, err)
			}
		default: // rollback
			if len(snaps) == 0 {
				continue
			}
			s := snaps[rng.IntN(len(snaps))]
			if s.dead {
				if err := x.h.Rollback(s.s); err == nil {
					t.Fatalf("step %d: Rollback to an invalidated snapshot succeeded", step)
				}
				continue
			}
			err := x.h.Rollback(s.s)
			anc := m.isAncestor(s.v, x.v)
			if err == nil {
				if !anc {
					t.Fatalf("step %d: Rollback of v%d to v%d succeeded, not an ancestor", step, x.v, s.v)
				}
				if desc == Invalidate && x.v != s.v {
					// Every other handle that descends from the first
					// abandoned version is invalidated.
					first := x.v
					for m.parent[first] != s.v {
						first = m.parent[first]
					}
					for _, y := range heads {
						if y != x && m.isAncestor(first, y.v) {
							y.expectDead = true
						}
					}
					for _, z := range snaps {
						if m.isAncestor(first, z.v) {
							z.expectDead = true
						}
					}
				}
				x.v = s.v
				rollbacks++
			} else if anc {
				t.Fatalf("step %d: Rollback of v%d to its ancestor v%d: %v", step, x.v, s.v, err)
			}
		}
		probe := func(r bwReader, i int, dead *bool, expect bool) bool {
			if *dead {
				return false
			}
			defer func() {
				if *dead != expect {
					t.Fatalf("step %d: handle %d invalidated %v, the model says %v", step, i, *dead, expect)
				}
			}()
			var err error
			if n := r.Len(); n > 0 {
				err = r.Read(n-1, n, [][]byte{make([]byte, 4)})
			} else {
				err = r.Read(0, 0, [][]byte{{}})
			}
			if errors.Is(err, ErrInvalidated) {
				if desc != Invalidate {
					t.Fatalf("step %d: handle %d invalidated: %v", step, i, err)
				}
				*dead = true
				invalidated++
				return false
			}
			return true
		}
		for i, y := range heads {
			if !probe(y.h, i, &y.dead, y.expectDead) {
				continue
			}
			bwCheck(t, fmt.Sprintf("step %d op %d head %d", step, op, i), y.h, m, y.v, rng)
		}
		for i, s := range snaps {
			if !probe(s.s, -1-i, &s.dead, s.expectDead) {
				continue
			}
			bwCheck(t, fmt.Sprintf("step %d op %d snap %d", step, op, i), s.s, m, s.v, rng)
		}
	}
	t.Logf("%d merges, %d rollbacks, %d invalidated", merges, rollbacks, invalidated)
	for _, s := range snaps {
		check(t, s.s.Release())
	}
	for _, y := range heads {
		check(t, y.h.Release())
	}
	if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.Live != 0 || ps.LogicalBytes != 0 || ps.Blocks != 0 {
		t.Fatalf("after releasing everything: %+v", ps)
	}
}
