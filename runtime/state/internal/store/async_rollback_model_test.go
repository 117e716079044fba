package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// callWithin runs f with a deadline: a call that does not return in d is a
// stall, reported by the caller.
func callWithin(d time.Duration, f func() error) (err error, stalled bool) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err, false
	case <-time.After(d):
		return nil, true
	}
}

// asyncReadCheck is a ReadAsync whose rows are checked once its stream ran.
type asyncReadCheck struct {
	st   int
	dst  [][]byte
	want [][]byte
	what string
}

// asyncModel drives one lineage on a pool with streams: sync and async
// appends, streams held by gates, snapshots, branches, rollbacks, merges,
// releases and async reads, against the reference.
type asyncModel struct {
	t      *testing.T
	rig    *queuedRig
	p      *Pool
	lin    *RefLineage
	hs     []*RefHandle // live heads and snapshots
	sts    []device.Stream
	open   []func() // per stream: the gate's opener, nil when not held
	busy   map[*Head]map[int]bool
	reads  []asyncReadCheck
	tag    byte
	seed   uint64
	step   int
	window bool
	log    []string
	ids    map[*RefHandle]int
	ckpt   bool
	next   int
}

func (m *asyncModel) fatalf(format string, args ...any) {
	m.t.Helper()
	tail := m.log
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	m.t.Fatalf("seed %d step %d: %s\ncalls:\n  %s", m.seed, m.step, fmt.Sprintf(format, args...), joinLines(tail))
}

func joinLines(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(x)
	}
	return b.String()
}

func (m *asyncModel) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("%d: ", m.step)+fmt.Sprintf(format, args...))
}

// isBusy reports whether head h has copies in flight on a held stream:
// every call on it but AppendAsync, ReadAsync and Release waits for them.
func (m *asyncModel) isBusy(h *Head) bool {
	for st := range m.busy[h] {
		if m.open[st] != nil {
			return true
		}
	}
	return false
}

func (m *asyncModel) name(x *RefHandle) string {
	i, ok := m.ids[x]
	if !ok {
		m.next++
		i = m.next
		m.ids[x] = i
	}
	return fmt.Sprintf("%s#%d(v%d,%d rows)", x.Kind(), i, x.V, x.Rows())
}

func (m *asyncModel) call(what string, f func() error) error {
	m.t.Helper()
	err, stalled := callWithin(5*time.Second, f)
	if stalled {
		m.fatalf("%s: still running after 5s", what)
	}
	return err
}

// expect compares err with what the reference predicts.
func (m *asyncModel) expect(what string, err, want error) bool {
	m.t.Helper()
	if want == nil && err != nil {
		m.fatalf("%s: %v, want success", what, err)
	}
	if want != nil && !errors.Is(err, want) {
		m.fatalf("%s: %v, want %v", what, err, want)
	}
	return err == nil
}

func (m *asyncModel) readCheck(x *RefHandle) {
	m.t.Helper()
	if x.StateErr() != nil {
		return
	}
	var r interface {
		reader
		Oldest() int
	}
	if x.Head != nil {
		if m.isBusy(x.Head) {
			return
		}
		r = x.Head
	} else {
		r = x.Snap
	}
	n := x.Rows()
	if r.Len() != n {
		m.fatalf("%s: Len %d, want %d", m.name(x), r.Len(), n)
	}
	lo := r.Oldest()
	dst := [][]byte{make([]byte, (n-lo)*16), make([]byte, (n-lo)*8)}
	err := m.call("read", func() error { return r.Read(lo, n, dst) })
	if err != nil {
		m.fatalf("%s: read [%d,%d): %v", m.name(x), lo, n, err)
	}
	if !x.Same(lo, n, dst) {
		m.fatalf("%s: reads other rows than the reference (rows [%d,%d))", m.name(x), lo, n)
	}
}

func (m *asyncModel) liveHeads() []*RefHandle {
	var out []*RefHandle
	for _, x := range m.hs {
		if x.Head != nil && x.StateErr() == nil {
			out = append(out, x)
		}
	}
	return out
}

func (m *asyncModel) pick(rng *rand.Rand, heads bool) *RefHandle {
	var c []*RefHandle
	for _, x := range m.hs {
		if heads == (x.Head != nil) {
			c = append(c, x)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[rng.IntN(len(c))]
}

func (m *asyncModel) drop(x *RefHandle) {
	m.hs = slices.DeleteFunc(m.hs, func(y *RefHandle) bool { return y == x })
}

// sync opens stream i's gate and waits for it, then checks the async
// reads queued on it.
func (m *asyncModel) sync(i int) {
	m.t.Helper()
	// Work on one stream may wait for another's (ReadAsync orders its
	// stream after copies in flight elsewhere): open every gate.
	for k := range m.open {
		if m.open[k] != nil {
			m.open[k]()
			m.open[k] = nil
		}
	}
	if err := m.call("stream sync", m.sts[i].Sync); err != nil {
		m.fatalf("stream %d: %v", i, err)
	}
	keep := m.reads[:0]
	for _, r := range m.reads {
		if r.st != i {
			keep = append(keep, r)
			continue
		}
		if !equalCols(r.dst, r.want) {
			m.fatalf("%s: the async read on stream %d read other rows", r.what, i)
		}
	}
	m.reads = keep
	for h, s := range m.busy {
		delete(s, i)
		if len(s) == 0 {
			delete(m.busy, h)
		}
	}
}

func (m *asyncModel) rows(n int) [][]byte {
	m.tag++
	return kvRows(n, m.tag*7+1)
}

func (m *asyncModel) stepOnce(rng *rand.Rand) {
	m.t.Helper()
	x := m.pick(rng, true)
	switch op := rng.IntN(20); {
	case op < 4 && x != nil: // append
		if m.isBusy(x.Head) {
			return
		}
		n := 1 + rng.IntN(5)
		rows := m.rows(n)
		m.logf("Append(%s, %d)", m.name(x), n)
		err := m.call("Append", func() error { return x.Head.Append(rows) })
		if m.expect("Append "+m.name(x), err, x.StateErr()) {
			x.Append(rows)
		}
	case op < 8 && x != nil: // append async
		si := rng.IntN(len(m.sts))
		n := 1 + rng.IntN(5)
		rows := m.rows(n)
		m.logf("AppendAsync(%s, stream %d held=%v, %d)", m.name(x), si, m.open[si] != nil, n)
		err := m.call("AppendAsync", func() error { return x.Head.AppendAsync(m.sts[si], rows) })
		if m.expect("AppendAsync "+m.name(x), err, x.StateErr()) {
			x.Append(rows)
			if m.busy[x.Head] == nil {
				m.busy[x.Head] = map[int]bool{}
			}
			m.busy[x.Head][si] = true
		}
	case op < 9: // hold a stream
		si := rng.IntN(len(m.sts))
		if m.open[si] == nil {
			m.logf("hold stream %d", si)
			m.open[si] = m.rig.hold(m.t, m.sts[si])
		}
	case op < 10: // open a stream
		si := rng.IntN(len(m.sts))
		m.logf("sync stream %d", si)
		m.sync(si)
	case op < 12 && x != nil: // snapshot
		if m.isBusy(x.Head) {
			return
		}
		m.logf("Snapshot(%s)", m.name(x))
		var s *Snap
		err := m.call("Snapshot", func() (err error) { s, err = x.Head.Snapshot(); return })
		if m.expect("Snapshot "+m.name(x), err, x.StateErr()) {
			m.hs = append(m.hs, x.Snapshot(s))
		}
	case op < 13 && x != nil && len(m.hs) < 14: // branch
		if m.isBusy(x.Head) {
			return
		}
		m.logf("Branch(%s)", m.name(x))
		var b *Head
		err := m.call("Branch", func() (err error) { b, err = x.Head.Branch(); return })
		if m.expect("Branch "+m.name(x), err, x.StateErr()) {
			m.hs = append(m.hs, x.Branch(b))
		}
	case op < 15 && x != nil: // rollback
		s := m.pick(rng, false)
		if s == nil || m.isBusy(x.Head) {
			return
		}
		m.logf("Rollback(%s, %s)", m.name(x), m.name(s))
		err := m.call("Rollback", func() error { return x.Head.Rollback(s.Snap) })
		want := x.StateErr()
		if want == nil {
			want = s.StateErr()
		}
		if want == nil && !x.CanRollback(s) {
			want = ErrNotAncestor
		}
		if m.expect("Rollback "+m.name(x)+" to "+m.name(s), err, want) {
			x.Rollback(s)
		}
	case op < 16 && x != nil: // merge
		c := m.pick(rng, true)
		if c == x || m.isBusy(x.Head) || m.isBusy(c.Head) {
			return
		}
		m.logf("Merge(%s, %s)", m.name(x), m.name(c))
		err := m.call("Merge", func() error { return x.Head.Merge(c.Head) })
		want := x.StateErr()
		if want == nil {
			want = c.StateErr()
		}
		if want == nil && !x.CanMerge(c) {
			want = ErrDiverged
		}
		if m.expect("Merge "+m.name(x)+" <- "+m.name(c), err, want) {
			x.Merge(c)
		}
	case op < 17 && x != nil && m.ckpt: // At a version of the head's line
		if m.isBusy(x.Head) || x.StateErr() != nil {
			return
		}
		anc := m.lin.Ancestry(x.V)
		v := anc[rng.IntN(len(anc))]
		m.logf("At(%s, v%d)", m.name(x), v)
		var s *Snap
		err := m.call("At", func() (err error) { s, err = x.Head.At(v); return })
		switch {
		case err == nil:
			y := x.At(s, v)
			if s.Version() != v {
				m.fatalf("At(%s, v%d): a snapshot of version %d", m.name(x), v, s.Version())
			}
			m.hs = append(m.hs, y)
		case errors.Is(err, ErrNotRetained):
		default:
			m.fatalf("At(%s, v%d): %v", m.name(x), v, err)
		}
	case op < 18: // async read of anything
		y := m.hs[rng.IntN(len(m.hs))]
		if y.StateErr() != nil || y.Rows() == 0 {
			return
		}
		si := rng.IntN(len(m.sts))
		n := y.Rows()
		lo := 0
		if y.Head != nil {
			lo = y.Head.Oldest()
		} else {
			lo = y.Snap.Oldest()
		}
		from := lo + rng.IntN(n-lo)
		dst := [][]byte{make([]byte, (n-from)*16), make([]byte, (n-from)*8)}
		m.logf("ReadAsync(%s, stream %d, [%d,%d))", m.name(y), si, from, n)
		var err error
		if y.Head != nil {
			err = m.call("ReadAsync", func() error { return y.Head.ReadAsync(m.sts[si], from, n, dst) })
		} else {
			err = m.call("ReadAsync", func() error { return y.Snap.ReadAsync(m.sts[si], from, n, dst) })
		}
		if err != nil {
			m.fatalf("ReadAsync %s: %v", m.name(y), err)
		}
		if y.Head != nil && m.open[si] == nil {
			// The stream now waits for the head's copies on the others.
			for k := range m.busy[y.Head] {
				if k != si && m.open[k] != nil {
					m.open[si] = func() {}
				}
			}
		}
		want := [][]byte{bytes.Clone(y.Cols[0][from*16 : n*16]), bytes.Clone(y.Cols[1][from*8 : n*8])}
		m.reads = append(m.reads, asyncReadCheck{st: si, dst: dst, want: want, what: m.name(y)})
	default: // release
		if len(m.hs) < 2 {
			return
		}
		y := m.hs[rng.IntN(len(m.hs))]
		m.logf("Release(%s)", m.name(y))
		var err error
		if y.Head != nil {
			err = m.call("Release", y.Head.Release)
			delete(m.busy, y.Head)
		} else {
			err = m.call("Release", y.Snap.Release)
		}
		if err != nil {
			m.fatalf("Release %s: %v", m.name(y), err)
		}
		y.Release()
		m.drop(y)
	}
	// Invalidated handles are released at once: they only answer errors.
	for _, y := range slices.Clone(m.hs) {
		if y.Invalid {
			var err error
			if y.Head != nil {
				err = m.call("Release", y.Head.Release)
				delete(m.busy, y.Head)
			} else {
				err = m.call("Release", y.Snap.Release)
			}
			if err != nil {
				m.fatalf("Release of invalidated %s: %v", m.name(y), err)
			}
			y.Release()
			m.drop(y)
		}
	}
	for _, y := range m.hs {
		m.readCheck(y)
	}
}

func runAsyncModel(t *testing.T, seed uint64, desc Descendants, blockRows, window int, steps int) {
	runAsyncModelCk(t, seed, desc, blockRows, window, steps, nil)
}

func runAsyncModelCk(t *testing.T, seed uint64, desc Descendants, blockRows, window int, steps int, ck *CheckpointPolicy) {
	rig := newQueuedRig(t)
	p, err := NewPool(rig.b, PoolOptions{BlockBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	l := kv(Append, 0, desc)
	l.BlockRows = blockRows
	l.Window = window
	l.Checkpoint = ck
	m := &asyncModel{t: t, rig: rig, p: p, lin: NewRefLineage("me", l), busy: map[*Head]map[int]bool{}, seed: seed, ids: map[*RefHandle]int{}, ckpt: ck != nil}
	if ck != nil {
		m.lin.KeepVersions()
	}
	for range 2 {
		m.sts = append(m.sts, rig.stream(t))
		m.open = append(m.open, nil)
	}
	h := must[*Head](t)(p.NewHead(l, "me"))
	m.hs = append(m.hs, m.lin.NewHead(h))
	rng := rand.New(rand.NewPCG(seed, 99))
	for m.step = 0; m.step < steps; m.step++ {
		if len(m.liveHeads()) == 0 {
			h := must[*Head](t)(p.NewHead(l, "me"))
			m.lin = NewRefLineage("me", l)
			if ck != nil {
				m.lin.KeepVersions()
			}
			m.hs = append(m.hs, m.lin.NewHead(h))
		}
		m.stepOnce(rng)
		if m.step%16 == 0 {
			if err := checkInvariants(p); err != nil {
				m.fatalf("invariants: %v", err)
			}
		}
	}
	for i := range m.sts {
		m.sync(i)
	}
	for _, y := range m.hs {
		m.readCheck(y)
	}
	for _, y := range m.hs {
		if y.Head != nil {
			check(t, y.Head.Release())
		} else {
			check(t, y.Snap.Release())
		}
	}
	if err, stalled := callWithin(5*time.Second, func() error { p.WaitPending(); return nil }); stalled || err != nil {
		t.Fatalf("seed %d: WaitPending stalled", seed)
	}
	if err := checkInvariants(p); err != nil {
		t.Fatalf("seed %d: invariants at the end: %v", seed, err)
	}
	if s := p.Stats(); s.Blocks != 0 || s.Live != 0 || s.PhysicalBytes != 0 {
		t.Fatalf("seed %d: after releasing everything: %d blocks, %d live, %d physical", seed, s.Blocks, s.Live, s.PhysicalBytes)
	}
	check(t, p.Close())
}

// TestAsyncRollbackModel: one lineage's heads append sync and async
// (on streams a gate may hold), snapshot, branch, roll back, merge, read
// async and release, against the reference, with Keep and Invalidate,
// pool blocks and BlockRows, with and without a window.
func TestAsyncRollbackModel(t *testing.T) {
	for _, desc := range []Descendants{Keep, Invalidate} {
		for _, br := range []int{0, 4} {
			for _, win := range []int{0, 10} {
				t.Run(fmt.Sprintf("%v/rows%d/win%d", desc, br, win), func(t *testing.T) {
					for seed := range raceScaled(20) {
						runAsyncModel(t, seed+1, desc, br, win, 500)
						if t.Failed() {
							return
						}
					}
				})
			}
		}
	}
}

// TestAsyncRollbackCheckpointModel: the model of
// TestAsyncRollbackModel on checkpointed layouts, with At.
func TestAsyncRollbackCheckpointModel(t *testing.T) {
	for _, desc := range []Descendants{Keep, Invalidate} {
		for _, br := range []int{0, 4} {
			t.Run(fmt.Sprintf("%v/rows%d", desc, br), func(t *testing.T) {
				for seed := range raceScaled(15) {
					runAsyncModelCk(t, seed+1, desc, br, 0, 400, &CheckpointPolicy{Every: 3, Keep: 4})
					if t.Failed() {
						return
					}
				}
			})
		}
	}
}
