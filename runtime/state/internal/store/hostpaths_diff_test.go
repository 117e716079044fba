package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// A differential test of the host-memory paths: the same random
// sequence of writes (covering some blocks whole and others in part),
// replayed steps, snapshots, branches, rollbacks, At, reads, gathers and
// column reads runs on a pool over the host backend (built-in copies,
// in-place covering writes) and on one over a wrapper of it (the
// backend's calls), and both are compared with a reference: every live
// snapshot must keep its rows, every At must read the version's rows.

// wideLayout3 has three columns of different rows per block: with 64-byte
// blocks, 21, 4 and 16 rows.
func wideLayout3(bound int) *Layout {
	return &Layout{
		Type:        "Wide",
		Columns:     []Column{{Name: "A", ElemSize: 1, Width: 3}, {Name: "B", ElemSize: 8, Width: 2}, {Name: "C", ElemSize: 4, Width: 1}},
		Growth:      Mutable,
		Bound:       bound,
		Descendants: Keep,
		Checkpoint:  &CheckpointPolicy{Every: 3, Keep: 3},
		Input:       []Column{{Name: "X", ElemSize: 1, Width: 1}},
	}
}

var wideRB = []int{3, 16, 4}

func wideRows3(rng *rand.Rand, n int) [][]byte {
	out := make([][]byte, len(wideRB))
	for c, rb := range wideRB {
		out[c] = make([]byte, n*rb)
		for i := range out[c] {
			out[c][i] = byte(rng.UintN(256))
		}
	}
	return out
}

func cloneWide3(x [][]byte) [][]byte {
	out := make([][]byte, len(x))
	for i := range x {
		out[i] = slices.Clone(x[i])
	}
	return out
}

func equalWide3(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func readWide3(t testing.TB, x reader) [][]byte {
	t.Helper()
	n := x.Len()
	dst := make([][]byte, len(wideRB))
	for c, rb := range wideRB {
		dst[c] = make([]byte, n*rb)
	}
	check(t, x.Read(0, n, dst))
	return dst
}

// wideStep is the replayed step: every byte of every row becomes a
// function of itself, its index and the input.
func wideStep(rows, in [][]byte) ([][]byte, error) {
	for c := range rows {
		for i := range rows[c] {
			rows[c][i] = rows[c][i]*5 + in[0][0] + byte(i) + byte(c)
		}
	}
	return rows, nil
}

type wideSide struct {
	p      *Pool
	h      *Head
	snaps  []*Snap
	branch *Head
}

func TestHostWritesMatchBackendAndReference(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { hostDiff(t, seed, 1500) })
	}
}

func hostDiff(t *testing.T, seed uint64, steps int) {
	const bound = 50
	hb := device.Host()
	c := statetest.NewCounts(device.Host())
	var sides [2]*wideSide
	for i, b := range []device.Backend{hb, c} {
		p := must[*Pool](t)(NewPool(b, PoolOptions{BlockBytes: 64}))
		sides[i] = &wideSide{p: p, h: must[*Head](t)(p.NewHead(wideLayout3(bound), "me"))}
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	ref := make([][]byte, len(wideRB)) // the head's rows
	for c, rb := range wideRB {
		ref[c] = make([]byte, bound*rb)
	}
	var snapRef [][][]byte         // each snapshot's rows
	var branchRef [][]byte         // the branch's rows
	vers := map[Version][][]byte{} // versions of the head's line, by the host side's numbers
	var order []Version
	var ats, notRetained, rollbacks int
	addVer := func() {
		v := sides[0].h.Version()
		if sides[1].h.Version() != v {
			t.Fatalf("step: versions %d and %d", v, sides[1].h.Version())
		}
		vers[v] = cloneWide3(ref)
		order = append(order, v)
	}
	for step := range steps {
		op := rng.IntN(12)
		switch {
		case op <= 3: // a write: covering blocks whole or in part
			at := rng.IntN(bound)
			n := 1 + rng.IntN(bound-at)
			if rng.IntN(3) == 0 { // aligned to column B's 4-row blocks
				at &^= 3
				n = min(bound-at, (n+3)&^3)
			}
			rows := wideRows3(rng, n)
			for _, s := range sides {
				check(t, s.h.Write(at, rows))
			}
			for c, rb := range wideRB {
				copy(ref[c][at*rb:], rows[c])
			}
			addVer()
		case op == 4: // a replayed step
			in := [][]byte{{byte(rng.UintN(256))}}
			for _, s := range sides {
				check(t, s.h.StepHost(in, false, wideStep))
			}
			_, _ = wideStep(ref, in)
			addVer()
		case op == 5 && len(snapRef) < 4:
			for _, s := range sides {
				s.snaps = append(s.snaps, must[*Snap](t)(s.h.Snapshot()))
			}
			snapRef = append(snapRef, cloneWide3(ref))
		case op == 6 && len(snapRef) > 0:
			k := rng.IntN(len(snapRef))
			for _, s := range sides {
				check(t, s.snaps[k].Release())
				s.snaps = slices.Delete(s.snaps, k, k+1)
			}
			snapRef = slices.Delete(snapRef, k, k+1)
		case op == 7 && len(snapRef) > 0:
			k := rng.IntN(len(snapRef))
			var errs [2]error
			for i, s := range sides {
				errs[i] = s.h.Rollback(s.snaps[k])
			}
			if errors.Is(errs[0], ErrNotAncestor) && errors.Is(errs[1], ErrNotAncestor) {
				break // a snapshot of a line a rollback left
			}
			check(t, errs[0])
			check(t, errs[1])
			rollbacks++
			ref = cloneWide3(snapRef[k])
			// The line from the snapshot on is new; At of versions past it
			// in the old line is not asked.
			v := sides[0].h.Version()
			for _, o := range order {
				if o > v {
					delete(vers, o)
				}
			}
			order = slices.DeleteFunc(order, func(o Version) bool { return o > v })
		case op == 8: // a branch, written, released now and then
			if branchRef == nil {
				for _, s := range sides {
					s.branch = must[*Head](t)(s.h.Branch())
				}
				branchRef = cloneWide3(ref)
			}
			at := rng.IntN(bound)
			n := 1 + rng.IntN(bound-at)
			rows := wideRows3(rng, n)
			for _, s := range sides {
				check(t, s.branch.Write(at, rows))
			}
			for c, rb := range wideRB {
				copy(branchRef[c][at*rb:], rows[c])
			}
			if rng.IntN(3) == 0 {
				for _, s := range sides {
					check(t, s.branch.Release())
					s.branch = nil
				}
				branchRef = nil
			}
		case op == 9 && len(order) > 0: // At of a recent version
			v := order[len(order)-1-rng.IntN(min(len(order), 10))]
			for i, s := range sides {
				at, err := s.h.At(v)
				if errors.Is(err, ErrNotRetained) {
					notRetained++
					continue
				}
				ats++
				check(t, err)
				if got := readWide3(t, at); !equalWide3(got, vers[v]) {
					t.Fatalf("seed %d step %d side %d: At(%d) reads other rows", seed, step, i, v)
				}
				check(t, at.Release())
			}
		case op == 10: // a gather and a read of some columns
			idx := []int{rng.IntN(bound), rng.IntN(bound), bound - 1, 0}
			for i, s := range sides {
				dst := make([][]byte, len(wideRB))
				for c, rb := range wideRB {
					dst[c] = make([]byte, len(idx)*rb)
				}
				check(t, s.h.ReadRows(idx, dst))
				for c, rb := range wideRB {
					for j, r := range idx {
						if !bytes.Equal(dst[c][j*rb:(j+1)*rb], ref[c][r*rb:(r+1)*rb]) {
							t.Fatalf("seed %d step %d side %d: gather col %d row %d", seed, step, i, c, r)
						}
					}
				}
				from := rng.IntN(bound)
				to := from + rng.IntN(bound-from+1)
				cols := make([][]byte, len(wideRB))
				cols[1] = make([]byte, (to-from)*16)
				check(t, s.h.ReadColumns(from, to, cols))
				if !bytes.Equal(cols[1], ref[1][from*16:to*16]) {
					t.Fatalf("seed %d step %d side %d: ReadColumns", seed, step, i)
				}
			}
		default: // spans read through the backend
			for i, s := range sides {
				sp := must[[][]device.Span](t)(s.h.Spans(0, bound))
				for c, rb := range wideRB {
					var got []byte
					for _, x := range sp[c] {
						b := make([]byte, x.Rows*rb)
						check(t, s.p.Backend().CopyDtoH(b, x.Ptr))
						got = append(got, b...)
					}
					if !bytes.Equal(got, ref[c]) {
						t.Fatalf("seed %d step %d side %d: spans of col %d", seed, step, i, c)
					}
				}
			}
		}
		for i, s := range sides {
			if got := readWide3(t, s.h); !equalWide3(got, ref) {
				t.Fatalf("seed %d step %d (op %d) side %d: the head reads other rows", seed, step, op, i)
			}
			for k, sn := range s.snaps {
				if got := readWide3(t, sn); !equalWide3(got, snapRef[k]) {
					t.Fatalf("seed %d step %d (op %d) side %d: snapshot %d changed", seed, step, op, i, k)
				}
			}
			if s.branch != nil {
				if got := readWide3(t, s.branch); !equalWide3(got, branchRef) {
					t.Fatalf("seed %d step %d (op %d) side %d: the branch reads other rows", seed, step, op, i)
				}
			}
		}
	}
	t.Logf("At: %d read, %d not retained; %d rollbacks", ats, notRetained, rollbacks)
	for i, s := range sides {
		for _, sn := range s.snaps {
			check(t, sn.Release())
		}
		if s.branch != nil {
			check(t, s.branch.Release())
		}
		check(t, s.h.Release())
		if st := s.p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 || st.Blocks != 0 {
			t.Errorf("side %d: after releasing everything: %+v", i, st)
		}
		check(t, s.p.Close())
	}
}
