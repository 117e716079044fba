package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// lineEntry is the test's own account of a head's retained line.
type lineEntry struct {
	v  Version
	cp bool
}

// atHead is a checkpointed head with the test's model of it.
type atHead struct {
	h     *Head
	line  []lineEntry // retained versions, oldest first: the end of all
	since int
	all   []Version // every version ever on the line, for ErrNotRetained
	// checked counts the leading versions of all (before line) that the
	// test has seen answer ErrNotRetained since they left the line.
	checked int
}

// The population of a TestModelAt run is bounded, so that the checks after
// a step cost the same however long the run: past these, the oldest head
// or snapshot is released.
const (
	maxAtHeads = 8
	maxAtSnaps = 64
)

// TestModelAt runs seeded sequences of writes (host and device), branches,
// merges, rollbacks (to snapshots and to versions At reconstructed) on
// checkpointed heads, and checks after every step that At(v) reads as the
// recorded content of v for every retained version of each head's line,
// that older versions answer ErrNotRetained, and that Plan's choice is the
// cheapest candidate. -model.steps (a fifth as many) and -model.seed as
// for TestModel. A step's checks cost the same however long the run: the
// population is bounded, the versions that left a line are checked once
// when they leave it and then by sample, and the recorded content of
// versions no handle can reach again is dropped.
func TestModelAt(t *testing.T) {
	steps := statetest.Steps(200, 5)
	seeds := statetest.Seeds(1, 2, 3)
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModelAt(t, seed, steps) })
	}
}

func runModelAt(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 77))
	sample := rand.New(rand.NewPCG(seed, 78)) // for checks only: rng's sequence is the run's
	fail := func(step int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d: %s\nreplay: %s",
			seed, step, fmt.Sprintf(format, args...), statetest.Replay(t, seed, 0))
	}
	var base device.Backend = device.Host()
	if seed%2 == 0 {
		base = statetest.NewArena(32 << 20)
	}
	p, err := NewPool(base, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	every, keep := 1+rng.IntN(4), 1+rng.IntN(3)
	g := Growth(rng.IntN(2))
	l := kv(g, 400, Descendants(rng.IntN(2)))
	l.Checkpoint = &CheckpointPolicy{Every: every, Keep: keep}
	content := map[Version][][]byte{} // every version's rows, lineage-wide
	h0 := must[*Head](t)(p.NewHead(l, "s"))
	content[0] = readAll(t, h0)
	heads := []*atHead{{h: h0, line: []lineEntry{{0, true}}, all: []Version{0}}}
	var snaps []*Snap
	defer func() {
		for _, x := range heads {
			x.h.Release()
		}
		for _, s := range snaps {
			s.Release()
		}
	}()
	commit := func(x *atHead) {
		v := x.h.Version()
		content[v] = readAll(t, x.h)
		x.since++
		cp := x.since >= every
		if cp {
			x.since = 0
		}
		x.line = append(x.line, lineEntry{v, cp})
		x.all = append(x.all, v)
		// Keep checkpoints: drop the oldest and what only it served.
		n := 0
		for _, e := range x.line {
			if e.cp {
				n++
			}
		}
		for n > keep {
			x.line = x.line[1:]
			for !x.line[0].cp {
				x.line = x.line[1:]
			}
			n--
		}
	}
	reset := func(x *atHead, to Version, from *atHead) {
		if from != nil {
			x.line, x.since = slices.Clone(from.line), from.since
			x.all, x.checked = slices.Clone(from.all), from.checked
			return
		}
		for i, e := range x.line {
			if e.v == to {
				x.line = x.line[:i+1]
				x.since = 0
				for j := i; j >= 0 && !x.line[j].cp; j-- {
					x.since++
				}
				break
			}
			if i == len(x.line)-1 {
				x.line = []lineEntry{{to, true}}
				x.since = 0
			}
		}
		k := slices.Index(x.all, to)
		if k < 0 {
			x.all = []Version{to} // a version of another line: the test knows no more
		} else {
			x.all = x.all[:k+1]
		}
		x.checked = min(x.checked, len(x.all)-len(x.line))
	}
	// prune drops the recorded content of the versions that no head's line
	// holds and no snapshot is at: nothing can bring them back.
	prune := func() {
		keep := map[Version]bool{}
		for _, x := range heads {
			for _, e := range x.line {
				keep[e.v] = true
			}
		}
		for _, s := range snaps {
			keep[s.Version()] = true
		}
		for v := range content {
			if !keep[v] {
				delete(content, v)
			}
		}
	}
	var checked, notRetained int
	defer func() {
		t.Logf("every=%d keep=%d %v: %d At checked, %d not retained", every, keep, g, checked, notRetained)
	}()
	for step := range steps {
		x := heads[rng.IntN(len(heads))]
		switch k := rng.IntN(10); {
		case k < 3 && g == Append:
			if err := x.h.Append(kvRows(rng.IntN(20), byte(step))); err == nil {
				commit(x)
			} else if !errors.Is(err, ErrBound) && !errors.Is(err, ErrInvalidated) {
				fail(step, "append: %v", err)
			}
		case k < 3:
			n := rng.IntN(50)
			at := rng.IntN(400 - n)
			if rng.IntN(3) == 0 {
				// Whole blocks of both columns (32 rows a value block,
				// 16 a key block), at times to the end, whose last value
				// block is half full: written in place on host memory,
				// new blocks on the arena (writeTx.plan).
				at = 32 * rng.IntN(12)
				n = min(32*(1+rng.IntN(3)), 400-at)
				if rng.IntN(4) == 0 {
					n = 400 - at
				}
			}
			if err := x.h.Write(at, kvRows(n, byte(step))); err == nil {
				commit(x)
			} else if !errors.Is(err, ErrInvalidated) {
				fail(step, "write: %v", err)
			}
		case k < 5:
			var spans [][]device.Span
			var err error
			if g == Append {
				spans, err = x.h.AppendDevice(rng.IntN(20))
			} else {
				from := rng.IntN(400)
				spans, err = x.h.WriteDevice(from, from+rng.IntN(400-from))
			}
			if err != nil {
				if !errors.Is(err, ErrBound) && !errors.Is(err, ErrInvalidated) {
					fail(step, "device write: %v", err)
				}
				break
			}
			for _, col := range spans {
				for _, s := range col {
					check(t, p.Backend().Memset(s.Ptr, byte(rng.UintN(256)), 1+rng.IntN(8)))
				}
			}
			commit(x)
		case k == 5:
			if c, err := x.h.Branch(); err == nil {
				ch := &atHead{h: c}
				reset(ch, 0, x)
				heads = append(heads, ch)
			}
		case k == 6 && len(heads) > 1:
			c := heads[rng.IntN(len(heads))]
			if err := x.h.Merge(c.h); err == nil && c != x {
				reset(x, 0, c)
			}
		case k == 7:
			if s, err := x.h.Snapshot(); err == nil {
				snaps = append(snaps, s)
			}
		case k == 8 && len(x.line) > 0:
			// Roll back to a version reconstructed by At, or to a snapshot.
			var to *Snap
			if rng.IntN(2) == 0 {
				e := x.line[rng.IntN(len(x.line))]
				s, err := x.h.At(e.v)
				if err != nil {
					if errors.Is(err, ErrInvalidated) {
						break
					}
					fail(step, "At(%d) of a retained version: %v", e.v, err)
				}
				snaps = append(snaps, s)
				to = s
			} else if len(snaps) > 0 {
				to = snaps[rng.IntN(len(snaps))]
			}
			if to == nil {
				break
			}
			if err := x.h.Rollback(to); err == nil {
				reset(x, to.Version(), nil)
			}
		case k == 9 && len(heads) > 1:
			i := rng.IntN(len(heads))
			check(t, heads[i].h.Release())
			heads = slices.Delete(heads, i, i+1)
		}
		for len(heads) > maxAtHeads {
			check(t, heads[0].h.Release())
			heads = heads[1:]
		}
		for len(snaps) > maxAtSnaps {
			check(t, snaps[0].Release())
			snaps = snaps[1:]
		}
		if len(content) > 2048 {
			prune()
		}
		// Check every head's retained line, and what lies before it.
		for _, x := range heads {
			if x.h.invalid.Load() {
				continue
			}
			for _, e := range x.line {
				s, err := x.h.At(e.v)
				if err != nil {
					fail(step, "At(%d): %v (line %v)", e.v, err, x.line)
				}
				got := readAll(t, s)
				check(t, s.Release())
				checked++
				if !equalCols(got, content[e.v]) {
					fail(step, "At(%d) differs from the recorded content", e.v)
				}
				plan, err := x.h.Plan(e.v)
				if err != nil {
					fail(step, "Plan(%d): %v", e.v, err)
				}
				for _, alt := range plan.Alternatives {
					if alt.Estimate < plan.Estimate {
						fail(step, "Plan(%d) chose %+v over the cheaper %+v", e.v, plan.Candidate, alt)
					}
				}
			}
			// The line ends all; the versions before it answer
			// ErrNotRetained. Those that left it since the last step
			// are checked, and two of the older ones.
			old := len(x.all) - len(x.line)
			for i, e := range x.line {
				if old < 0 || x.all[old+i] != e.v {
					fail(step, "the test's account: line %v is not the end of %v", x.line, x.all)
				}
			}
			x.checked = min(x.checked, old)
			todo := x.all[x.checked:old]
			if x.checked > 0 {
				todo = append(slices.Clip(todo), x.all[0], x.all[sample.IntN(x.checked)])
			}
			for _, v := range todo {
				notRetained++
				if _, err := x.h.At(v); !errors.Is(err, ErrNotRetained) {
					fail(step, "At(%d) of a version before the retained line: %v", v, err)
				}
			}
			x.checked = old
			if _, err := x.h.At(1 << 40); !errors.Is(err, ErrNotRetained) {
				fail(step, "At of a version never made: %v", err)
			}
			if st := x.h.Stats(); st.Checkpoints > keep {
				fail(step, "%d checkpoints kept, keep=%d", st.Checkpoints, keep)
			}
		}
		if err := checkInvariants(p); err != nil {
			fail(step, "invariant: %v", err)
		}
	}
}

// TestPlanAgainstExecution reconstructs a version from every checkpoint in
// turn, counting the copies, bytes and blocks the backend actually sees,
// and checks that each candidate Plan lists predicted exactly those, and
// that the plan's choice is the cheapest of them.
func TestPlanAgainstExecution(t *testing.T) {
	for _, g := range []Growth{Append, Mutable} {
		t.Run(g.String(), func(t *testing.T) {
			cb := statetest.NewCounts(device.Host())
			p, err := NewPool(cb, PoolOptions{BlockBytes: 256})
			check(t, err)
			defer p.Close()
			l := kv(g, 2000, Keep)
			l.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 4}
			h := must[*Head](t)(p.NewHead(l, "s"))
			defer h.Release()
			rng := rand.New(rand.NewPCG(5, 5))
			for i := range 11 {
				if g == Append {
					check(t, h.Append(kvRows(1+rng.IntN(60), byte(i))))
				} else {
					n := 1 + rng.IntN(100)
					check(t, h.Write(rng.IntN(2000-n), kvRows(n, byte(i))))
				}
			}
			v := h.Version()
			plan := must[Plan](t)(h.Plan(v))
			all := append([]Candidate{plan.Candidate}, plan.Alternatives...)
			if len(all) < 3 {
				t.Fatalf("%d candidates, want several", len(all))
			}
			tIdx := h.hist.find(v)
			for _, c := range all {
				q := tIdx
				for h.hist.entries[q].pos.v != c.Checkpoint {
					q--
				}
				cb.Reset()
				r, err := h.hist.reconstruct(h, q, tIdx)
				check(t, err)
				copies, bytes := cb.Calls("CopyDtoD"), cb.Bytes("CopyDtoD")
				var freed []*block
				st := p.Stats()
				r.release(&freed)
				p.free(freed)
				blocks := st.Blocks - p.Stats().Blocks
				if copies != c.Copies || bytes != c.SeedBytes+c.DeltaBytes || blocks != int64(c.Blocks) {
					t.Errorf("from %d: %d copies of %d bytes, %d blocks; the plan says %d copies of %d+%d bytes, %d blocks",
						c.Checkpoint, copies, bytes, blocks, c.Copies, c.SeedBytes, c.DeltaBytes, c.Blocks)
				}
				if c.Estimate < plan.Estimate {
					t.Errorf("candidate %+v is cheaper than the choice %+v", c, plan.Candidate)
				}
			}
		})
	}
}

// With a Budget, a checkpoint comes whenever the deltas since the last one
// reach the budget; their blocks show in HistoryBytes.
func TestCheckpointBudget(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := kv(Append, 0, Keep)
	l.Checkpoint = &CheckpointPolicy{Budget: 24 * 30, Keep: 3}
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	versions := []Version{0}
	contents := [][][]byte{readAll(t, h)}
	for i := range 12 {
		check(t, h.Append(kvRows(10, byte(i)))) // 240 bytes of deltas a write
		versions = append(versions, h.Version())
		contents = append(contents, readAll(t, h))
	}
	// Checkpoints at versions 3, 6, 9, 12 (every 720 bytes); keep=3
	// leaves 6, 9 and 12, and the deltas after 6.
	st := h.Stats()
	if st.Checkpoints != 3 {
		t.Fatalf("%d checkpoints, want 3", st.Checkpoints)
	}
	for i, v := range versions {
		s, err := h.At(v)
		if v < 6 {
			if !errors.Is(err, ErrNotRetained) {
				t.Fatalf("At(%d): %v, want ErrNotRetained", v, err)
			}
			continue
		}
		check(t, err)
		if !equalCols(readAll(t, s), contents[i]) {
			t.Fatalf("At(%d) differs", v)
		}
		check(t, s.Release())
	}
	// Deltas of versions 7..12, one block per column each.
	if want := int64(6 * 2 * 256); st.HistoryBytes != want || p.Stats().HistoryBytes != want {
		t.Fatalf("history bytes %d (pool %d), want %d", st.HistoryBytes, p.Stats().HistoryBytes, want)
	}
	plan := must[Plan](t)(h.Plan(11))
	if plan.Checkpoint != 9 || plan.Deltas != 2 {
		t.Fatalf("plan for 11: %+v", plan)
	}
}

// A delta that cannot be stored leaves a gap: the write succeeds, versions
// that need the delta answer ErrNotRetained, and the others are still
// reconstructed, from the checkpoints on their side of the gap. The delta's
// copies are made one by one, and in one call on a backend that takes
// batches (device.DeviceBatchCopier).
func TestCheckpointGap(t *testing.T) {
	t.Run("one-by-one", func(t *testing.T) {
		fb := statetest.NewFaults(device.Host())
		testCheckpointGap(t, fb, fb)
	})
	t.Run("batched", func(t *testing.T) {
		fb := statetest.NewFaults(device.Host())
		testCheckpointGap(t, faultBatches{fb}, fb)
	})
}

// faultBatches is statetest.Faults with device.DeviceBatchCopier: a batch
// is one call, which an armed copy fault fails whole. It is
// TestCheckpointGap's own device, so it stays here: it shows that one
// batch interface alone, so that the delta's copies take the batched path
// and no other.
type faultBatches struct{ *statetest.Faults }

func (f faultBatches) CopiesDtoD(copies []device.DeviceCopy) error {
	if err := f.Check(statetest.OpCopy, "CopiesDtoD"); err != nil {
		return err
	}
	return f.Backend.(device.DeviceBatchCopier).CopiesDtoD(copies)
}

func testCheckpointGap(t *testing.T, be device.Backend, fb *statetest.Faults) {
	p, err := NewPool(be, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	l := kv(Mutable, 64, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 5}
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	contents := map[Version][][]byte{0: readAll(t, h)}
	write := func(i int) {
		check(t, h.Write(i%60, kvRows(4, byte(i))))
		contents[h.Version()] = readAll(t, h)
	}
	for i := 1; i <= 3; i++ {
		write(i)
	}
	// Version 4: fail the copies one by one until the write itself
	// succeeds and a later copy, the delta's, fails.
	for k := 0; ; k++ {
		fb.Arm(statetest.OpCopy, k)
		err := h.Write(7, kvRows(4, 44))
		fired := fb.Disarm()
		if err == nil {
			if !fired {
				t.Fatal("no copy of the delta failed")
			}
			break
		}
	}
	contents[h.Version()] = readAll(t, h)
	for i := 5; i <= 8; i++ {
		write(i)
	}
	for v := Version(0); v <= 8; v++ {
		s, err := h.At(v)
		if v == 4 || v == 5 {
			if !errors.Is(err, ErrNotRetained) {
				t.Fatalf("At(%d) across the gap: %v", v, err)
			}
			continue
		}
		check(t, err)
		if !equalCols(readAll(t, s), contents[v]) {
			t.Fatalf("At(%d) differs", v)
		}
		check(t, s.Release())
	}
	// Version 8 comes from 6, the only checkpoint after the gap; version 2
	// from 0.
	if plan := must[Plan](t)(h.Plan(8)); plan.Checkpoint != 6 || len(plan.Alternatives) != 0 {
		t.Fatalf("plan for 8: %+v", plan)
	}
	if plan := must[Plan](t)(h.Plan(2)); plan.Checkpoint != 0 {
		t.Fatalf("plan for 2: %+v", plan)
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointStepAllocations: a checkpointed decode step stores its
// one-row delta in a delta the history dropped past Keep (the delta with
// its columns' blocks, one allocation when none was kept), its blocks
// taken in one call, and walks the history only when it takes a
// checkpoint. It made 11-12 allocations a step before, then one; the
// history's shape is checkInvariants'.
func TestCheckpointStepAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("sync.Pool drops the nodes kept for reuse at random under the race detector")
	}
	be := device.Host()
	defer be.Close()
	p := must[*Pool](t)(NewPool(be, PoolOptions{}))
	defer p.Close()
	l := kvCacheLayout(128)
	l.Growth, l.Checkpoint = Append, &CheckpointPolicy{Every: 16, Keep: 8}
	row := zeroRows(l, 1)
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	for range 1024 { // past Keep: the history trims as it goes
		check(t, h.Append(row))
	}
	// Counted over 128 steps: AllocsPerRun rounds down.
	n := testing.AllocsPerRun(4, func() {
		for range 128 {
			check(t, h.Append(row))
		}
	})
	if n > 128/4 {
		t.Errorf("%v allocations per 128 checkpointed steps, want at most %d", n, 128/4)
	}
	check(t, checkInvariants(p))
	if got, want := len(h.hist.roots()), l.Checkpoint.Keep; got != want {
		t.Errorf("history holds %d checkpoints, want %d", got, want)
	}
}

// TestCheckpointWriteKeepsItsDeltas: a checkpointed state rewritten whole
// every step (a recurrent state with history) takes its deltas from the
// ones its checkpoints past Keep dropped (deltaMems), where it made one a
// step. A delta a branch still holds is not kept: the branch reads it.
func TestCheckpointWriteKeepsItsDeltas(t *testing.T) {
	if raceDetector {
		t.Skip("sync.Pool drops the deltas kept for reuse at random under the race detector")
	}
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	p := newPool(t, PoolOptions{})
	l := rec(Invalidate)
	l.Checkpoint = &CheckpointPolicy{Every: 16, Keep: 4}
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	seed := byte(0)
	write := func() {
		seed++
		check(t, h.Write(0, recRow(seed)))
	}
	for range 256 { // past Keep: the history trims as it goes
		write()
	}
	row := recRow(0)
	n := testing.AllocsPerRun(4, func() {
		for range 128 {
			seed++
			row[0][0] = seed
			check(t, h.Write(0, row))
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per 128 checkpointed writes; want none", n)
	}
	// A branch shares the head's history: the deltas the head drops
	// past Keep are still the branch's, and the head's next writes take
	// none of them.
	var vs []Version
	var want [][]byte
	for range 48 {
		write()
		vs, want = append(vs, h.Version()), append(want, slices.Clone(recRow(seed)[0]))
	}
	c := must[*Head](t)(h.Branch())
	defer c.Release()
	for range 128 { // the head drops every delta c holds
		write()
	}
	read := 0
	for i, v := range vs {
		s, err := c.At(v)
		if err != nil {
			continue // before c's oldest checkpoint
		}
		read++
		if got := readRec(t, s); !bytes.Equal(got, want[i]) {
			t.Errorf("the branch's version %d after the head's writes reads %v; want %v", v, got, want[i])
		}
		check(t, s.Release())
	}
	if read < 32 {
		t.Errorf("the branch rebuilt %d of the last 48 versions; want at least 32", read)
	}
	check(t, checkInvariants(p))
}

// TestCheckpointDeltasDroppedConcurrently: a head and its branch share
// their histories' deltas, and both write past Keep at once, each under
// its own lock, so that either may drop a shared delta last: the one that
// does keeps it for its next write (deltaMems), and neither reads it after
// (the race detector watches). Each reads its own rows throughout, and its
// last versions rebuilt.
func TestCheckpointDeltasDroppedConcurrently(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := rec(Invalidate)
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 2}
	for round := range 40 {
		h := must[*Head](t)(p.NewHead(l, "s"))
		for k := range 16 {
			check(t, h.Write(0, recRow(byte(k))))
		}
		b := must[*Head](t)(h.Branch())
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, x := range []*Head{h, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 24 {
					row := recRow(byte(100*i + k + round))
					if err := x.Write(0, row); err != nil {
						errs[i] = err
						return
					}
					v := x.Version()
					s, err := x.At(v)
					if err != nil {
						errs[i] = err
						return
					}
					got := make([]byte, 32)
					err = errors.Join(s.Read(0, 4, [][]byte{got}), s.Release())
					if err == nil && !bytes.Equal(got, row[0]) {
						err = fmt.Errorf("version %d rebuilt reads %v; want %v", v, got, row[0])
					}
					if err != nil {
						errs[i] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		check(t, errors.Join(errs...))
		check(t, errors.Join(h.Release(), b.Release()))
	}
	check(t, checkInvariants(p))
}
