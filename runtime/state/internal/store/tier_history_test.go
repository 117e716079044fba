package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// histKV is a mutable KV layout of 40 rows (three blocks of keys, two of
// values in 256-byte blocks) of retention ret, with a checkpoint every
// two versions and two kept.
func histKV(ret Retention) *Layout {
	l := kv(Mutable, 40, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 2, Keep: 2}
	l.Retention = ret
	return l
}

// histVersions writes three versions of h (a histKV head): the whole
// state, then two rows; the second is checkpointed. It returns the
// versions.
func histVersions(t *testing.T, h *Head, seed byte) []Version {
	t.Helper()
	check(t, h.Write(0, kvRows(40, seed)))
	vs := []Version{h.Version()}
	check(t, h.Write(5, kvRows(1, seed+1)))
	vs = append(vs, h.Version())
	check(t, h.Write(30, kvRows(1, seed+2)))
	return append(vs, h.Version())
}

func sameRows(a, b [][]byte) bool {
	return len(a) == len(b) && bytes.Equal(a[0], b[0]) && bytes.Equal(a[1], b[1])
}

// stepsAfterReturn checks that h, back from the tier at version v with
// rows want, goes on with a history: At(v) rebuilds it, Step makes new
// versions that At rebuilds, a Rollback to a snapshot taken after the
// return takes its rows.
func stepsAfterReturn(t *testing.T, h *Head, v Version, want [][]byte) {
	t.Helper()
	s := must[*Snap](t)(h.At(v))
	if !sameRows(readAll(t, s), want) || s.Version() != v {
		t.Fatal("At of the version the head came back at reads other rows")
	}
	check(t, s.Release())
	check(t, h.StepHost([][]byte{{1, 2}}, true, hostRecur))
	v1, want1 := h.Version(), readAll(t, h)
	snap := must[*Snap](t)(h.Snapshot())
	defer snap.Release()
	check(t, h.StepHost([][]byte{{3}}, false, hostRecur))
	check(t, h.Write(2, kvRows(1, 77)))
	a := must[*Snap](t)(h.At(v1))
	if !sameRows(readAll(t, a), want1) {
		t.Fatal("At of a version stepped after the return reads other rows")
	}
	check(t, a.Release())
	check(t, h.Rollback(snap))
	if !sameRows(readAll(t, h), want1) || h.Version() != v1 {
		t.Fatal("a rollback to a snapshot taken after the return took other rows")
	}
}

// TestTierOptionalHistory: an optional head that keeps a checkpoint
// history moves to the tier whole (the blocks its checkpoints share
// included), its history dropped as eviction drops it; it comes back with
// the same rows and version and a history that starts there: At of that
// version and of later ones, Step and Rollback work, At of the versions
// before answers ErrNotRetained.
func TestTierOptionalHistory(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, HostTier: 64 << 10})
	h := headOf(t, p, histKV(Optional), "a")
	vs := histVersions(t, h, 10)
	want, v := readAll(t, h), h.Version()
	if st := p.Stats(); st.HistoryBytes == 0 || h.Stats().Checkpoints != 2 {
		t.Fatalf("before the move: %d history bytes, %d checkpoints", st.HistoryBytes, h.Stats().Checkpoints)
	}
	freed, moved, err := tierHead{h}.moveOut()
	if !moved || err != nil {
		t.Fatalf("move out: %v, %v", moved, err)
	}
	st := p.Stats()
	if h.tier == nil || h.hist != nil || h.tier.bytes != 5*256 {
		t.Fatalf("after the move: in the tier %v, history kept %v; want the image of 5 blocks, no history", h.tier != nil, h.hist != nil)
	}
	if st.TierOut != 5*256 || st.TierBytes != 5*256 || st.EvictedBytes != 0 || st.Evictions != 0 || st.PhysicalBytes != 0 || st.HistoryBytes != 0 {
		t.Fatalf("after the move: %+v; want 1280 bytes out, nothing evicted, no device memory held", st)
	}
	if freed == 0 {
		t.Fatal("the move reported nothing freed")
	}
	checkInv(t, p)
	if h.Len() != 40 || h.Version() != v || p.Stats().TierIn != 0 {
		t.Fatal("metadata of the head in the tier")
	}
	if !sameRows(readAll(t, h), want) || h.Version() != v {
		t.Fatal("rows or version brought back differ")
	}
	if st := p.Stats(); st.TierIn != 5*256 || st.TierBytes != 0 || st.RebuiltBytes != 0 {
		t.Fatalf("after the return: %+v", st)
	}
	if hs := h.Stats(); hs.Checkpoints != 1 || hs.HistoryBytes != 0 {
		t.Fatalf("after the return: %d checkpoints, %d history bytes; want the one of the version it came back at", hs.Checkpoints, hs.HistoryBytes)
	}
	for _, old := range vs[:2] {
		if _, err := h.At(old); !errors.Is(err, ErrNotRetained) {
			t.Fatalf("At(%d), a version before the move: %v, want ErrNotRetained", old, err)
		}
	}
	if n, err := h.VersionAt(40); err != nil || n != v {
		t.Fatalf("VersionAt(40) = %d, %v; want %d", n, err, v)
	}
	stepsAfterReturn(t, h, v, want)
	checkInv(t, p)
}

// TestTierReconstructableHistory: a reconstructable head moves to the
// tier whole and keeps its history; it comes back by a copy (no replay,
// no rebuilt bytes) with its history as it was: At of its earlier
// versions still works. One the tier dropped is rebuilt from its history
// as without a tier, never ErrEvicted; PoolStats counts the move, the
// return and the drop as the tier counts other states'.
func TestTierReconstructableHistory(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, HostTier: 64 << 10})
	h := headOf(t, p, histKV(Reconstructable), "a")
	vs := histVersions(t, h, 20)
	want, v := readAll(t, h), h.Version()
	held := p.Stats().HistoryBytes
	before := p.Stats().PhysicalBytes
	freed, moved, err := tierHead{h}.moveOut()
	if !moved || err != nil {
		t.Fatalf("move out: %v, %v", moved, err)
	}
	// The last write copied a block of each column: the checkpoint holds
	// the other three, and the history stays.
	st := p.Stats()
	if freed != 512 || before-st.PhysicalBytes != 512 || h.hist == nil || st.HistoryBytes != held {
		t.Fatalf("the move freed %d bytes (physical %d -> %d), history kept %v with %d bytes (had %d); want 512 freed, the history kept",
			freed, before, st.PhysicalBytes, h.hist != nil, st.HistoryBytes, held)
	}
	if st.TierOut != 5*256 || st.TierBytes != 5*256 || st.EvictedBytes != 0 || st.Evictions != 0 {
		t.Fatalf("after the move: %+v", st)
	}
	checkInv(t, p)
	if h.Len() != 40 || h.Version() != v {
		t.Fatal("metadata of the head in the tier")
	}
	if !sameRows(readAll(t, h), want) || h.Version() != v {
		t.Fatal("rows or version brought back differ")
	}
	if st := p.Stats(); st.TierIn != 5*256 || st.RebuiltBytes != 0 || st.TierBytes != 0 {
		t.Fatalf("after the return: %+v; want a copy back, no rebuild", st)
	}
	s := must[*Snap](t)(h.At(vs[0]))
	if s.Version() != vs[0] {
		t.Fatal("At of a version before the move")
	}
	check(t, s.Release())
	stepsAfterReturn(t, h, v, want)
	checkInv(t, p)

	// Out again, and dropped by the tier: rebuilt from the history. (The
	// rollback left the version a checkpoint's: a write makes a block
	// the move frees.)
	check(t, h.Write(3, kvRows(1, 88)))
	want, v = readAll(t, h), h.Version()
	if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
		t.Fatalf("second move out: %v, %v", moved, err)
	}
	out := p.Stats().TierOut
	if !p.tier.dropOne(p, nil) {
		t.Fatal("the tier dropped nothing")
	}
	st = p.Stats()
	if h.tier != nil || st.TierDropped != out-5*256 || st.EvictedBytes != st.TierDropped || st.Evictions != 1 || st.TierBytes != 0 {
		t.Fatalf("after the drop: %+v", st)
	}
	checkInv(t, p)
	if h.Len() != 40 {
		t.Fatalf("a reconstructable head the tier dropped has %d rows", h.Len())
	}
	if !sameRows(readAll(t, h), want) || h.Version() != v {
		t.Fatal("the head rebuilt after the tier dropped it differs")
	}
	if st := p.Stats(); st.RebuiltBytes == 0 {
		t.Fatal("no rebuild counted")
	}
	checkInv(t, p)
}

// TestTierHistoryUnderPressure: under memory pressure the pool moves an
// optional head with a history to the tier in the first round and a
// reconstructable one in the second, where it would have evicted them;
// nothing is dropped, and both come back.
func TestTierHistoryUnderPressure(t *testing.T) {
	for _, ret := range []Retention{Optional, Reconstructable} {
		t.Run(fmt.Sprint(ret), func(t *testing.T) {
			p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 24 * 256, HostTier: 64 << 10})
			h := headOf(t, p, histKV(ret), "a")
			histVersions(t, h, 30)
			want, v := readAll(t, h), h.Version()
			var ms []*Head
			for i := 0; h.tier == nil; i++ {
				if i > 64 {
					t.Fatalf("the head never moved: %+v", p.Stats())
				}
				m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), Owner(fmt.Sprint("m", i))))
				ms = append(ms, m)
				check(t, m.Append(wideRow(byte(i))))
			}
			if st := p.Stats(); st.EvictedBytes != 0 || st.TierOut != 5*256 {
				t.Fatalf("under pressure: %+v; want the head moved, nothing evicted", st)
			}
			if (h.hist == nil) != (ret == Optional) {
				t.Fatalf("history kept %v for retention %v", h.hist != nil, ret)
			}
			checkInv(t, p)
			for _, m := range ms {
				check(t, m.Release())
			}
			if !sameRows(readAll(t, h), want) || h.Version() != v {
				t.Fatal("rows or version brought back differ")
			}
			if st := p.Stats(); st.RebuiltBytes != 0 || st.TierIn != 5*256 {
				t.Fatalf("after the return: %+v", st)
			}
			checkInv(t, p)
		})
	}
}

// TestTierHistorySharedStays: a head with a history whose blocks a
// snapshot or a branch holds too is not moved (the tier copies a head
// with a history whole only where it and its checkpoints alone hold its
// blocks): it is evicted as without a tier.
func TestTierHistorySharedStays(t *testing.T) {
	for _, by := range []string{"snapshot", "branch"} {
		t.Run(by, func(t *testing.T) {
			p := newPool(t, PoolOptions{BlockBytes: 256, HostTier: 64 << 10})
			h := headOf(t, p, histKV(Optional), "a")
			histVersions(t, h, 40)
			if by == "snapshot" {
				s := must[*Snap](t)(h.Snapshot())
				defer s.Release()
			} else {
				c := must[*Head](t)(h.Branch())
				defer c.Release()
			}
			if _, moved, err := (tierHead{h}).moveOut(); moved || err != nil {
				t.Fatalf("move out of a head sharing its blocks with a %s: %v, %v; want none", by, moved, err)
			}
			if h.tier != nil || h.r == nil || p.Stats().TierOut != 0 {
				t.Fatal("the head left device memory")
			}
			checkInv(t, p)
		})
	}
}

// TestTierHistoryGroup: an optional group whose members keep histories
// moves whole and comes back whole; the members' new histories keep the
// order of their versions, so the group's cut at the version it came back
// at is At's to rebuild, and a cut before answers ErrNotRetained.
func TestTierHistoryGroup(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, HostTier: 1 << 20})
	kvL := checkpointedKV()
	kvL.Retention = Optional
	recL := recLayout(4, 4, Invalidate)
	recL.Retention = Optional
	g := must[*Group](t)(NewGroup(p, "a", kvL, recL))
	defer g.Release()
	kvH, recH := g.Head(0), g.Head(1)
	var first Version
	for i := range 5 {
		check(t, recH.StepHost([][]byte{{byte(i + 1), 3}}, true, hostRecur))
		check(t, kvH.Append(kvRows(1, byte(i))))
		if i == 0 {
			first = kvH.Version()
		}
	}
	wantKV, wantRec := readAll(t, kvH), readAll(t, recH)
	v0, v1 := kvH.Version(), recH.Version()
	if _, moved, err := (groupVictims{g}).moveOut(); !moved || err != nil {
		t.Fatalf("the group's move out: %v, %v", moved, err)
	}
	if kvH.tier == nil || recH.tier == nil || kvH.hist != nil || recH.hist != nil {
		t.Fatal("the group did not move whole, or a member kept its history")
	}
	checkInv(t, p)
	if !sameRows(readAll(t, recH), wantRec) || kvH.tier != nil {
		t.Fatal("a call on one member did not bring the group back with its rows")
	}
	if !sameRows(readAll(t, kvH), wantKV) || kvH.Version() != v0 || recH.Version() != v1 {
		t.Fatal("the members' rows or versions changed in the tier")
	}
	cut := must[*GroupSnap](t)(g.At(v0))
	if !sameRows(readAll(t, cut.Snap(1)), wantRec) {
		t.Fatal("the cut at the version the group came back at reads other rows")
	}
	check(t, cut.Release())
	if _, err := g.At(first); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("the cut before the move: %v, want ErrNotRetained", err)
	}
	checkInv(t, p)
}

// TestTierHistoryFaults: a fault at each backend call of a move out of a
// head with a history drops nothing and leaks nothing (the head keeps its
// rows, version and history in device memory, the tier is as it was), and
// a fault at each backend call of the move back answers the error and
// keeps the head in the tier; the next try brings it back whole.
func TestTierHistoryFaults(t *testing.T) {
	for _, ret := range []Retention{Optional, Reconstructable} {
		t.Run(fmt.Sprint(ret), func(t *testing.T) {
			fb := statetest.NewFaults(device.Host())
			p, err := NewPool(fb, PoolOptions{BlockBytes: 256, HostTier: 64 << 10})
			check(t, err)
			defer p.Close()
			h := must[*Head](t)(p.NewHead(histKV(ret), "a"))
			defer h.Release()
			vs := histVersions(t, h, 50)
			want, v := readAll(t, h), h.Version()
			// The calls of a clean move out and back, counted on a twin.
			calls := func(f func()) int {
				n := fb.Calls()
				f()
				return fb.Calls() - n
			}
			twin := must[*Head](t)(p.NewHead(histKV(ret), "b"))
			histVersions(t, twin, 50)
			out := calls(func() {
				if _, moved, err := (tierHead{twin}).moveOut(); !moved || err != nil {
					t.Fatalf("twin's move out: %v, %v", moved, err)
				}
			})
			in := calls(func() { check(t, twin.Prefetch()) })
			check(t, twin.Release())
			p.WaitPending()
			if out == 0 || in == 0 {
				t.Fatalf("a move out made %d backend calls, a move in %d", out, in)
			}
			t.Logf("a fault at each of %d backend calls out and %d in", out, in)
			for i := range out {
				before := p.Stats()
				fb.Arm(statetest.OpAll, i)
				_, moved, err := tierHead{h}.moveOut()
				if !fb.Disarm() {
					t.Fatalf("call %d of the move out: no fault fired", i)
				}
				if moved || !errors.Is(err, statetest.ErrInjected) {
					t.Fatalf("call %d of the move out failed: moved %v, %v", i, moved, err)
				}
				st := p.Stats()
				if h.tier != nil || h.r == nil || h.hist == nil || st.TierBytes != 0 || st.TierOut != before.TierOut ||
					st.PhysicalBytes != before.PhysicalBytes || st.HistoryBytes != before.HistoryBytes || st.EvictedBytes != 0 {
					t.Fatalf("call %d of the move out failed and changed the head or the pool: %+v, before %+v", i, st, before)
				}
				if !sameRows(readAll(t, h), want) || h.Version() != v {
					t.Fatalf("call %d of the move out failed and changed the rows", i)
				}
				checkInv(t, p)
			}
			if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
				t.Fatalf("move out: %v, %v", moved, err)
			}
			for i := range in {
				before := p.Stats()
				fb.Arm(statetest.OpAll, i)
				err := h.Prefetch()
				if !fb.Disarm() {
					t.Fatalf("call %d of the move in: no fault fired", i)
				}
				if !errors.Is(err, statetest.ErrInjected) {
					t.Fatalf("call %d of the move in failed: %v, want the injected error", i, err)
				}
				st := p.Stats()
				if h.tier == nil || h.r != nil || st.TierBytes != before.TierBytes || st.TierIn != before.TierIn || st.PhysicalBytes != before.PhysicalBytes {
					t.Fatalf("call %d of the move in failed and left the tier: %+v, before %+v", i, st, before)
				}
				checkInv(t, p)
			}
			if !sameRows(readAll(t, h), want) || h.Version() != v {
				t.Fatal("rows or version brought back after the failed tries differ")
			}
			if _, err := h.At(vs[0]); (ret == Optional) != errors.Is(err, ErrNotRetained) {
				t.Fatalf("At(%d) after the return: %v", vs[0], err)
			}
			checkInv(t, p)
		})
	}
}

// TestTierHistoryWaitsForNoHeldWork: the image of a head with a history
// copies the blocks its checkpoints keep too, whose streams' work
// eviction did not wait for: while that work is held back the head is not
// moved (the move waits for it no longer than PendingWait), and once it
// ran the head moves.
func TestTierHistoryWaitsForNoHeldWork(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256, HostTier: 64 << 10, PendingWait: 20 * time.Millisecond})
		check(t, err)
		t.Cleanup(func() { p.Close() })
		h := headOf(t, p, histKV(Reconstructable), "a")
		histVersions(t, h, 60)
		want := readAll(t, h)
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		check(t, h.RecordStream(st))
		r.Hold(t, st)
		done := make(chan bool)
		go func() {
			_, moved, _ := tierHead{h}.moveOut()
			done <- moved
		}()
		select {
		case moved := <-done:
			if moved {
				t.Fatal("the head moved while the work on its checkpoints' blocks was held back")
			}
		case <-time.After(5 * time.Second):
			r.Release()
			t.Fatal("the move out waited for held work")
		}
		r.Release()
		check(t, st.Sync())
		if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
			t.Fatalf("move out once the work ran: %v, %v", moved, err)
		}
		if !sameRows(readAll(t, h), want) {
			t.Fatal("rows brought back differ")
		}
		checkInv(t, p)
	})
}
