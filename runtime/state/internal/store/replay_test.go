package store

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// recLayout is a mutable kv layout of 10 rows with checkpoints, for
// replayed states.
func recLayout(every, keep int, desc Descendants) *Layout {
	l := kv(Mutable, 10, desc)
	l.Checkpoint = &CheckpointPolicy{Every: every, Keep: keep}
	return l
}

// recur is the step the tests replay, on host columns: every byte b at
// index k of column c becomes b*3 + in[0][k%len(in[0])] + c + 1.
func recur(cols [][]byte, in [][]byte) {
	for c, col := range cols {
		for k := range col {
			col[k] = col[k]*3 + in[0][k%len(in[0])] + byte(c) + 1
		}
	}
}

// stepOn returns a StepFunc that runs recur on the rows spans locate,
// through the backend; with fail, it writes the new rows of every column
// but the last's, then fails.
func stepOn(b device.Backend, rowBytes []int, fail bool) StepFunc {
	return func(spans [][]device.Span, in [][]byte) error {
		cols := make([][]byte, len(spans))
		for c, col := range spans {
			for _, sp := range col {
				buf := make([]byte, sp.Rows*rowBytes[c])
				if err := b.CopyDtoH(buf, sp.Ptr); err != nil {
					return err
				}
				cols[c] = append(cols[c], buf...)
			}
		}
		recur(cols, in)
		for c, col := range spans {
			if fail && c == len(spans)-1 {
				return errStep
			}
			off := 0
			for _, sp := range col {
				n := sp.Rows * rowBytes[c]
				if err := b.CopyHtoD(sp.Ptr, cols[c][off:off+n]); err != nil {
					return err
				}
				off += n
			}
		}
		return nil
	}
}

var errStep = errors.New("step failed on purpose")

// TestReplayModel runs random Steps (some failing after writing rows),
// Writes, Snapshots, Rollbacks and At on a replayed state against the
// reference (ref_model_test.go), which keeps every version's rows: the
// head reads as the reference, at its version, after every step, a
// rollback succeeds exactly when the reference says it may, and At(v) of
// every version it can rebuild reads as v did. What replay adds is the
// step: a version whose rows are the rows before, stepped with an input.
// -model.steps sets the steps per seed (make fuzz runs it long).
func TestReplayModel(t *testing.T) {
	steps := modelSteps(t, 400)
	for _, seed := range statetest.Seeds(0, 1, 2, 3, 4, 5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runReplayModel(t, seed, steps) })
	}
}

func runReplayModel(t *testing.T, seed uint64, steps int) {
	statetest.LogReplay(t, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	p := newPool(t, PoolOptions{BlockBytes: 64})
	fixedModel(p)
	verify := seed%2 == 1
	l := recLayout(1+rng.IntN(5), 1+rng.IntN(4), Keep)
	h := must[*Head](t)(p.NewHead(l, "me"))
	defer h.Release()
	rb := []int{16, 8}
	lin := NewRefLineage("me", l)
	lin.KeepVersions()
	ref := lin.NewHead(h)
	var snaps []*RefHandle
	defer func() {
		for _, s := range snaps {
			s.Snap.Release()
		}
	}()
	for i := range steps {
		switch k := rng.IntN(20); {
		case k < 10:
			in := [][]byte{make([]byte, 1+rng.IntN(8))}
			for j := range in[0] {
				in[0][j] = byte(rng.Uint32())
			}
			fail := rng.IntN(6) == 0
			before, v := h.Stats(), h.Version()
			// Every other step runs through StepHost, in place on the
			// host backend (i picks, not rng: the seeds' steps stay).
			var err error
			if i%2 == 0 {
				err = h.StepHost(in, verify, hostStepFail(fail))
			} else {
				err = h.Step(in, verify, stepOn(p.Backend(), rb, fail))
			}
			if fail {
				if !errors.Is(err, errStep) {
					t.Fatalf("step %d: a failing Step answered %v", i, err)
				}
				if st := h.Stats(); st.Version != v || st.Rows != before.Rows || st.LogicalBytes != before.LogicalBytes {
					t.Fatalf("step %d: a failed Step changed the head: %+v, was %+v", i, st, before)
				}
			} else {
				check(t, err)
				next := cloneCols(ref.Cols)
				recur(next, in)
				ref.Commit(next)
			}
		case k < 12:
			at, n := rng.IntN(10), 1+rng.IntN(3)
			n = min(n, 10-at)
			rows := kvRows(n, byte(rng.Uint32()))
			check(t, h.Write(at, rows))
			ref.Write(at, rows)
		case k < 14 && len(snaps) < 4:
			snaps = append(snaps, ref.Snapshot(must[*Snap](t)(h.Snapshot())))
		case k < 15 && len(snaps) > 0:
			j := rng.IntN(len(snaps))
			check(t, snaps[j].Snap.Release())
			snaps[j].Release()
			snaps = slices.Delete(snaps, j, j+1)
		case k < 17 && len(snaps) > 0:
			s := snaps[rng.IntN(len(snaps))]
			err := h.Rollback(s.Snap)
			if ok := ref.CanRollback(s); ok != (err == nil) || !ok && !errors.Is(err, ErrNotAncestor) {
				t.Fatalf("step %d: Rollback: %v, the reference says possible %v", i, err, ok)
			}
			if err != nil {
				continue
			}
			ref.Rollback(s)
		default:
			vs := h.hist.versions()
			v := vs[rng.IntN(len(vs))]
			s, err := h.At(v)
			if err != nil {
				t.Fatalf("step %d: At(%d) of a retained version: %v", i, v, err)
			}
			y := ref.At(s, v)
			if got := readAll(t, s); !equalCols(got, y.Cols) {
				t.Fatalf("step %d: At(%d) reads otherwise than version %d did", i, v, v)
			}
			if rng.IntN(3) == 0 && len(snaps) < 4 {
				snaps = append(snaps, y) // rolled back to later, perhaps
			} else {
				check(t, s.Release())
				y.Release()
			}
		}
		if got := readAll(t, h); !equalCols(got, ref.Cols) {
			t.Fatalf("step %d: the head reads otherwise than the reference", i)
		}
		if v := h.Version(); v != ref.V {
			t.Fatalf("step %d: the head is at version %d, the reference at %d", i, v, ref.V)
		}
		if i%500 == 499 { // forget the versions nothing can reach again
			keep := map[Version]bool{ref.V: true}
			for _, v := range h.hist.versions() {
				keep[v] = true
			}
			for _, s := range snaps {
				keep[s.V] = true
			}
			for v := range lin.Vers {
				if !keep[v] {
					delete(lin.Vers, v)
				}
			}
		}
	}
}

// versions returns the versions the history can rebuild. Test helper.
func (x *history) versions() []Version {
	var out []Version
	ok := false
	for _, e := range x.entries {
		if e.cp != nil {
			ok = true
		} else if e.d == nil {
			ok = false
		}
		if ok {
			out = append(out, e.pos.v)
		}
	}
	return out
}

// TestStepInPlace checks that steps between checkpoints copy no block when
// nothing else holds the rows, and copy every block a snapshot holds.
func TestStepInPlace(t *testing.T) {
	cb := statetest.NewCounts(device.Host())
	p, err := NewPool(cb, PoolOptions{BlockBytes: 64})
	check(t, err)
	defer p.Close()
	fixedModel(p)
	l := recLayout(100, 2, Keep)
	l.Bound = 40 // blocks hold 16 rows of keys, 32 of values
	h := must[*Head](t)(p.NewHead(l, "me"))
	defer h.Release()
	f := stepOn(p.Backend(), []int{16, 8}, false)
	in := [][]byte{{1, 2, 3}}
	check(t, h.Step(in, false, f)) // the first copies the checkpoint's blocks
	cb.Reset()
	before := p.Stats().Blocks
	for range 5 {
		check(t, h.Step(in, false, f))
	}
	if cb.Calls("CopyDtoD") != 0 || p.Stats().Blocks != before {
		t.Fatalf("steps with nothing else holding the rows made %d device copies and took %d blocks", cb.Calls("CopyDtoD"), p.Stats().Blocks-before)
	}
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	check(t, h.Step(in, false, f))
	// 40 rows: 3 blocks of keys, 2 of values, each copied once (the rows
	// they hold, 16 and 8 bytes a row); blocks that follow one another in
	// memory come in one copy.
	if want := int64(40 * (16 + 8)); cb.Bytes("CopyDtoD") != want || cb.Calls("CopyDtoD") < 2 || cb.Calls("CopyDtoD") > 5 {
		t.Fatalf("a step after a snapshot copied %d bytes in %d copies, want %d (every block it shares) in 2 to 5", cb.Bytes("CopyDtoD"), cb.Calls("CopyDtoD"), want)
	}
	if st := h.Stats(); st.HistoryBytes != 7*3 {
		t.Fatalf("HistoryBytes %d, want the 7 inputs of 3 bytes", st.HistoryBytes)
	}
}

// TestStepFailureRestores fails steps that wrote rows in place and on
// copies, on heads whose history can and cannot rebuild the version
// before, and checks that the head reads, and is, as before.
func TestStepFailureRestores(t *testing.T) {
	for _, tc := range []struct {
		name string
		prep func(t *testing.T, h *Head) *Snap
	}{
		{"in place", func(*testing.T, *Head) *Snap { return nil }},
		{"shared with a snapshot", func(t *testing.T, h *Head) *Snap { return must[*Snap](t)(h.Snapshot()) }},
		{"after a write", func(t *testing.T, h *Head) *Snap { check(t, h.Write(2, kvRows(3, 9))); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, PoolOptions{BlockBytes: 64})
			fixedModel(p)
			h := must[*Head](t)(p.NewHead(recLayout(4, 2, Keep), "me"))
			defer h.Release()
			rb := []int{16, 8}
			for i := range 6 {
				check(t, h.Step([][]byte{{byte(i)}}, true, stepOn(p.Backend(), rb, false)))
			}
			if s := tc.prep(t, h); s != nil {
				defer s.Release()
			}
			want, st, pst := readAll(t, h), h.Stats(), p.Stats()
			err := h.Step([][]byte{{42}}, true, stepOn(p.Backend(), rb, true))
			if !errors.Is(err, errStep) {
				t.Fatalf("Step: %v, want the step function's error", err)
			}
			if got := readAll(t, h); !equalCols(got, want) {
				t.Fatal("the head reads otherwise after a failed step")
			}
			if got := h.Stats(); got != st {
				t.Fatalf("stats after a failed step %+v, want %+v", got, st)
			}
			if got := p.Stats(); got.Blocks != pst.Blocks || got.LogicalBytes != pst.LogicalBytes {
				t.Fatalf("pool after a failed step: %d blocks, %d logical bytes; want %d, %d", got.Blocks, got.LogicalBytes, pst.Blocks, pst.LogicalBytes)
			}
			check(t, h.Step([][]byte{{42}}, true, stepOn(p.Backend(), rb, false)))
		})
	}
}

// TestReplayVerify steps with a function that is not deterministic: with
// verify, a reconstruction through its step answers ErrReplayDiverged and
// keeps nothing; without verify it is not checked.
func TestReplayVerify(t *testing.T) {
	for _, verify := range []bool{true, false} {
		p := newPool(t, PoolOptions{BlockBytes: 64})
		fixedModel(p)
		h := must[*Head](t)(p.NewHead(recLayout(8, 2, Keep), "me"))
		calls := byte(0)
		f := func(spans [][]device.Span, in [][]byte) error {
			calls++
			return stepOn(p.Backend(), []int{16, 8}, false)(spans, [][]byte{{in[0][0] + calls}})
		}
		check(t, h.Step([][]byte{{1}}, verify, f))
		v := h.Version()
		check(t, h.Step([][]byte{{2}}, verify, f))
		before := p.Stats()
		s, err := h.At(v)
		if verify {
			if !errors.Is(err, ErrReplayDiverged) {
				t.Fatalf("At through a step that is not deterministic: %v, want ErrReplayDiverged", err)
			}
			if got := p.Stats(); got.Blocks != before.Blocks || got.Live != before.Live {
				t.Fatalf("a diverged At kept %d blocks, %d handles", got.Blocks-before.Blocks, got.Live-before.Live)
			}
		} else {
			check(t, err)
			check(t, s.Release())
		}
		check(t, h.Release())
	}
}

// TestReplayRollbackToAt rolls a replayed head back to a version At
// rebuilt by replay, then steps on from it.
func TestReplayRollbackToAt(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 64})
	fixedModel(p)
	h := must[*Head](t)(p.NewHead(recLayout(4, 3, Invalidate), "me"))
	defer h.Release()
	rb := []int{16, 8}
	cur := readAll(t, h)
	var vs []Version
	var contents [][][]byte
	for i := range 7 {
		in := [][]byte{{byte(i), 7}}
		check(t, h.Step(in, true, stepOn(p.Backend(), rb, false)))
		recur(cur, in)
		vs, contents = append(vs, h.Version()), append(contents, cloneCols(cur))
	}
	s := must[*Snap](t)(h.At(vs[2]))
	defer s.Release()
	if plan, ok := h.LastReconstruction(); !ok || plan.Steps == 0 || plan.Replayed <= 0 {
		t.Fatalf("the plan At performed: %+v; want replayed steps with their measured time", plan)
	}
	check(t, h.Rollback(s))
	if got := readAll(t, h); !equalCols(got, contents[2]) {
		t.Fatal("after Rollback to At's snapshot the head reads otherwise than that version")
	}
	cur = cloneCols(contents[2])
	in := [][]byte{{99}}
	check(t, h.Step(in, true, stepOn(p.Backend(), rb, false)))
	recur(cur, in)
	if got := readAll(t, h); !equalCols(got, cur) {
		t.Fatal("a step after the rollback reads otherwise than the reference")
	}
}

// TestStepErrors checks Step's refusals: nothing changes.
func TestStepErrors(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 64})
	f := stepOn(p.Backend(), []int{16, 8}, false)
	a := must[*Head](t)(p.NewHead(kv(Append, 10, Keep), "me"))
	defer a.Release()
	if err := a.Step([][]byte{{1}}, false, f); !errors.Is(err, ErrRange) {
		t.Errorf("Step on an append state: %v", err)
	}
	m := must[*Head](t)(p.NewHead(kv(Mutable, 10, Keep), "me"))
	defer m.Release()
	if err := m.Step([][]byte{{1}}, false, f); !errors.Is(err, ErrNotRetained) {
		t.Errorf("Step on a state with no checkpoints: %v", err)
	}
	h := must[*Head](t)(p.NewHead(recLayout(4, 2, Keep), "me"))
	if err := h.Step([][]byte{{1}}, false, nil); !errors.Is(err, ErrShape) {
		t.Errorf("Step with a nil function: %v", err)
	}
	if h.Version() != 0 {
		t.Errorf("a refused Step made version %d", h.Version())
	}
	check(t, h.Release())
	if err := h.Step(nil, false, f); !errors.Is(err, ErrReleased) {
		t.Errorf("Step on a released head: %v", err)
	}
	var nilHead *Head
	_ = nilHead // nil receivers are issue 21's item 13, another helper's
}

// TestStepConcurrentReaders steps a head while other goroutines read
// snapshots of it and a branch steps on its own: every snapshot keeps
// reading as the version it holds, and the branch never sees the head's
// steps (run under the race detector).
func TestStepConcurrentReaders(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 64})
	fixedModel(p)
	h := must[*Head](t)(p.NewHead(recLayout(3, 2, Keep), "me"))
	defer h.Release()
	rb := []int{16, 8}
	check(t, h.Step([][]byte{{5}}, true, stepOn(p.Backend(), rb, false)))
	b := must[*Head](t)(h.Branch())
	defer b.Release()
	bref := readAll(t, b)
	done := make(chan error, 3)
	for g := range 2 {
		go func() {
			for i := range 30 {
				s, err := h.Snapshot()
				if err != nil {
					done <- err
					return
				}
				want, err := readCols(s)
				for range 3 {
					got, err2 := readCols(s)
					if err = errors.Join(err, err2); err != nil {
						done <- err
						s.Release()
						return
					}
					if !equalCols(got, want) {
						done <- fmt.Errorf("reader %d, round %d: a snapshot changed under a step", g, i)
						s.Release()
						return
					}
				}
				s.Release()
			}
			done <- nil
		}()
	}
	go func() {
		for i := range 40 {
			in := [][]byte{{byte(i), 3}}
			if err := b.Step(in, false, stepOn(p.Backend(), rb, false)); err != nil {
				done <- err
				return
			}
			recur(bref, in)
		}
		done <- nil
	}()
	for i := range 60 {
		check(t, h.Step([][]byte{{byte(i)}}, true, stepOn(p.Backend(), rb, false)))
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := readAll(t, b); !equalCols(got, bref) {
		t.Fatal("the branch reads otherwise than its own steps made it")
	}
}

// readCols is readAll for goroutines: it returns the error.
func readCols(x reader) ([][]byte, error) {
	n := x.Len()
	dst := [][]byte{make([]byte, n*16), make([]byte, n*8)}
	return dst, x.Read(0, n, dst)
}

// TestStepFailureFullPool fails an in-place step in a pool with no block
// free: the rebuild of the version before takes the blocks the failed
// step's rows held, so the head is restored, not lost.
func TestStepFailureFullPool(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 24 * 256})
	fixedModel(p)
	l := recLayout(4, 2, Keep)
	l.Bound = 40 // 3 blocks of keys, 2 of values
	h := must[*Head](t)(p.NewHead(l, "me"))
	defer h.Release()
	rb := []int{16, 8}
	for i := range 6 {
		check(t, h.Step([][]byte{{byte(i)}}, false, stepOn(p.Backend(), rb, false)))
	}
	m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), "other"))
	defer m.Release()
	for m.Append(wideRow(1)) == nil {
	}
	want := readAll(t, h)
	if err := h.Step([][]byte{{9}}, false, stepOn(p.Backend(), rb, true)); !errors.Is(err, errStep) {
		t.Fatalf("Step: %v, want the step function's error", err)
	}
	got := make([][]byte, 2)
	got[0], got[1] = make([]byte, 40*16), make([]byte, 40*8)
	if err := h.Read(0, 40, got); err != nil {
		t.Fatalf("Read after a failed step in a full pool: %v", err)
	}
	if !equalCols(got, want) {
		t.Fatal("the head reads otherwise after a failed step in a full pool")
	}
}

// TestStepAllocatesNothing: a replayed state's steady loop, a snapshot
// before every four steps and a rollback to it every other time (a
// speculative round's drafts), allocates nothing once its history is
// full: the step records and input copies that rollbacks and trims drop
// are those the next steps take (history.newStep), verified steps'
// hashes included. Every version stays what a reference of the same steps
// reads, and At rebuilds the current one by replay.
func TestStepAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	if raceDetector {
		t.Skip("under the race detector, sync.Pool drops entries at random (the freed lists)")
	}
	for _, verify := range []bool{false, true} {
		t.Run(fmt.Sprint("verify=", verify), func(t *testing.T) {
			p := newPool(t, PoolOptions{BlockBytes: 64})
			h := must[*Head](t)(p.NewHead(recLayout(4, 3, Keep), "me"))
			defer h.Release()
			check(t, h.Write(0, kvRows(10, 1)))
			rb := []int{16, 8}
			b := p.Backend()
			// The step of recur, on the host backend's rows in place, as a
			// serving loop writes it: nothing allocated per call.
			cols := make([][]byte, 2)
			var step StepFunc = func(spans [][]device.Span, in [][]byte) error {
				for c, col := range spans {
					for _, sp := range col {
						mem, ok := device.HostBytes(b, sp.Ptr, sp.Rows*rb[c])
						if !ok {
							return errStep
						}
						cols = cols[:0]
						for range c {
							cols = append(cols, nil)
						}
						cols = append(cols, mem)
						recur(cols, in)
					}
				}
				return nil
			}
			cur := readAll(t, h)
			in := [][]byte{make([]byte, 3)}
			const warm, runs = 2 * 4 * 3, 100 // warm: the history full, its first trims
			snaps := make([]Snap, warm+runs+2)
			made := make([][4]Version, len(snaps)) // each round's versions
			var vs []Version                       // the versions of the last kept round
			var want [][][]byte                    // and their rows
			n := 0                                 // rounds run
			var err error
			round := func() {
				s := &snaps[n]
				i := n
				n++
				if err = h.SnapshotInto(s); err != nil {
					return
				}
				for k := range 4 {
					in[0][0], in[0][1], in[0][2] = byte(i), byte(k), byte(i*k)
					if err = h.Step(in, verify, step); err != nil {
						return
					}
					made[i][k] = h.Version()
				}
				if i%2 == 0 {
					err = h.Rollback(s)
				}
				if rerr := s.Release(); err == nil {
					err = rerr
				}
			}
			// ref runs round i on the reference, recording the versions
			// of a kept round.
			ref := func(i int) {
				if i%2 == 0 {
					return
				}
				vs, want = vs[:0], want[:0]
				for k := range 4 {
					recur(cur, [][]byte{{byte(i), byte(k), byte(i * k)}})
					vs, want = append(vs, made[i][k]), append(want, cloneCols(cur))
				}
			}
			for range warm {
				round()
				check(t, err)
			}
			if a := testing.AllocsPerRun(runs, round); a > 0 {
				t.Errorf("%.2f allocations a round of four steps; want none", a)
			}
			check(t, err)
			for i := range n {
				ref(i)
			}
			if got := readAll(t, h); !equalCols(got, cur) {
				t.Fatal("after the rounds the head reads otherwise than the reference")
			}
			for k, v := range vs[:3] {
				s := must[*Snap](t)(h.At(v))
				got := readAll(t, s)
				check(t, s.Release())
				if !equalCols(got, want[k]) {
					t.Fatalf("At(%d), a version of the last round, reads otherwise than it did", v)
				}
			}
		})
	}
}

// TestStepTakesReleasedRecords: the step records of a released head go
// to its pool's stock (history.releaseAll), and a new head's steps take
// them there instead of allocating: a session that follows another steps
// allocation-free from its first step.
func TestStepTakesReleasedRecords(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	if raceDetector {
		t.Skip("under the race detector, sync.Pool drops entries at random (the freed lists)")
	}
	p := newPool(t, PoolOptions{BlockBytes: 64})
	b := p.Backend()
	rb := []int{16, 8}
	var step StepFunc = func(spans [][]device.Span, in [][]byte) error {
		for c, col := range spans {
			for _, sp := range col {
				mem, ok := device.HostBytes(b, sp.Ptr, sp.Rows*rb[c])
				if !ok {
					return errStep
				}
				for k := range mem {
					mem[k] = mem[k]*3 + in[0][k%len(in[0])]
				}
			}
		}
		return nil
	}
	in := [][]byte{{1, 2, 3}}
	const steps = 48 // an Every of 4 and a Keep of 16: no trim, every record live
	first := must[*Head](t)(p.NewHead(recLayout(4, 16, Keep), "me"))
	for range steps {
		check(t, first.Step(in, false, step))
	}
	check(t, first.Release())
	// The next head of the first's shard of the gate, whose stock took
	// the records (new heads take the shards in turn).
	h := must[*Head](t)(p.NewHead(recLayout(4, 16, Keep), "me"))
	for h.gate != first.gate {
		check(t, h.Release())
		h = must[*Head](t)(p.NewHead(recLayout(4, 16, Keep), "me"))
	}
	defer h.Release()
	check(t, h.Write(0, kvRows(10, 1))) // its blocks, before the steps
	var err error
	// AllocsPerRun's average floors: the few growths of the history's
	// entries, checkpoints and the first copies of blocks count less
	// than one a step, a record a step counts one.
	if n := testing.AllocsPerRun(steps-1, func() {
		if err == nil {
			err = h.Step(in, false, step)
		}
	}); n > 0 {
		t.Errorf("%.2f allocations a step of a head after a released one; want none", n)
	}
	check(t, err)
}

// TestAtReplaysWithoutAllocating: At's replay of a step locates the rows
// in its history's buffers (replayStep, spansInto), the step times its
// pricing sorts are in one too (stepMedian), the pricing counts each
// candidate in the counts of the one before (estimator.scratch), and the
// fit it refines sorts its window on the stack (fit.observe):
// rebuilding a version fifteen steps past its checkpoint allocates what
// one a step past it does, where each step replayed made its spans, and a
// plan of four candidates one more than a plan of one (the list of its
// alternatives), where each made its counts.
func TestAtReplaysWithoutAllocating(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	if raceDetector {
		t.Skip("under the race detector, sync.Pool drops the tree nodes kept for reuse at random")
	}
	p := newPool(t, PoolOptions{BlockBytes: 64})
	b := p.Backend()
	rb := []int{16, 8}
	var step StepFunc = func(spans [][]device.Span, in [][]byte) error {
		for c, col := range spans {
			for _, sp := range col {
				mem, ok := device.HostBytes(b, sp.Ptr, sp.Rows*rb[c])
				if !ok {
					return errStep
				}
				for k := range mem {
					mem[k] = mem[k]*3 + in[0][k%len(in[0])]
				}
			}
		}
		return nil
	}
	h := must[*Head](t)(p.NewHead(recLayout(16, 4, Keep), "me"))
	defer h.Release()
	in := [][]byte{{1, 2, 3}}
	var vs []Version
	for range 64 {
		check(t, h.Step(in, false, step))
		vs = append(vs, h.Version())
	}
	// The checkpoints are after steps 16, 32, 48 and 64 (the 16th, ...).
	at := func(v Version) func() {
		return func() {
			s := must[*Snap](t)(h.At(v))
			check(t, s.Release())
		}
	}
	one, fifteen := at(vs[32]), at(vs[46])
	one()
	fifteen()
	n1, n15 := testing.AllocsPerRun(20, one), testing.AllocsPerRun(20, fifteen)
	if pl := must[Plan](t)(h.Plan(vs[46])); pl.Steps != 15 {
		t.Fatalf("At(%d) replays %d steps; the test wants 15", vs[46], pl.Steps)
	}
	if n15 != n1 {
		t.Errorf("At replaying 15 steps: %v allocations; replaying one: %v; want as many", n15, n1)
	}
	// 28 before the buffers: the snapshot, the plan it keeps, the
	// pricing's records, the reconstruction and the nodes of its tree are
	// what is left.
	if n1 > 18 {
		t.Errorf("At replaying a step: %v allocations; want at most 18", n1)
	}
	var f fit
	if n := testing.AllocsPerRun(20, func() { f.observe(time.Millisecond, 2*time.Millisecond) }); n != 0 {
		t.Errorf("a fit's observation: %v allocations; want none", n)
	}
	if n := testing.AllocsPerRun(20, func() { h.hist.stepMedian() }); n != 0 {
		t.Errorf("the median of 64 steps' times: %v allocations; want none", n)
	}
	// The pricing counts every candidate in the same scratch: a plan of
	// four candidates allocates what a plan of one does.
	plan := func(v Version, want int) func() {
		if pl := must[Plan](t)(h.Plan(v)); len(pl.Alternatives)+1 != want {
			t.Fatalf("Plan(%d) has %d candidates; the test wants %d", v, len(pl.Alternatives)+1, want)
		}
		return func() { must[Plan](t)(h.Plan(v)) }
	}
	p1, p4 := testing.AllocsPerRun(20, plan(vs[16], 1)), testing.AllocsPerRun(20, plan(vs[63], 4))
	if p4 != p1+1 {
		t.Errorf("a plan of four candidates: %v allocations; of one: %v; want one more (its alternatives)", p4, p1)
	}
}

// TestReplayBranchesModel runs random Steps, Branches, Merges, Rollbacks,
// Releases and At on a replayed state and its branches against a full
// copy of every version of each: branches share the step records of the
// versions before them (history.clone), so a record one head's rollback
// or trim drops while another still holds it must stay as it was, and a
// record no head holds any more is what a later step reuses
// (history.newStep). Every head reads as its reference after every
// step, and At(v) of every version a head can rebuild reads as v did.
func TestReplayBranchesModel(t *testing.T) {
	steps := modelSteps(t, 600)
	for _, seed := range statetest.Seeds(0, 1, 2, 3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runReplayBranchesModel(t, seed, steps, newPool(t, PoolOptions{BlockBytes: 64}), false)
		})
	}
}

// TestHostStepModel is TestReplayBranchesModel with host steps (rows in
// place, slices of the step's own, and steps that fail, panic or leave a
// column of another length, which change nothing) on the host backend
// and on one whose rows the store copies out and back, in blocks of
// several sizes.
func TestHostStepModel(t *testing.T) {
	steps := modelSteps(t, 400)
	for _, be := range hsBackends() {
		for _, seed := range statetest.Seeds(0, 1, 2, 3, 4, 5) {
			t.Run(fmt.Sprint(be.name, seed), func(t *testing.T) {
				p := hsPool(t, be.b(), PoolOptions{BlockBytes: []int{64, 128, 4096}[seed%3]})
				runReplayBranchesModel(t, seed, steps, p, true)
			})
		}
	}
}

// replayHead is a head of runReplayBranchesModel with its reference: the
// rows of every version it made or took, its current rows, and its
// snapshots.
type replayHead struct {
	h     *Head
	ref   map[Version][][]byte
	cur   [][]byte
	snaps []*Snap
}

// runReplayBranchesModel runs the model on p, stepping through StepHost
// with host.
func runReplayBranchesModel(t *testing.T, seed uint64, steps int, p *Pool, host bool) {
	statetest.LogReplay(t, seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	fixedModel(p)
	verify := seed%2 == 1
	root := must[*Head](t)(p.NewHead(recLayout(1+rng.IntN(4), 1+rng.IntN(3), Keep), "me"))
	cur := readAll(t, root)
	heads := []*replayHead{{h: root, ref: map[Version][][]byte{root.Version(): cur}, cur: cloneCols(cur)}}
	release := func(x *replayHead) {
		for _, s := range x.snaps {
			check(t, s.Release())
		}
		check(t, x.h.Release())
	}
	defer func() {
		for _, x := range heads {
			release(x)
		}
	}()
	rb := []int{16, 8}
	for i := range steps {
		x := heads[rng.IntN(len(heads))]
		h := x.h
		switch k := rng.IntN(20); {
		case k < 9:
			in := [][]byte{make([]byte, 1+rng.IntN(8))}
			for j := range in[0] {
				in[0][j] = byte(rng.Uint32())
			}
			if host {
				hostStepModel(t, i, rng, h, x, in, verify)
				break
			}
			fail := rng.IntN(8) == 0
			err := h.Step(in, verify, stepOn(p.Backend(), rb, fail))
			if fail {
				if !errors.Is(err, errStep) {
					t.Fatalf("step %d: a failing Step answered %v", i, err)
				}
			} else {
				check(t, err)
				recur(x.cur, in)
			}
		case k < 10 && host:
			at := rng.IntN(10)
			rows := kvRows(1, byte(rng.Uint32()))
			check(t, h.Write(at, rows))
			for c, rb := range rb {
				copy(x.cur[c][at*rb:(at+1)*rb], rows[c])
			}
		case k < 11 && len(heads) < 5:
			c := must[*Head](t)(h.Branch())
			ref := make(map[Version][][]byte, len(x.ref))
			for v, cols := range x.ref {
				ref[v] = cols
			}
			heads = append(heads, &replayHead{h: c, ref: ref, cur: cloneCols(x.cur)})
		case k < 12 && len(heads) > 1:
			j := 1 + rng.IntN(len(heads)-1)
			if heads[j] == x {
				break
			}
			c := heads[j]
			err := h.Merge(c.h)
			if errors.Is(err, ErrDiverged) || errors.Is(err, ErrNotAncestor) {
				break
			}
			check(t, err)
			x.cur = cloneCols(c.cur)
			for v, cols := range c.ref {
				x.ref[v] = cols
			}
		case k < 13 && len(heads) > 1:
			j := 1 + rng.IntN(len(heads)-1)
			release(heads[j])
			heads = slices.Delete(heads, j, j+1)
			continue
		case k < 15 && len(x.snaps) < 3:
			x.snaps = append(x.snaps, must[*Snap](t)(h.Snapshot()))
		case k < 17 && len(x.snaps) > 0:
			s := x.snaps[rng.IntN(len(x.snaps))]
			if err := h.Rollback(s); err != nil {
				if errors.Is(err, ErrNotAncestor) {
					break
				}
				t.Fatalf("step %d: Rollback: %v", i, err)
			}
			x.cur = cloneCols(x.ref[s.Version()])
		default:
			vs := h.hist.versions()
			v := vs[rng.IntN(len(vs))]
			s, err := h.At(v)
			if err != nil {
				t.Fatalf("step %d: At(%d) of a retained version: %v", i, v, err)
			}
			got := readAll(t, s)
			check(t, s.Release())
			if !equalCols(got, x.ref[v]) {
				t.Fatalf("step %d: At(%d) reads otherwise than version %d did", i, v, v)
			}
		}
		x.ref[h.Version()] = cloneCols(x.cur)
		for j, y := range heads {
			if got := readAll(t, y.h); !equalCols(got, y.cur) {
				t.Fatalf("step %d: head %d reads otherwise than its reference", i, j)
			}
		}
	}
	checkInv(t, p)
}

// hostStepModel is a step of runReplayBranchesModel through StepHost:
// rows rewritten in place or handed back in slices of the step's own,
// or, one time in five, a step that fails in one of hsBad's ways and
// leaves x as it was.
func hostStepModel(t *testing.T, i int, rng *rand.Rand, h *Head, x *replayHead, in [][]byte, verify bool) {
	if rng.IntN(5) == 0 {
		bads := []string{"fail", "panic", "long", "short", "nil", "long0", "ownshort"}
		before := h.Version()
		how := bads[rng.IntN(len(bads))]
		func() {
			defer func() { recover() }()
			if err := h.StepHostWith(in, verify, hsBad{how}); err == nil {
				t.Fatalf("step %d: a bad step (%s) succeeded", i, how)
			}
		}()
		if h.Version() != before {
			t.Fatalf("step %d: a bad step (%s) moved the version", i, how)
		}
		return
	}
	var f HostStepper = hsRecur{}
	if rng.IntN(2) == 0 {
		f = hsOwn{}
	}
	check(t, h.StepHostWith(in, verify, f))
	recur(x.cur, in)
}

// TestStepBranchesConcurrent: branches of one replayed head, each in a
// goroutine of its own, step, roll back and rebuild their versions by At
// while they share the step records of the versions before the branch:
// a record is recycled only by the history that drops its last
// reference, and only for its own steps or through the pool's stock
// (under -race, the counts and the stock's lock are checked).
func TestStepBranchesConcurrent(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 64})
	fixedModel(p)
	rb := []int{16, 8}
	runStepBranchesConcurrent(t, p, func(h *Head, in [][]byte, _ int) error {
		return h.Step(in, true, stepOn(p.Backend(), rb, false))
	})
}

// atReads reports an error unless At(v) of h reads want.
func atReads(h *Head, v Version, want [][]byte) error {
	at, err := h.At(v)
	if err != nil {
		return err
	}
	got, err := readCols(at)
	at.Release()
	if err != nil {
		return err
	}
	if !equalCols(got, want) {
		return fmt.Errorf("At(%d) reads otherwise than version %d did", v, v)
	}
	return nil
}

// runStepBranchesConcurrent runs TestStepBranchesConcurrent on p, each
// step made by step (k counts a round's steps); the root rebuilds its own
// versions by At meanwhile.
func runStepBranchesConcurrent(t *testing.T, p *Pool, step func(h *Head, in [][]byte, k int) error) {
	root := must[*Head](t)(p.NewHead(recLayout(3, 2, Keep), "me"))
	defer root.Release()
	cur := readAll(t, root)
	rootRef := map[Version][][]byte{root.Version(): cloneCols(cur)}
	for i := range 5 {
		in := [][]byte{{byte(i), 1}}
		check(t, step(root, in, i))
		recur(cur, in)
		rootRef[root.Version()] = cloneCols(cur)
	}
	const n = 3
	done := make(chan error, n+1)
	for g := range n {
		b := must[*Head](t)(root.Branch())
		go func() {
			done <- func() error {
				defer b.Release()
				cur := cloneCols(cur)
				ref := maps.Clone(rootRef)
				for i := range 30 {
					s, err := b.Snapshot()
					if err != nil {
						return err
					}
					for k := range 3 {
						in := [][]byte{{byte(g), byte(i), byte(k)}}
						if err := step(b, in, k); err != nil {
							s.Release()
							return err
						}
						recur(cur, in)
						ref[b.Version()] = cloneCols(cur)
					}
					if i%2 == 0 {
						if err := b.Rollback(s); err != nil {
							s.Release()
							return err
						}
						cur = cloneCols(ref[s.Version()])
					}
					if err := s.Release(); err != nil {
						return err
					}
					if got, err := readCols(b); err != nil || !equalCols(got, cur) {
						return fmt.Errorf("branch %d, round %d: the head reads otherwise (%v)", g, i, err)
					}
					vs := b.hist.versions() // b's lock is not held: only b's goroutine changes it
					for _, v := range []Version{vs[0], vs[i%len(vs)]} {
						if err := atReads(b, v, ref[v]); err != nil {
							return fmt.Errorf("branch %d, round %d: %w", g, i, err)
						}
					}
				}
				return nil
			}()
		}()
	}
	go func() { // the root rebuilds its own versions meanwhile
		done <- func() error {
			for range 20 {
				for _, v := range root.hist.versions() {
					if err := atReads(root, v, rootRef[v]); err != nil {
						return fmt.Errorf("root: %w", err)
					}
				}
			}
			return nil
		}()
	}()
	for range n + 1 {
		check(t, <-done)
	}
}
