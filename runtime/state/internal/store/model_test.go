package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// The model-based test runs long seeded sequences of operations on the
// store and on the reference (ref_model_test.go), and compares after every
// step the content, version, rows and errors of every handle. -model.steps sets the steps per seed, -model.seed runs one seed
// (main_test.go); a failure prints the command that replays it.

type model struct {
	t       *testing.T
	seed    uint64
	step    int
	rng     *rand.Rand
	fb      *statetest.Faults
	pool    *Pool
	other   *Pool // a second pool, for foreign handles
	heads   []*RefHandle
	snaps   []*RefHandle
	foreign []*RefHandle // handles of other
	owners  []Owner
	lastOp  string
	counts  map[string]int // outcomes, for the log
	failed  bool           // the step's call failed by a fault
}

// count tallies the outcome of the current step.
func (m *model) count(err error) {
	k := m.lastOp + ": ok"
	switch {
	case err == nil:
	case faulted(err):
		k = m.lastOp + ": fault"
		m.failed = true
	default:
		for _, e := range []error{ErrBound, ErrShape, ErrRange, ErrReleased, ErrNotAncestor, ErrOwner, ErrDiverged, ErrInvalidated, ErrEvicted, ErrExpired} {
			if errors.Is(err, e) {
				k = m.lastOp + ": " + e.Error()
			}
		}
	}
	m.counts[k]++
}

func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d step %d (%s): %s\nreplay: %s",
		m.seed, m.step, m.lastOp, fmt.Sprintf(format, args...), statetest.Replay(m.t, m.seed, 0))
}

func (m *model) randLayout() *Layout {
	r := m.rng
	l := &Layout{Type: fmt.Sprintf("T%d", r.IntN(1000))}
	for range 1 + r.IntN(3) {
		l.Columns = append(l.Columns, Column{
			Name:     fmt.Sprintf("C%d", len(l.Columns)),
			ElemSize: []int{1, 2, 4, 8}[r.IntN(4)],
			Width:    []int{1, 3, 5}[r.IntN(3)],
		})
	}
	if r.IntN(2) == 0 {
		l.Growth = Mutable
		l.Bound = 1 + r.IntN(300)
	} else {
		l.Growth = Append
		l.Bound = []int{0, 50, 200, 1000}[r.IntN(4)]
		if r.IntN(3) == 0 {
			l.Bound, l.Window = 0, []int{1, 7, 30, 100}[r.IntN(4)]
		}
	}
	l.Descendants = Descendants(r.IntN(2))
	if r.IntN(3) == 0 {
		l.Retention = Optional
	}
	if r.IntN(4) == 0 {
		l.BlockRows = 1 + r.IntN(40) // blocks of its own size
	}
	return l
}

func (m *model) randBatch(l *Layout, n int) [][]byte {
	cols := make([][]byte, len(l.Columns))
	for i, c := range l.Columns {
		cols[i] = make([]byte, n*c.RowBytes())
		for j := range cols[i] {
			cols[i][j] = byte(m.rng.UintN(256))
		}
	}
	return cols
}

// expect fails unless err is nil when want is nil, and wraps want else.
func (m *model) expect(err, want error) {
	m.t.Helper()
	m.count(err)
	if want == nil {
		if err != nil {
			m.fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, want) {
		m.fatalf("error %v, want %v", err, want)
	}
}

// faulted reports whether err is an injected or out-of-memory failure, which
// the model does not predict: the test then checks that nothing changed.
func faulted(err error) bool {
	return err != nil && (errors.Is(err, statetest.ErrInjected) || errors.Is(err, ErrNoMemory))
}

func (m *model) pick(list []*RefHandle) *RefHandle {
	if len(list) == 0 {
		return nil
	}
	return list[m.rng.IntN(len(list))]
}

// pickHead returns a head, mostly one of growth g.
func (m *model) pickHead(g Growth) *RefHandle {
	if m.rng.IntN(5) > 0 {
		var fit []*RefHandle
		for _, x := range m.heads {
			if x.Lin.Layout.Growth == g {
				fit = append(fit, x)
			}
		}
		if len(fit) > 0 {
			return m.pick(fit)
		}
	}
	return m.pick(m.heads)
}

func (m *model) newHead() {
	l := m.randLayout()
	owner := m.owners[m.rng.IntN(len(m.owners))]
	if m.rng.IntN(10) == 0 {
		// The empty owner is refused, and takes nothing.
		_, err := m.pool.NewHead(l, "")
		m.expect(err, ErrOwner)
		return
	}
	h, err := m.pool.NewHead(l, owner)
	if faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, nil)
	m.heads = append(m.heads, NewRefLineage(owner, l).NewHead(h))
}

func (m *model) appendRows() {
	x := m.pickHead(Append)
	if x == nil {
		return
	}
	l := x.Lin.Layout
	n := m.rng.IntN(40)
	cols := m.randBatch(l, n)
	want := x.StateErr()
	switch k := m.rng.IntN(20); {
	case k == 0 && len(cols) > 1:
		cols[1] = cols[1][:len(cols[1])-len(cols[1])/max(n, 1)] // one row short
		if n > 0 {
			want = cmpErr(want, ErrShape)
		}
	case k == 1:
		cols = cols[:len(cols)-1]
		want = cmpErr(want, ErrShape)
	case k == 2:
		cols = nil
		want = cmpErr(want, ErrShape)
	case k == 3 && l.Columns[0].RowBytes() > 1:
		cols[0] = append(cols[0], 1)
		want = cmpErr(want, ErrShape)
	}
	if want == nil {
		if l.Growth == Mutable || (l.Bound > 0 && x.Rows()+n > l.Bound) || (l.Window > 0 && n > l.Window) {
			want = ErrBound
		}
	}
	err := x.Head.Append(cols)
	if want == nil && faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, want)
	if err == nil {
		x.Append(cols)
	}
}

func cmpErr(prior, next error) error {
	if prior != nil {
		return prior
	}
	return next
}

func (m *model) writeRows() {
	x := m.pickHead(Mutable)
	if x == nil {
		return
	}
	l := x.Lin.Layout
	rows := x.Rows()
	n := m.rng.IntN(max(rows/2, 1) + 2)
	at := m.rng.IntN(rows+2) - 1
	cols := m.randBatch(l, n)
	want := x.StateErr()
	if m.rng.IntN(20) == 0 && len(cols) > 1 && n > 0 {
		cols[0] = cols[0][:len(cols[0])-l.Columns[0].RowBytes()]
		want = cmpErr(want, ErrShape)
	}
	if want == nil && (l.Growth != Mutable || at < 0 || at+n > rows) {
		want = ErrRange
	}
	err := x.Head.Write(at, cols)
	if want == nil && faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, want)
	if err == nil {
		x.Write(at, cols)
	}
}

// fill writes random bytes through a random subset of spans (all of them
// with all) and returns, per column, the bytes now at rows [from, to):
// base where no span was written.
func (m *model) fill(l *Layout, spans [][]device.Span, from, to int, base [][]byte, all bool) [][]byte {
	out := cloneCols(base)
	for i, c := range l.Columns {
		rb := c.RowBytes()
		row := from
		total := 0
		for _, s := range spans[i] {
			total += s.Rows
			if all || m.rng.IntN(2) == 0 {
				b := make([]byte, s.Rows*rb)
				for j := range b {
					b[j] = byte(m.rng.UintN(256))
				}
				if err := m.fb.Backend.CopyHtoD(s.Ptr, b); err != nil {
					m.fatalf("writing through a span: %v", err)
				}
				copy(out[i][(row-from)*rb:], b)
			}
			row += s.Rows
		}
		if total != to-from {
			m.fatalf("column %d: spans cover %d rows, want %d", i, total, to-from)
		}
	}
	return out
}

func (m *model) appendDevice() {
	x := m.pickHead(Append)
	if x == nil {
		return
	}
	l := x.Lin.Layout
	n := m.rng.IntN(40) - 1
	want := x.StateErr()
	if want == nil {
		switch {
		case l.Growth == Mutable:
			want = ErrBound
		case n < 0:
			want = ErrRange
		case l.Bound > 0 && x.Rows()+n > l.Bound, l.Window > 0 && n > l.Window:
			want = ErrBound
		}
	}
	spans, err := x.Head.AppendDevice(n)
	if want == nil && faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, want)
	if err == nil {
		from := x.Rows()
		x.Append(m.fill(l, spans, from, from+n, m.randBatch(l, n), true))
	}
}

func (m *model) writeDevice() {
	x := m.pickHead(Mutable)
	if x == nil {
		return
	}
	l := x.Lin.Layout
	rows := x.Rows()
	from := m.rng.IntN(rows+2) - 1
	to := from + m.rng.IntN(max(rows/2, 1)+2) - 1
	want := x.StateErr()
	if want == nil && (l.Growth != Mutable || from < 0 || to < from || to > rows) {
		want = ErrRange
	}
	spans, err := x.Head.WriteDevice(from, to)
	if want == nil && faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, want)
	if err == nil {
		base := make([][]byte, len(l.Columns))
		for i, c := range l.Columns {
			base[i] = x.Cols[i][from*c.RowBytes() : to*c.RowBytes()]
		}
		x.Write(from, m.fill(l, spans, from, to, base, false))
	}
}

func (m *model) snapshot() {
	x := m.pick(m.heads)
	if x == nil {
		return
	}
	s, err := x.Head.Snapshot()
	m.expect(err, x.StateErr())
	if err == nil {
		m.snaps = append(m.snaps, x.Snapshot(s))
	}
}

func (m *model) branch() {
	x := m.pick(m.heads)
	if x == nil {
		return
	}
	c, err := x.Head.Branch()
	m.expect(err, x.StateErr())
	if err == nil {
		m.heads = append(m.heads, x.Branch(c))
	}
}

func (m *model) merge() {
	x, c := m.pick(m.heads), m.pick(m.heads)
	if x == nil {
		return
	}
	if m.rng.IntN(4) > 0 {
		var kin []*RefHandle
		for _, y := range m.heads {
			if y.Lin == x.Lin && y != x {
				kin = append(kin, y)
			}
		}
		if len(kin) > 0 {
			c = m.pick(kin)
		}
	}
	var want error
	switch {
	case x.Released: // before the argument is looked at
		want = ErrReleased
	case c.Lin.Owner != x.Lin.Owner:
		want = ErrOwner
	case c.Lin != x.Lin:
		want = ErrDiverged
	case c == x:
		want = x.StateErr()
	case x.Released || c.Released:
		want = ErrReleased
	case x.Invalid || c.Invalid:
		want = ErrInvalidated
	case x.Evicted || c.Evicted:
		want = ErrEvicted
	case !x.CanMerge(c):
		want = ErrDiverged
	}
	err := x.Head.Merge(c.Head)
	m.expect(err, want)
	if err == nil {
		x.Merge(c)
	}
}

func (m *model) rollback() {
	x := m.pick(m.heads)
	if x == nil {
		return
	}
	var to *RefHandle
	// Mostly an ancestor snapshot of x's own lineage.
	var mine []*RefHandle
	for _, s := range m.snaps {
		if !s.Released && !s.Invalid && x.CanRollback(s) {
			mine = append(mine, s)
		}
	}
	switch k := m.rng.IntN(10); {
	case k < 6 && len(mine) > 0:
		to = m.pick(mine)
	case k == 6 && len(m.foreign) > 0:
		to = m.pick(m.foreign)
	default:
		to = m.pick(m.snaps)
	}
	if to == nil {
		return
	}
	var want error
	switch {
	case x.Released: // before the argument is looked at
		want = ErrReleased
	case to.Lin.Owner != x.Lin.Owner:
		want = ErrOwner
	case x.Invalid:
		want = ErrInvalidated
	case x.Evicted:
		want = ErrEvicted
	case to.Released:
		want = ErrReleased
	case to.Invalid:
		want = ErrInvalidated
	case to.Evicted:
		want = ErrEvicted
	case !x.CanRollback(to):
		want = ErrNotAncestor
	}
	err := x.Head.Rollback(to.Snap)
	m.expect(err, want)
	if err == nil {
		x.Rollback(to)
	}
}

func (m *model) release() {
	list := &m.heads
	if m.rng.IntN(2) == 0 {
		list = &m.snaps
	}
	x := m.pick(*list)
	if x == nil {
		return
	}
	var err error
	if x.Head != nil {
		err = x.Head.Release()
	} else {
		err = x.Snap.Release()
	}
	m.expect(err, nil)
	x.Release()
	// Keep some released handles around to call them; drop the rest.
	if m.rng.IntN(3) > 0 {
		for i, y := range *list {
			if y == x {
				*list = append((*list)[:i], (*list)[i+1:]...)
				break
			}
		}
	}
}

// trim gives free slabs back; verify then checks every handle is intact.
func (m *model) trim() {
	before := m.pool.Stats()
	n, err := m.pool.Trim()
	if faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, nil)
	after := m.pool.Stats()
	if after.ReservedBytes != before.ReservedBytes-n || after.PhysicalBytes != before.PhysicalBytes || after.LogicalBytes != before.LogicalBytes {
		m.fatalf("trim gave back %d bytes: reserved %d -> %d, physical %d -> %d", n, before.ReservedBytes, after.ReservedBytes, before.PhysicalBytes, after.PhysicalBytes)
	}
}

// read checks a random range of a random handle, and bad ranges.
func (m *model) read(x *RefHandle) {
	l := x.Lin.Layout
	rows := x.Rows()
	from := m.rng.IntN(rows+2) - 1
	to := from + m.rng.IntN(rows+2) - 1
	want := x.StateErr()
	if want == nil && (from < 0 || to < from || to > rows) {
		want = ErrRange
	}
	if want == nil && from < x.Floor() && from < to {
		want = ErrExpired
	}
	dst := make([][]byte, len(l.Columns))
	for i, c := range l.Columns {
		dst[i] = make([]byte, max(to-from, 0)*c.RowBytes())
	}
	var err error
	if x.Head != nil {
		err = x.Head.Read(from, to, dst)
	} else {
		err = x.Snap.Read(from, to, dst)
	}
	if want == nil && faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, want)
	if err != nil {
		return
	}
	for i, c := range l.Columns {
		if want := x.Cols[i][from*c.RowBytes() : to*c.RowBytes()]; !bytes.Equal(dst[i], want) {
			m.fatalf("rows [%d, %d) of column %d differ", from, to, i)
		}
	}
}

// verify compares every live handle with the model: content, rows,
// version, stats, and the structure's invariants.
func (m *model) verify() {
	m.t.Helper()
	for _, list := range [][]*RefHandle{m.heads, m.snaps} {
		for _, x := range list {
			if x.Released {
				continue
			}
			var st Stats
			var err error
			l := x.Lin.Layout
			rows, floor := x.Rows(), x.Floor()
			dst := make([][]byte, len(l.Columns))
			for i, c := range l.Columns {
				dst[i] = make([]byte, (rows-floor)*c.RowBytes())
			}
			var v Version
			var n, oldest int
			if x.Head != nil {
				st, v, n, oldest = x.Head.Stats(), x.Head.Version(), x.Head.Len(), x.Head.Oldest()
				err = x.Head.Read(floor, rows, dst)
			} else {
				st, v, n, oldest = x.Snap.Stats(), x.Snap.Version(), x.Snap.Len(), x.Snap.Oldest()
				err = x.Snap.Read(floor, rows, dst)
			}
			if x.Invalid {
				if !errors.Is(err, ErrInvalidated) {
					m.fatalf("invalidated handle reads with %v", err)
				}
				continue
			}
			if errors.Is(err, ErrEvicted) && !x.Evicted {
				// The pool took it under pressure: only optional state
				// may go, and from now on every call answers ErrEvicted.
				if l.Retention != Optional {
					m.fatalf("%s %v state evicted", l.Retention, x.Kind())
				}
				x.Evicted = true
				m.counts["evicted "+x.Kind()]++
			}
			if x.Evicted {
				if !errors.Is(err, ErrEvicted) {
					m.fatalf("evicted handle reads with %v", err)
				}
				continue
			}
			if err != nil {
				m.fatalf("read: %v", err)
			}
			if v != x.V || st.Version != x.V || n != rows || st.Rows != rows {
				m.fatalf("version %d (stats %d), rows %d (stats %d); model: version %d, rows %d", v, st.Version, n, st.Rows, x.V, rows)
			}
			if oldest != floor {
				m.fatalf("oldest row %d, model %d", oldest, floor)
			}
			m.checkWindow(x, st)
			var logical int64
			for i, c := range l.Columns {
				logical += int64((rows - floor) * c.RowBytes())
				if !bytes.Equal(dst[i], x.Cols[i][floor*c.RowBytes():]) {
					m.fatalf("column %d of %v at version %d differs from the model", i, x.Kind(), x.V)
				}
			}
			if st.LogicalBytes != logical {
				m.fatalf("logical bytes %d, want %d", st.LogicalBytes, logical)
			}
		}
	}
	if err := checkInvariants(m.pool); err != nil {
		m.fatalf("invariant: %v", err)
	}
}

func kind(x *RefHandle) string {
	if x.Head != nil {
		return "head"
	}
	return "snapshot"
}

// TestModel runs the model-based test for several seeds.
func TestModel(t *testing.T) {
	steps := modelSteps(t, 1000)
	seeds := []uint64{1, 2, 3, 4}
	if n, ok := statetest.Seed(); ok {
		seeds = []uint64{n}
	} else if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed, steps, 0) })
	}
	// Under pressure: a pool of a few dozen blocks, where allocations
	// evict optional state and fail with ErrNoMemory.
	for _, seed := range seeds {
		t.Run(fmt.Sprint("pressure/", seed), func(t *testing.T) { runModel(t, seed, steps, 48+16*int64(seed%3)) })
	}
	// A pool whose block sizes follow each layout's rows (BlockBytes 0),
	// under pressure too.
	for _, seed := range seeds {
		t.Run(fmt.Sprint("rowsized/", seed), func(t *testing.T) { runModel(t, seed, steps, -int64(64+32*(seed%3))) })
	}
}

// TestModelOnHostMemory: TestModel's pools are over a Faults wrapper,
// which is not the host backend, so its blocks are never host-mapped and
// none of the built-in copy paths (hostcopy.go, hostInPlace,
// visibleOnHost, readHost, the history's copies) run there. This runs the
// same model over device.Host() itself.
func TestModelOnHostMemory(t *testing.T) {
	steps := modelSteps(t, 1000)
	seeds := []uint64{1, 2, 3, 4, 5, 6}
	if n, ok := statetest.Seed(); ok {
		seeds = []uint64{n}
	} else if testing.Short() {
		seeds = seeds[:2]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModelOn(t, seed, steps, 0, true) })
		t.Run(fmt.Sprint("pressure/", seed), func(t *testing.T) { runModelOn(t, seed, steps, 48+16*int64(seed%3), true) })
		t.Run(fmt.Sprint("rowsized/", seed), func(t *testing.T) { runModelOn(t, seed, steps, -int64(64+32*(seed%3)), true) })
	}
}

// runModel runs one seed; maxBlocks, when not zero, caps the pool; when
// negative, the pool's blocks follow the rows (BlockBytes 0) and its cap is
// -maxBlocks KiB.
func runModel(t *testing.T, seed uint64, steps int, maxBlocks int64) {
	runModelOn(t, seed, steps, maxBlocks, false)
}

// runModelOn is runModel with the pool over the host backend itself when
// direct: its blocks are then the process's memory (Block.Host), and
// every copy takes the built-in path, where a pool over the faults
// wrapper makes the backend's calls; the model's span writes still go
// through the wrapper, whose faults then never fire.
func runModelOn(t *testing.T, seed uint64, steps int, maxBlocks int64, direct bool) {
	// Odd seeds run on the host backend, even ones on an arena whose
	// allocations lie back to back.
	var base device.Backend = device.Host()
	if seed%2 == 0 && !direct {
		base = statetest.NewArena(32 << 20)
	}
	fb := statetest.NewFaults(base)
	var pb device.Backend = fb
	if direct {
		pb = base
	}
	blockBytes := []int{256, 512, 1024}[seed%3]
	if maxBlocks == 0 {
		maxBlocks = int64(800 + seed%3*400)
	}
	opt := PoolOptions{BlockBytes: blockBytes, MaxBytes: int64(blockBytes) * maxBlocks}
	if maxBlocks < 0 {
		opt = PoolOptions{MaxBytes: -maxBlocks << 10}
	}
	p, err := NewPool(pb, opt)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	m := &model{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), fb: fb, pool: p, other: other,
		owners: []Owner{"alice", "bob"}, counts: map[string]int{}}
	// A foreign snapshot per owner, from another pool.
	for _, o := range m.owners {
		l := &Layout{Type: "Foreign", Columns: []Column{{Name: "A", ElemSize: 4, Width: 1}}}
		h, err := other.NewHead(l, o)
		if err != nil {
			t.Fatal(err)
		}
		s, err := h.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		m.foreign = append(m.foreign, NewRefLineage(o, l).Snap(s, 0, [][]byte{{}}))
		h.Release()
	}
	ops := []struct {
		name   string
		weight int
		f      func()
	}{
		{"new head", 2, m.newHead},
		{"append", 10, m.appendRows},
		{"write", 10, m.writeRows},
		{"append device", 4, m.appendDevice},
		{"write device", 4, m.writeDevice},
		{"snapshot", 6, m.snapshot},
		{"branch", 3, m.branch},
		{"merge", 3, m.merge},
		{"rollback", 5, m.rollback},
		{"release", 4, m.release},
		{"trim", 1, m.trim},
		{"read head", 3, func() {
			if x := m.pick(m.heads); x != nil {
				m.read(x)
			}
		}},
		{"read snapshot", 3, func() {
			if x := m.pick(m.snaps); x != nil {
				m.read(x)
			}
		}},
		{"read rows", 3, func() {
			if x := m.pick(append(m.heads[:len(m.heads):len(m.heads)], m.snaps...)); x != nil {
				m.readRows(x)
			}
		}},
	}
	releaseOp := slices.IndexFunc(ops, func(o struct {
		name   string
		weight int
		f      func()
	}) bool {
		return o.name == "release"
	})
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	for m.step = 0; m.step < steps; m.step++ {
		k := m.rng.IntN(total)
		i := 0
		for k >= ops[i].weight {
			k -= ops[i].weight
			i++
		}
		if len(m.heads)+len(m.snaps) > 60 {
			i = releaseOp // keep the population, and the cost of a step, bounded
		}
		m.lastOp = ops[i].name
		// Now and then a backend call fails: the step must then change
		// nothing, which verify checks against the unchanged model.
		armed := m.rng.IntN(4) == 0
		if armed {
			fb.Arm(statetest.Op(1+m.rng.IntN(int(statetest.OpAll))), m.rng.IntN(4))
		}
		before := p.Stats()
		m.failed = false
		ops[i].f()
		if fired := fb.Disarm(); fired && m.failed {
			after := p.Stats()
			if after.EvictedBytes != before.EvictedBytes {
				// Eviction took optional state before the fault: a change
				// verify checks handle by handle.
			} else if after.PhysicalBytes != before.PhysicalBytes || after.LogicalBytes != before.LogicalBytes || after.Live != before.Live {
				m.fatalf("a failed call changed the pool: physical %d -> %d, logical %d -> %d, live %d -> %d",
					before.PhysicalBytes, after.PhysicalBytes, before.LogicalBytes, after.LogicalBytes, before.Live, after.Live)
			}
		}
		m.verify()
	}
	keys := make([]string, 0, len(m.counts))
	for k := range m.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-40s %d", k, m.counts[k])
	}
	for _, list := range [][]*RefHandle{m.heads, m.snaps} {
		for _, x := range list {
			if x.Head != nil {
				x.Head.Release()
			} else {
				x.Snap.Release()
			}
		}
	}
	st := p.Stats()
	if st.PhysicalBytes != 0 || st.LogicalBytes != 0 || st.Live != 0 {
		t.Fatalf("seed %d: after releasing everything: %+v", seed, st)
	}
	if _, err := p.Trim(); err != nil {
		t.Fatalf("seed %d: trim: %v", seed, err)
	}
	if st := p.Stats(); st.ReservedBytes != 0 || st.Slabs != 0 || st.FreeBlocks != 0 {
		t.Fatalf("seed %d: after releasing everything and Trim: %+v", seed, st)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, x := range m.foreign {
		x.Snap.Release()
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
}
