package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// hsWide is a mutable layout of ncols columns of mixed row sizes,
// replayed.
func hsWide(ncols, bound int, every, keep int) *Layout {
	l := &Layout{Type: "Wide", Growth: Mutable, Bound: bound, Descendants: Keep}
	sizes := []struct{ e, w int }{{4, 32}, {1, 3}, {8, 1}, {4, 4}, {2, 100}, {4, 64}}
	for c := range ncols {
		s := sizes[c%len(sizes)]
		l.Columns = append(l.Columns, Column{Name: fmt.Sprint("C", c), ElemSize: s.e, Width: s.w})
	}
	l.Checkpoint = &CheckpointPolicy{Every: every, Keep: keep}
	return l
}

// TestHostStepManyColumns: host steps of a state of up to 11
// columns of several size classes (more than the 8 the short paths
// keep arrays for), in place, with slices of their own, and failing with
// a short last column, on both backends, with snapshots, writes, At and
// Rollback between.
func TestHostStepManyColumns(t *testing.T) {
	for _, be := range hsBackends() {
		for _, ncols := range []int{8, 9, 11} {
			for _, opt := range []PoolOptions{{}, {BlockBytes: 512}} {
				t.Run(fmt.Sprint(be.name, ncols, opt.BlockBytes), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(ncols), 3))
					p := hsPool(t, be.b(), opt)
					l := hsWide(ncols, 37, 3, 2)
					h := must[*Head](t)(p.NewHead(l, "me"))
					defer h.Release()
					read := func(x interface {
						Read(from, to int, dst [][]byte) error
					}) [][]byte {
						got, err := hsRead(x, l, 0, 37)
						check(t, err)
						return got
					}
					cur := read(h)
					ref := map[Version][][]byte{h.Version(): cloneCols(cur)}
					var snaps []*Snap
					defer func() {
						for _, s := range snaps {
							s.Release()
						}
					}()
					for i := range 60 {
						switch k := rng.IntN(10); {
						case k < 6:
							in := [][]byte{{byte(i), byte(rng.Uint32())}}
							var f HostStepper = hsRecur{}
							if k%2 == 1 {
								f = hsOwn{}
							}
							check(t, h.StepHostWith(in, i%2 == 0, f))
							recur(cur, in)
						case k < 7:
							v := h.Version()
							err := h.StepHostWith([][]byte{{1}}, true, hsShort{})
							if !errors.Is(err, ErrShape) || h.Version() != v {
								t.Fatalf("step %d: a short last column: %v", i, err)
							}
						case k < 8:
							at := rng.IntN(37)
							rows := layoutRows(l, 1, byte(i))
							check(t, h.Write(at, rows))
							for c, col := range l.Columns {
								rb := col.rowBytes()
								copy(cur[c][at*rb:], rows[c])
							}
						case k < 9 && len(snaps) < 3:
							snaps = append(snaps, must[*Snap](t)(h.Snapshot()))
						case len(snaps) > 0:
							s := snaps[rng.IntN(len(snaps))]
							if err := h.Rollback(s); errors.Is(err, ErrNotAncestor) {
								break
							} else {
								check(t, err)
							}
							cur = cloneCols(ref[s.Version()])
						}
						ref[h.Version()] = cloneCols(cur)
						if got := read(h); !hsEqual(got, cur) {
							t.Fatalf("step %d: the head reads otherwise", i)
						}
						if i%5 == 4 {
							for _, v := range h.hist.versions() {
								s := must[*Snap](t)(h.At(v))
								got := read(s)
								check(t, s.Release())
								if !hsEqual(got, ref[v]) {
									t.Fatalf("step %d: At(%d) reads otherwise", i, v)
								}
							}
						}
					}
					checkInv(t, p)
				})
			}
		}
	}
}

// hsShort writes its rows, then leaves the last column one byte short.
type hsShort struct{}

func (hsShort) StepHost(rows, in [][]byte) error {
	recur(rows, in)
	n := len(rows) - 1
	rows[n] = rows[n][:len(rows[n])-1]
	return nil
}

// TestHostStepTierDropReplays: a reconstructable head made by host
// steps moves to the host tier, which drops it; its next call rebuilds it
// by replaying the steps; At rebuilds its versions, and it steps on.
func TestHostStepTierDropReplays(t *testing.T) {
	for _, be := range hsBackends() {
		t.Run(be.name, func(t *testing.T) {
			p := hsPool(t, be.b(), PoolOptions{BlockBytes: 256, HostTier: 64 << 10})
			h := must[*Head](t)(p.NewHead(hsRecL(Reconstructable, 3, 2), "a"))
			defer h.Release()
			cur := readAll(t, h)
			ref := map[Version][][]byte{h.Version(): cloneCols(cur)}
			for i := range 7 {
				in := [][]byte{{byte(i), 2}}
				check(t, h.StepHostWith(in, i%2 == 0, hsOwn{}))
				recur(cur, in)
				ref[h.Version()] = cloneCols(cur)
			}
			v := h.Version()
			for round := range 2 {
				if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
					t.Fatalf("round %d: move out: %v, %v", round, moved, err)
				}
				if round == 1 && !p.tier.dropOne(p, nil) {
					t.Fatal("the tier dropped nothing")
				}
				if got := readAll(t, h); !equalCols(got, cur) || h.Version() != v {
					t.Fatalf("round %d: back from the tier, the head reads otherwise", round)
				}
				for _, w := range h.hist.versions() {
					s := must[*Snap](t)(h.At(w))
					if !equalCols(readAll(t, s), ref[w]) {
						t.Fatalf("round %d: At(%d) reads otherwise", round, w)
					}
					check(t, s.Release())
				}
				in := [][]byte{{byte(round), 9}}
				check(t, h.StepHostWith(in, true, hsRecur{}))
				recur(cur, in)
				v = h.Version()
				ref[v] = cloneCols(cur)
			}
			if p.Stats().RebuiltBytes == 0 {
				t.Fatal("no rebuild after the tier's drop")
			}
			checkInv(t, p)
		})
	}
}

// TestGroupHostStepFailure: a group's replayed member fails a host
// step (an error, a panic, a short column): the member and the group's
// cuts are as before; At rebuilds every cut by replaying the member's
// host steps, and Rollback takes one.
func TestGroupHostStepFailure(t *testing.T) {
	for _, be := range hsBackends() {
		t.Run(be.name, func(t *testing.T) {
			p := hsPool(t, be.b(), PoolOptions{BlockBytes: 256})
			recL := recLayout(3, 4, Invalidate)
			g := must[*Group](t)(NewGroup(p, "a", checkpointedKV(), recL))
			defer g.Release()
			kvH, recH := g.Head(0), g.Head(1)
			type cut struct {
				kv  Version
				rec [][]byte
			}
			var cuts []cut
			cur := readAll(t, recH)
			for i := range 10 {
				in := [][]byte{{byte(i + 1), 3}}
				var f HostStepper = hsRecur{}
				if i%2 == 1 {
					f = hsOwn{}
				}
				check(t, recH.StepHostWith(in, i%3 == 0, f))
				recur(cur, in)
				for _, how := range []string{"fail", "panic", "short"} {
					if i%3 != 0 {
						break
					}
					func() {
						defer func() { recover() }()
						recH.StepHostWith([][]byte{{7}}, true, hsBad{how})
					}()
				}
				if got := readAll(t, recH); !equalCols(got, cur) {
					t.Fatalf("token %d: a failed step changed the member", i)
				}
				check(t, kvH.Append(kvRows(1, byte(i))))
				cuts = append(cuts, cut{kv: kvH.Version(), rec: cloneCols(cur)})
			}
			for _, c := range cuts[6:] {
				v := must[*GroupSnap](t)(g.At(c.kv))
				if got := readAll(t, v.Snap(1)); !equalCols(got, c.rec) {
					t.Fatalf("At(%d): the replayed member reads otherwise", c.kv)
				}
				check(t, v.Release())
			}
			v := must[*GroupSnap](t)(g.At(cuts[7].kv))
			check(t, g.Rollback(v))
			check(t, v.Release())
			if got := readAll(t, recH); !equalCols(got, cuts[7].rec) {
				t.Fatal("after the rollback the member reads otherwise")
			}
			checkInv(t, p)
		})
	}
}

// TestSharedPrefixOneRow: heads of a shared layout on a row-sized
// pool (blocks of the KV column and of the token, of two size classes)
// append one row at a time; later heads adopt the prefix and append on
// one row at a time, past block boundaries; every head reads its rows,
// snapshots taken between keep theirs.
func TestSharedPrefixOneRow(t *testing.T) {
	for _, opt := range []PoolOptions{{}, {BlockBytes: 256}} {
		t.Run(fmt.Sprint(opt.BlockBytes), func(t *testing.T) {
			p := newPool(t, opt)
			l := &Layout{
				Type:     "P",
				Columns:  []Column{{Name: "KV", ElemSize: 4, Width: 40}, {Name: "Tok", ElemSize: 4, Width: 1}},
				Growth:   Append,
				ShareKey: "Tok",
			}
			toks := tokens(3, 300)
			var heads []*Head
			defer func() {
				for _, h := range heads {
					h.Release()
				}
			}()
			for k, n := range []int{150, 220, 300, 97} {
				h := must[*Head](t)(p.NewSharedHead(l, Owner(fmt.Sprint("o", k)), "d"))
				heads = append(heads, h)
				got := must[int](t)(h.AdoptPrefix(keyBytes(toks[:n])))
				if k > 0 && got == 0 {
					t.Fatalf("head %d adopted nothing", k)
				}
				var snaps []*Snap
				for i := got; i < n; i++ {
					check(t, h.Append(derivedRows(toks, i, i+1, 40)))
					if i%13 == 0 {
						snaps = append(snaps, must[*Snap](t)(h.Snapshot()))
					}
				}
				want := derivedRows(toks, 0, n, 40)
				all, err := hsRead(h, l, 0, n)
				check(t, err)
				if !hsEqual(all, want) {
					t.Fatalf("head %d (adopted %d) reads otherwise", k, got)
				}
				for _, s := range snaps {
					m := s.Len()
					sr, err := hsRead(s, l, 0, m)
					check(t, err)
					if !bytes.Equal(sr[0], want[0][:m*160]) || !bytes.Equal(sr[1], want[1][:m*4]) {
						t.Fatalf("head %d: a snapshot of %d rows reads otherwise", k, m)
					}
					check(t, s.Release())
				}
			}
			checkInv(t, p)
		})
	}
}
