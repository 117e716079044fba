package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// The checkpoint pressure model: checkpointed mutable heads of every
// retention, written whole and in part from the host, by kernels' spans
// and by steps, snapshotted, branched, merged, rolled back and read at
// their retained versions, in pools that are at times short of memory
// and at times have a host tier, with filler heads that push them out.

// pressHead is a live head of the model and its expected rows.
type pressHead struct {
	h    *Head
	lin  int
	rows [][]byte
}

// pressSnap is a live snapshot of the model and its expected rows.
type pressSnap struct {
	s    *Snap
	lin  int
	rows [][]byte
}

// pressKey names a version of a lineage (a head made new and the branches
// made from it share one), whose rows the model records.
type pressKey struct {
	lin int
	v   Version
}

// runPressureModel runs seed's sequence of steps, and checks after each
// that every head and snapshot reads its recorded rows, that At of a
// recorded version reads them too, and the pool's invariants; at the end,
// with everything released, that no block and no history byte is left.
func runPressureModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 991))
	var be device.Backend = device.Host()
	if seed%3 == 1 {
		be = statetest.NewArena(64 << 20)
	}
	opt := PoolOptions{BlockBytes: 256}
	if seed%2 == 1 {
		opt.MaxBytes = 48 << 10
	}
	if seed%4 == 3 {
		opt.HostTier = 256 << 10
	}
	p, err := NewPool(be, opt)
	check(t, err)
	defer p.Close()
	var heads []*pressHead
	var snaps []*pressSnap
	var fillers []*Head
	content := map[pressKey][][]byte{}
	nlin := 0
	stats := map[string]int{}
	fail := func(step int, op string, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d (%s): %s", seed, step, op, fmt.Sprintf(format, args...))
	}
	clone := func(c [][]byte) [][]byte {
		out := make([][]byte, len(c))
		for i := range c {
			out[i] = slices.Clone(c[i])
		}
		return out
	}
	rowsOf := func(x *pressHead) int { return len(x.rows[1]) / 8 }
	okErr := func(err error, more ...error) bool {
		if err == nil {
			return true
		}
		for _, e := range append([]error{ErrNoMemory, ErrEvicted, ErrInvalidated}, more...) {
			if errors.Is(err, e) {
				return true
			}
		}
		return false
	}
	newLin := func() {
		rows := []int{40, 64, 100}[rng.IntN(3)]
		l := kv(Mutable, rows, Descendants(rng.IntN(2)))
		l.Checkpoint = &CheckpointPolicy{Every: 1 + rng.IntN(3), Keep: 1 + rng.IntN(3)}
		l.Retention = Retention(rng.IntN(3))
		h, err := p.NewHead(l, Owner(fmt.Sprint("o", nlin)))
		if err != nil {
			return
		}
		x := &pressHead{h: h, lin: nlin, rows: [][]byte{make([]byte, rows*16), make([]byte, rows*8)}}
		nlin++
		content[pressKey{x.lin, h.Version()}] = clone(x.rows)
		heads = append(heads, x)
	}
	dropHead := func(i int) {
		heads[i].h.Release()
		heads = slices.Delete(heads, i, i+1)
	}
	commit := func(x *pressHead, rows [][]byte) {
		x.rows = rows
		content[pressKey{x.lin, x.h.Version()}] = clone(rows)
	}
	// write writes b over rows from at on and records the version; it
	// answers the errors the model does not allow.
	write := func(x *pressHead, at int, b [][]byte) error {
		err := x.h.Write(at, b)
		if err != nil {
			if okErr(err) {
				return nil
			}
			return err
		}
		rows := clone(x.rows)
		copy(rows[0][at*16:], b[0])
		copy(rows[1][at*8:], b[1])
		commit(x, rows)
		return nil
	}
	for range 2 {
		newLin()
	}
	defer func() {
		for _, x := range heads {
			x.h.Release()
		}
		for _, s := range snaps {
			s.s.Release()
		}
		for _, f := range fillers {
			f.Release()
		}
	}()
	for step := range steps {
		if len(heads) == 0 {
			newLin()
			continue
		}
		i := rng.IntN(len(heads))
		x := heads[i]
		n := rowsOf(x)
		k := rng.IntN(20)
		op := fmt.Sprint("op", k)
		switch {
		case k < 5: // whole blocks
			at := 32 * rng.IntN((n+31)/32)
			m := min(32*(1+rng.IntN(2)), n-at)
			if rng.IntN(3) == 0 {
				m = n - at
			}
			if rng.IntN(4) == 0 {
				at, m = 0, n
			}
			op = fmt.Sprintf("write whole [%d,%d)", at, at+m)
			if err := write(x, at, kvRows(m, byte(step))); err != nil {
				fail(step, op, "%v", err)
			}
		case k < 7: // partial
			m := 1 + rng.IntN(20)
			at := rng.IntN(n - m + 1)
			op = fmt.Sprintf("write part [%d,%d)", at, at+m)
			if err := write(x, at, kvRows(m, byte(step))); err != nil {
				fail(step, op, "%v", err)
			}
		case k < 8: // device write
			from := 32 * rng.IntN((n+31)/32)
			to := min(n, from+32*(1+rng.IntN(2)))
			if rng.IntN(2) == 0 {
				from, to = rng.IntN(n), n
			}
			op = fmt.Sprintf("write device [%d,%d)", from, to)
			spans, err := x.h.WriteDevice(from, to)
			if err != nil {
				if !okErr(err) {
					fail(step, op, "%v", err)
				}
				break
			}
			b := kvRows(to-from, byte(step)+100)
			for c, col := range spans {
				rb := []int{16, 8}[c]
				off := 0
				for _, sp := range col {
					check(t, be.CopyHtoD(sp.Ptr, b[c][off:off+sp.Rows*rb]))
					off += sp.Rows * rb
				}
			}
			rows := clone(x.rows)
			copy(rows[0][from*16:], b[0])
			copy(rows[1][from*8:], b[1])
			commit(x, rows)
		case k < 9: // step
			op = "step"
			in := [][]byte{{byte(step), 3}}
			if rng.IntN(3) == 0 {
				op = "step fail"
				err := x.h.StepHost(in, rng.IntN(2) == 0, hostStepFail(true))
				if !errors.Is(err, errStep) && !okErr(err) {
					fail(step, op, "%v", err)
				}
				break
			}
			if rng.IntN(4) == 0 {
				if _, err := x.h.Plan(x.h.Version()); err != nil && !okErr(err, ErrNotRetained) {
					fail(step, op, "plan: %v", err)
				}
			}
			err := x.h.StepHost(in, rng.IntN(2) == 0, hostRecur)
			if err == nil {
				rows := clone(x.rows)
				recur(rows, in)
				commit(x, rows)
			} else if !okErr(err) {
				fail(step, op, "%v", err)
			}
		case k < 11: // snapshot
			op = "snapshot"
			s, err := x.h.Snapshot()
			if err == nil {
				snaps = append(snaps, &pressSnap{s: s, lin: x.lin, rows: clone(x.rows)})
			} else if !okErr(err) {
				fail(step, op, "%v", err)
			}
		case k < 12: // branch
			op = "branch"
			if len(heads) > 8 {
				dropHead(rng.IntN(len(heads)))
				break
			}
			c, err := x.h.Branch()
			if err == nil {
				heads = append(heads, &pressHead{h: c, lin: x.lin, rows: clone(x.rows)})
			} else if !okErr(err) {
				fail(step, op, "%v", err)
			}
		case k < 13: // merge
			op = "merge"
			var cs []*pressHead
			for _, y := range heads {
				if y != x && y.lin == x.lin {
					cs = append(cs, y)
				}
			}
			if len(cs) == 0 {
				break
			}
			c := cs[rng.IntN(len(cs))]
			err := x.h.Merge(c.h)
			if err == nil {
				x.rows = clone(c.rows)
				if x.h.Version() != c.h.Version() {
					fail(step, op, "merged version %d, child %d", x.h.Version(), c.h.Version())
				}
			} else if !okErr(err, ErrDiverged, ErrNotAncestor) {
				fail(step, op, "%v", err)
			}
		case k < 14: // rollback
			op = "rollback"
			var ss []*pressSnap
			for _, s := range snaps {
				if s.lin == x.lin {
					ss = append(ss, s)
				}
			}
			if len(ss) == 0 {
				break
			}
			s := ss[rng.IntN(len(ss))]
			err := x.h.Rollback(s.s)
			if err == nil {
				x.rows = clone(s.rows)
			} else if !okErr(err, ErrNotAncestor, ErrReleased) {
				fail(step, op, "%v", err)
			}
		case k < 16: // At
			var vs []Version
			for key := range content {
				if key.lin == x.lin {
					vs = append(vs, key.v)
				}
			}
			slices.Sort(vs)
			v := vs[rng.IntN(len(vs))]
			op = fmt.Sprint("At ", v)
			s, err := x.h.At(v)
			if err != nil {
				if !okErr(err, ErrNotRetained) {
					fail(step, op, "%v", err)
				}
				break
			}
			got, err := readRows(s)
			if err == nil && !sameRows(got, content[pressKey{x.lin, v}]) {
				fail(step, op, "At(%d) reads other rows than the version had", v)
			}
			if rng.IntN(3) == 0 && err == nil {
				snaps = append(snaps, &pressSnap{s: s, lin: x.lin, rows: got})
			} else {
				s.Release()
			}
		case k < 17: // release a snapshot
			op = "release snap"
			if len(snaps) > 0 {
				j := rng.IntN(len(snaps))
				snaps[j].s.Release()
				snaps = slices.Delete(snaps, j, j+1)
			}
		case k < 18: // filler pressure
			op = "filler"
			if len(fillers) > 6 || rng.IntN(3) == 0 {
				if len(fillers) > 0 {
					j := rng.IntN(len(fillers))
					fillers[j].Release()
					fillers = slices.Delete(fillers, j, j+1)
				}
				break
			}
			l := kv(Mutable, 200, Keep)
			l.Retention = Retention(rng.IntN(2))
			f, err := p.NewHead(l, "filler")
			if err == nil {
				if err := f.Write(0, kvRows(200, byte(step))); err != nil && !okErr(err) {
					fail(step, op, "%v", err)
				}
				fillers = append(fillers, f)
			} else if !okErr(err) {
				fail(step, op, "%v", err)
			}
		case k < 19:
			op = "release head / new lineage"
			if rng.IntN(2) == 0 && len(heads) > 1 {
				dropHead(i)
			} else if nlin < 6 {
				newLin()
			}
		default:
			op = "read head"
		}
		// Checks.
		for j := 0; j < len(heads); j++ {
			y := heads[j]
			got, err := readRows(y.h)
			if err != nil {
				if errors.Is(err, ErrEvicted) || errors.Is(err, ErrInvalidated) || errors.Is(err, ErrNoMemory) {
					dropHead(j)
					j--
					continue
				}
				fail(step, op, "reading head: %v", err)
			}
			if !sameRows(got, y.rows) {
				fail(step, op, "head %d (lineage %d, version %d) reads other rows", j, y.lin, y.h.Version())
			}
		}
		for j := 0; j < len(snaps); j++ {
			s := snaps[j]
			got, err := readRows(s.s)
			if err != nil {
				if errors.Is(err, ErrEvicted) || errors.Is(err, ErrInvalidated) || errors.Is(err, ErrNoMemory) {
					s.s.Release()
					snaps = slices.Delete(snaps, j, j+1)
					j--
					continue
				}
				fail(step, op, "reading snapshot: %v", err)
			}
			if !sameRows(got, s.rows) {
				fail(step, op, "snapshot of lineage %d version %d reads other rows", s.lin, s.s.Version())
			}
		}
		if err := checkInvariants(p); err != nil {
			fail(step, op, "invariants: %v", err)
		}
		stats[op[:min(len(op), 12)]]++
	}
	st := p.Stats()
	t.Logf("seed %d: evictions %d, evicted %d, rebuilt %d, tier out %d in %d; ops %v", seed, st.Evictions, st.EvictedBytes, st.RebuiltBytes, st.TierOut, st.TierIn, stats)
	for _, x := range heads {
		check(t, x.h.Release())
	}
	for _, s := range snaps {
		check(t, s.s.Release())
	}
	for _, f := range fillers {
		check(t, f.Release())
	}
	heads, snaps, fillers = nil, nil, nil
	if err := checkInvariants(p); err != nil {
		t.Fatalf("seed %d: after releasing all: %v", seed, err)
	}
	if st := p.Stats(); st.PhysicalBytes != 0 || st.HistoryBytes != 0 {
		t.Fatalf("seed %d: after releasing all: %d physical, %d history bytes", seed, st.PhysicalBytes, st.HistoryBytes)
	}
}

// readRows reads every row of x, as readAll does, or fails.
func readRows(x reader) ([][]byte, error) {
	n := x.Len()
	dst := [][]byte{make([]byte, n*16), make([]byte, n*8)}
	err := x.Read(0, n, dst)
	return dst, err
}

// TestModelCheckpointPressure runs the checkpoint pressure model
// (-model.steps and -model.seed as for TestModel).
func TestModelCheckpointPressure(t *testing.T) {
	steps := statetest.Steps(300, 1)
	seeds := statetest.Seeds(1, 2, 3, 4, 5, 6, 7, 8)
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runPressureModel(t, seed, steps) })
	}
}
