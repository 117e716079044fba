package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// hsLayout returns an append layout of ncols columns of mixed row
// sizes (so that, on a row-sized pool, the columns' blocks are of several
// size classes and hold different rows), with a window and checkpoints
// at times.
func hsLayout(rng *rand.Rand, ncols int) *Layout {
	l := &Layout{Type: "Mix", Growth: Append, Descendants: Keep}
	sizes := []struct{ e, w int }{{4, 32}, {4, 64}, {2, 3}, {8, 1}, {1, 1}, {4, 4}, {2, 100}, {8, 40}}
	for c := range ncols {
		s := sizes[rng.IntN(len(sizes))]
		l.Columns = append(l.Columns, Column{Name: fmt.Sprint("C", c), ElemSize: s.e, Width: s.w})
	}
	switch rng.IntN(4) {
	case 0:
		l.Window = 20 + rng.IntN(60)
	case 1:
		l.Checkpoint = &CheckpointPolicy{Every: 1 + rng.IntN(4), Keep: 1 + rng.IntN(3)}
	}
	return l
}

// hsRead reads rows [from, to) of x, of layout l.
func hsRead(x interface {
	Read(from, to int, dst [][]byte) error
}, l *Layout, from, to int) ([][]byte, error) {
	dst := make([][]byte, len(l.Columns))
	for c, col := range l.Columns {
		dst[c] = make([]byte, (to-from)*col.rowBytes())
	}
	return dst, x.Read(from, to, dst)
}

// hsSlice returns rows [from, to) of all, the rows of layout l.
func hsSlice(all [][]byte, l *Layout, from, to int) [][]byte {
	out := make([][]byte, len(all))
	for c, col := range l.Columns {
		rb := col.rowBytes()
		out[c] = all[c][from*rb : to*rb]
	}
	return out
}

func hsEqual(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for c := range a {
		if !bytes.Equal(a[c], b[c]) {
			return false
		}
	}
	return true
}

type hsAppHead struct {
	h     *Head
	rows  [][]byte // every row appended, from row 0
	snaps []*Snap
	srows []int // the rows of each snapshot
	sdata [][][]byte
}

// TestAppendModel appends rows one at a time (the short path, whose
// blocks of one size class are now taken in one call) and a few at a
// time, to heads of layouts of 1 to 11 columns of mixed size classes on
// row-sized and fixed-block pools, some capped, with snapshots, branches,
// rollbacks and releases between; every head and snapshot reads as the
// rows appended, and a failed append (ErrNoMemory) changes nothing.
func TestAppendModel(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 606))
			ncols := []int{1, 2, 3, 8, 9, 11}[seed%6]
			l := hsLayout(rng, ncols)
			opt := PoolOptions{}
			if seed%3 == 2 {
				opt.BlockBytes = 1024
			}
			capped := seed%4 == 3
			if capped {
				opt.MaxBytes = int64(64+rng.IntN(64)) * 1024
			}
			p, err := NewPool(device.Host(), opt)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { check(t, p.Close()) }()
			heads := []*hsAppHead{{h: must[*Head](t)(p.NewHead(l, "a")), rows: make([][]byte, ncols)}}
			defer func() {
				for _, x := range heads {
					for _, s := range x.snaps {
						s.Release()
					}
					x.h.Release()
				}
			}()
			seedb := byte(1)
			noMem := 0
			for i := range 500 {
				x := heads[rng.IntN(len(heads))]
				h := x.h
				switch k := rng.IntN(40); {
				case k < 30:
					n := 1
					if k >= 27 {
						n = 1 + rng.IntN(40)
						if l.Window > 0 {
							n = min(n, l.Window)
						}
					}
					seedb++
					batch := layoutRows(l, n, seedb)
					v, st := h.Version(), h.Stats()
					err := h.Append(batch)
					if errors.Is(err, ErrNoMemory) {
						noMem++
						if h.Version() != v || h.Stats().Rows != st.Rows || h.Stats().LogicalBytes != st.LogicalBytes {
							t.Fatalf("op %d: a failed append changed the head", i)
						}
						// Free some room: drop a snapshot or a branch.
						if len(x.snaps) > 0 {
							check(t, x.snaps[0].Release())
							x.snaps, x.srows, x.sdata = x.snaps[1:], x.srows[1:], x.sdata[1:]
						} else if len(heads) > 1 {
							j := 1 + rng.IntN(len(heads)-1)
							for _, s := range heads[j].snaps {
								s.Release()
							}
							check(t, heads[j].h.Release())
							heads = append(heads[:j:j], heads[j+1:]...)
						}
						break
					}
					check(t, err)
					for c := range batch {
						x.rows[c] = append(x.rows[c], batch[c]...)
					}
				case k < 33 && len(x.snaps) < 3:
					x.snaps = append(x.snaps, must[*Snap](t)(h.Snapshot()))
					x.srows = append(x.srows, h.Len())
					x.sdata = append(x.sdata, cloneCols(x.rows))
				case k < 34 && len(x.snaps) > 0:
					j := rng.IntN(len(x.snaps))
					check(t, x.snaps[j].Release())
					x.snaps = append(x.snaps[:j:j], x.snaps[j+1:]...)
					x.srows = append(x.srows[:j:j], x.srows[j+1:]...)
					x.sdata = append(x.sdata[:j:j], x.sdata[j+1:]...)
				case k < 36 && len(heads) < 4:
					c, err := h.Branch()
					if errors.Is(err, ErrNoMemory) {
						break
					}
					check(t, err)
					heads = append(heads, &hsAppHead{h: c, rows: cloneCols(x.rows)})
				case k < 38 && len(x.snaps) > 0:
					j := rng.IntN(len(x.snaps))
					err := h.Rollback(x.snaps[j])
					if errors.Is(err, ErrNotAncestor) || errors.Is(err, ErrNoMemory) {
						break
					}
					check(t, err)
					x.rows = cloneCols(x.sdata[j])
				default:
					if len(heads) > 1 && x != heads[0] {
						for _, s := range x.snaps {
							s.Release()
						}
						check(t, h.Release())
						for j := range heads {
							if heads[j] == x {
								heads = append(heads[:j:j], heads[j+1:]...)
								break
							}
						}
						continue
					}
				}
				for j, y := range heads {
					if i%7 != 0 && y != x {
						continue
					}
					n := y.h.Len()
					lo := y.h.Oldest()
					if n != len(y.rows[0])/l.Columns[0].rowBytes() {
						t.Fatalf("op %d: head %d holds %d rows, the reference %d", i, j, n, len(y.rows[0])/l.Columns[0].rowBytes())
					}
					got, err := hsRead(y.h, l, lo, n)
					check(t, err)
					if !hsEqual(got, hsSlice(y.rows, l, lo, n)) {
						t.Fatalf("op %d: head %d reads otherwise than the rows appended (rows %d..%d)", i, j, lo, n)
					}
					for k, s := range y.snaps {
						lo := s.Oldest()
						got, err := hsRead(s, l, lo, y.srows[k])
						check(t, err)
						if !hsEqual(got, hsSlice(y.sdata[k], l, lo, y.srows[k])) {
							t.Fatalf("op %d: snapshot %d of head %d reads otherwise than when taken", i, k, j)
						}
					}
				}
			}
			t.Logf("%d columns, %d failed appends", ncols, noMem)
			checkInv(t, p)
		})
	}
}

// TestAppendPathsOneRowMixedClasses: one row at a time through
// Append, AppendDevice (the rows written through the spans) and
// AppendAsync, on a row-sized pool where the keys' and values' blocks
// are of one class and the token's, holding more rows, of another (a
// row wants a keys-and-values block, a token block, both or neither),
// with a snapshot held at times (the tail shared: claimed, or copied):
// the head and every snapshot read as the rows appended.
func TestAppendPathsOneRowMixedClasses(t *testing.T) {
	for _, name := range []string{"host", "fakecuda"} {
		t.Run(name, func(t *testing.T) {
			rig := statetest.HostStreamRig(t)
			if name == "fakecuda" {
				rig = statetest.FakeStreamRig(t)
			}
			p, err := NewPool(rig.Backend, PoolOptions{})
			check(t, err)
			defer p.Close()
			l := &Layout{Type: "KVT", Growth: Append, Descendants: Keep, Columns: []Column{
				{Name: "K", ElemSize: 2, Width: 64}, {Name: "V", ElemSize: 2, Width: 64}, {Name: "Tok", ElemSize: 4, Width: 1},
			}}
			h := must[*Head](t)(p.NewHead(l, "a"))
			defer h.Release()
			st, err := rig.Streams().NewStream()
			check(t, err)
			defer st.Close()
			all := make([][]byte, 3)
			type held struct {
				s *Snap
				n int
			}
			var snaps []held
			for i := range 300 {
				row := layoutRows(l, 1, byte(i))
				switch i % 3 {
				case 0:
					check(t, h.Append(row))
				case 1:
					spans := must[[][]device.Span](t)(h.AppendDevice(1))
					for c, ss := range spans {
						check(t, p.Backend().CopyHtoD(ss[0].Ptr, row[c]))
					}
				case 2:
					check(t, h.AppendAsync(st, row))
				}
				for c := range row {
					all[c] = append(all[c], row[c]...)
				}
				if i%11 == 5 && len(snaps) < 4 {
					snaps = append(snaps, held{must[*Snap](t)(h.Snapshot()), i + 1})
				}
				if i%17 == 0 && len(snaps) > 0 {
					check(t, snaps[0].s.Release())
					snaps = snaps[1:]
				}
				if i%10 == 9 {
					check(t, st.Sync())
					got, err := hsRead(h, l, 0, i+1)
					check(t, err)
					if !hsEqual(got, all) {
						t.Fatalf("row %d: the head reads otherwise", i)
					}
					for _, s := range snaps {
						got, err := hsRead(s.s, l, 0, s.n)
						check(t, err)
						if !hsEqual(got, hsSlice(all, l, 0, s.n)) {
							t.Fatalf("row %d: a snapshot of %d rows reads otherwise", i, s.n)
						}
					}
				}
			}
			for _, s := range snaps {
				check(t, s.s.Release())
			}
			checkInv(t, p)
		})
	}
}
