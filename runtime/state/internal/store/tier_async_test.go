package store

import (
	"bytes"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// asyncTierPool is a pool of n 256-byte blocks with a host tier on r's backend.
func asyncTierPool(t *testing.T, b device.Backend, n int) *Pool {
	t.Helper()
	p, err := NewPool(b, PoolOptions{BlockBytes: 256, MaxBytes: int64(n) * 256, HostTier: 64 << 10})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

func asyncStream(t *testing.T, b device.Backend) device.Stream {
	t.Helper()
	st := must[device.Stream](t)(b.(device.Streams).NewStream())
	t.Cleanup(func() { st.Close() })
	return st
}

// TestTierAfterAsyncOnStreams: an optional head that appended on the
// host and on two streams, whose copies completed, moves to the tier and
// comes back with every row at the same version; snapshots, branches,
// rollbacks and more AppendAsync calls of the head brought back keep the
// rows.
func TestTierAfterAsyncOnStreams(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := asyncTierPool(t, r.Backend, 8)
		st1, st2 := asyncStream(t, r.Backend), asyncStream(t, r.Backend)
		a := headOf(t, p, wide("Cache", Optional), "a")
		fill(t, a, 1, 40)
		check(t, a.AppendAsync(st1, wideRow(41)))
		check(t, a.AppendAsync(st2, wideRow(42)))
		check(t, a.AppendAsync(st1, wideRow(43)))
		check(t, st1.Sync())
		check(t, st2.Sync())
		v := a.Version()
		m := headOf(t, p, wide("Session", Mandatory), "m")
		fill(t, m, 5, 1)
		if s := p.Stats(); a.tier == nil || s.EvictedBytes != 0 {
			t.Fatalf("in the tier %v, evicted %d; want the head moved", a.tier != nil, s.EvictedBytes)
		}
		if a.Version() != v || a.Len() != 4 {
			t.Fatalf("in the tier: version %d, len %d; want %d, 4", a.Version(), a.Len(), v)
		}
		check(t, m.Release())
		want := catWide(wideRow(40), wideRow(41), wideRow(42), wideRow(43))
		if got := readWide(t, a); !bytes.Equal(got, want) {
			t.Fatal("the rows brought back differ")
		}
		if a.Version() != v {
			t.Fatalf("version %d after the return, want %d", a.Version(), v)
		}
		// One row, read alone (a read within one block).
		one := make([]byte, 256)
		check(t, a.Read(2, 3, [][]byte{one}))
		if !bytes.Equal(one, wideRow(42)[0]) {
			t.Fatal("row 2 read alone differs")
		}
		s := must[*Snap](t)(a.Snapshot())
		defer s.Release()
		b := must[*Head](t)(a.Branch())
		defer b.Release()
		check(t, a.AppendAsync(st2, wideRow(44)))
		check(t, b.AppendAsync(st1, wideRow(45)))
		if got := readWide(t, a); !bytes.Equal(got, append(bytes.Clone(want), wideRow(44)[0]...)) {
			t.Fatal("the head's rows after an AppendAsync past the return differ")
		}
		if got := readWide(t, b); !bytes.Equal(got, append(bytes.Clone(want), wideRow(45)[0]...)) {
			t.Fatal("the branch's rows differ")
		}
		if got := readWide(t, s); !bytes.Equal(got, want) {
			t.Fatal("the snapshot's rows differ")
		}
		check(t, a.Rollback(s))
		if got := readWide(t, a); !bytes.Equal(got, want) || a.Version() != s.Version() {
			t.Fatal("the rollback's rows or version differ")
		}
		checkInv(t, p)
	})
}

// failStream makes st fail: a kernel queued on it meets memory
// outside any allocation. Work queued after it still runs on the host
// backend, and its events complete with the stream's error.
func failStream(t *testing.T, r *statetest.StreamRig, st device.Stream) {
	t.Helper()
	check(t, r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 1}, 0, device.Ptr(8), uint32(1), uint64(8)))
}

// TestTierAsyncFailedStream: an optional head whose AppendAsync was
// queued on a stream that failed is not moved to the tier (its copies
// failed): the next call answers the stream's error, or ErrEvicted when
// the pool dropped it, never nil with the rows of a failed copy.
func TestTierAsyncFailedStream(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := asyncTierPool(t, r.Backend, 8)
		bad, good := asyncStream(t, r.Backend), asyncStream(t, r.Backend)
		a := headOf(t, p, wide("Cache", Optional), "a")
		fill(t, a, 1, 40)
		failStream(t, r, bad)
		if err := bad.Sync(); err == nil {
			t.Skip("the rig's stream did not fail")
		}
		check(t, a.AppendAsync(good, wideRow(41)))
		if err := a.AppendAsync(bad, wideRow(42)); err != nil {
			t.Skipf("AppendAsync on a failed stream failed at once: %v", err)
		}
		check(t, good.Sync())
		bad.Sync()
		if _, moved, err := (tierHead{a}).moveOut(); moved || err != nil {
			t.Fatalf("a head whose copies failed moved to the tier: %v, %v", moved, err)
		}
		if err := a.Read(0, 1, [][]byte{make([]byte, 256)}); err == nil {
			t.Fatal("the next call after a failed AppendAsync answered nil")
		}
		checkInv(t, p)
	})
}

// TestTierAsyncFailedStreamPressure: as above, under pressure.
func TestTierAsyncFailedStreamPressure(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := asyncTierPool(t, r.Backend, 4)
		bad := asyncStream(t, r.Backend)
		a := headOf(t, p, wide("Cache", Optional), "a")
		fill(t, a, 1, 40)
		failStream(t, r, bad)
		if err := bad.Sync(); err == nil {
			t.Skip("the rig's stream did not fail")
		}
		if err := a.AppendAsync(bad, wideRow(42)); err != nil {
			t.Skipf("AppendAsync on a failed stream failed at once: %v", err)
		}
		bad.Sync()
		m := headOf(t, p, wide("Session", Mandatory), "m")
		fill(t, m, 3, 1)
		if a.tier != nil {
			t.Fatal("a head whose copies failed moved to the tier")
		}
		err := a.Read(0, 1, [][]byte{make([]byte, 256)})
		if err == nil {
			t.Fatal("the next call after a failed AppendAsync answered nil")
		}
		t.Logf("next call: %v", err)
		checkInv(t, p)
	})
}

// TestGroupTierAfterAsync: a group (no domain) whose members appended
// on streams moves to the tier whole once the copies completed, and
// comes back with the rows and versions.
func TestGroupTierAfterAsync(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := asyncTierPool(t, r.Backend, 6)
		st1, st2 := asyncStream(t, r.Backend), asyncStream(t, r.Backend)
		g := must[*Group](t)(NewGroup(p, "g", wide("A", Optional), wide("B", Optional)))
		defer g.Release()
		a, b := g.Head(0), g.Head(1)
		fill(t, a, 1, 40)
		check(t, a.AppendAsync(st1, wideRow(41)))
		check(t, b.AppendAsync(st2, wideRow(50)))
		check(t, st1.Sync())
		check(t, st2.Sync())
		va, vb := a.Version(), b.Version()
		m := headOf(t, p, wide("Session", Mandatory), "m")
		fill(t, m, 4, 1)
		if a.tier == nil || b.tier == nil || p.Stats().EvictedBytes != 0 {
			t.Fatalf("in the tier %v %v, evicted %d; want the group moved", a.tier != nil, b.tier != nil, p.Stats().EvictedBytes)
		}
		check(t, m.Release())
		if got := readWide(t, a); !bytes.Equal(got, catWide(wideRow(40), wideRow(41))) || a.Version() != va {
			t.Fatal("member A came back with other rows or version")
		}
		if got := readWide(t, b); !bytes.Equal(got, catWide(wideRow(50))) || b.Version() != vb {
			t.Fatal("member B came back with other rows or version")
		}
		checkInv(t, p)
	})
}

// TestTierAsyncHistory: an optional checkpointed head whose last
// call was an AppendAsync keeps its delta pending (not tierable until the
// next call); once a call took it, the head moves and At of every
// version reads its rows.
func TestTierAsyncHistory(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := asyncTierPool(t, r.Backend, 8)
		st := asyncStream(t, r.Backend)
		l := wide("Cache", Optional)
		l.Checkpoint = &CheckpointPolicy{Every: 2, Keep: 4}
		a := headOf(t, p, l, "a")
		fill(t, a, 1, 40)
		v1 := a.Version()
		check(t, a.AppendAsync(st, wideRow(41)))
		v2 := a.Version()
		check(t, a.AppendAsync(st, wideRow(42))) // takes the delta of v2 in stream order
		v3 := a.Version()
		check(t, st.Sync())
		// Not called since: v3's delta pending, the head is dropped or
		// kept, never moved without it.
		if _, moved, _ := (tierHead{a}).moveOut(); moved {
			t.Fatal("a head with a pending delta moved to the tier")
		}
		if got := readWide(t, a); !bytes.Equal(got, catWide(wideRow(40), wideRow(41), wideRow(42))) {
			t.Fatal("rows differ")
		}
		for _, c := range []struct {
			v    Version
			want []byte
		}{{v1, catWide(wideRow(40))}, {v2, catWide(wideRow(40), wideRow(41))}, {v3, catWide(wideRow(40), wideRow(41), wideRow(42))}} {
			s, err := a.At(c.v)
			if err != nil {
				t.Fatalf("At(%d): %v", c.v, err)
			}
			if got := readWide(t, s); !bytes.Equal(got, c.want) {
				t.Fatalf("At(%d) rows differ", c.v)
			}
			s.Release()
		}
		m := headOf(t, p, wide("Session", Mandatory), "m")
		fill(t, m, 5, 1)
		t.Logf("tier %v, stats %+v", a.tier != nil, p.Stats())
		check(t, m.Release())
		if a.tier == nil {
			t.Logf("not moved")
		}
		if got := readWide(t, a); !bytes.Equal(got, catWide(wideRow(40), wideRow(41), wideRow(42))) || a.Version() != v3 {
			t.Fatal("rows or version differ after the tier")
		}
		checkInv(t, p)
	})
}

// TestTierReturnThenAsync: a head brought back with its copies held
// on the tier's stream appends on a stream of its own (ordered after
// them); neither landed, it stays; once both landed it moves to the tier
// again and comes back with every row.
func TestTierReturnThenAsync(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p, h := tierStreamPool(t, r, 256, 2)
		if p.tier.memcpy {
			t.Skip("the host tier copies at once")
		}
		st := asyncStream(t, r.Backend)
		release := holdTier(t, r, p)
		check(t, h.Prefetch())
		check(t, h.AppendAsync(st, wideRow(7)))
		if _, moved, _ := (tierHead{h}).moveOut(); moved {
			t.Fatal("moved with its copies held back")
		}
		release()
		check(t, st.Sync())
		check(t, p.tier.stream().Sync())
		v := h.Version()
		if _, moved, err := (tierHead{h}).moveOut(); !moved || err != nil {
			t.Fatalf("once the copies landed: moved %v, %v", moved, err)
		}
		if got := readWide(t, h); !bytes.Equal(got, catWide(wideRow(40), wideRow(41), wideRow(7))) || h.Version() != v {
			t.Fatal("rows or version differ")
		}
		checkInv(t, p)
	})
}

// TestReleaseAsyncInFlightUnderPressure: heads released with their
// AppendAsync copies held back leave their blocks pending; pressure then
// neither moves nor reuses them before the copies ran, and everything
// comes back.
func TestReleaseAsyncInFlightUnderPressure(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := asyncTierPool(t, r.Backend, 6)
		st := asyncStream(t, r.Backend)
		a := headOf(t, p, wide("Cache", Optional), "a")
		b := headOf(t, p, wide("Cache", Optional), "b")
		fill(t, b, 2, 20)
		r.Hold(t, st)
		released := false
		defer func() {
			if !released {
				r.Release()
			}
		}()
		check(t, a.AppendAsync(st, catCols(wideRow(1), wideRow(2))))
		check(t, a.Release())
		m := headOf(t, p, wide("Session", Mandatory), "m")
		for i := range 2 {
			check(t, m.Append(wideRow(byte(60+i))))
		}
		// b moved (or dropped); a's blocks are pending.
		if s := p.Stats(); s.PendingBytes != 512 {
			t.Errorf("pending %d, want a's 512 bytes", s.PendingBytes)
		}
		r.Release()
		released = true
		check(t, st.Sync())
		check(t, m.Append(wideRow(62)))
		check(t, m.Append(wideRow(63)))
		if got := readWide(t, m); !bytes.Equal(got, catWide(wideRow(60), wideRow(61), wideRow(62), wideRow(63))) {
			t.Fatal("m's rows differ")
		}
		if got, err := b.Len(), error(nil); got != 2 || err != nil {
			t.Fatalf("b has %d rows", got)
		}
		if got := readWide(t, b); !bytes.Equal(got, catWide(wideRow(20), wideRow(21))) {
			t.Fatal("b's rows differ")
		}
		checkInv(t, p)
	})
}
