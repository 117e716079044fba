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
// store and on a plain reference model that copies everything, and
// compares after every step the content, version, rows and errors of every
// handle. -model.steps sets the steps per seed, -model.seed runs one seed
// (main_test.go); a failure prints the command that replays it.

type mLineage struct {
	owner  Owner
	layout *Layout
	last   Version
	parent map[Version]Version // every version but 0
}

func (l *mLineage) isAncestor(a, b Version) bool {
	for {
		if a == b {
			return true
		}
		if b == 0 {
			return false
		}
		b = l.parent[b]
	}
}

// path returns b and its ancestors.
func (l *mLineage) path(b Version) map[Version]bool {
	out := map[Version]bool{b: true}
	for b != 0 {
		b = l.parent[b]
		out[b] = true
	}
	return out
}

type mHandle struct {
	lin      *mLineage
	head     *Head // one of head, snap
	snap     *Snap
	cols     [][]byte
	v        Version
	released bool
	invalid  bool
	evicted  bool // seen answering ErrEvicted: optional state the pool took
}

func (m *mHandle) rows() int {
	rb := m.lin.layout.Columns[0].RowBytes()
	return len(m.cols[0]) / rb
}

func cloneCols(cols [][]byte) [][]byte {
	out := make([][]byte, len(cols))
	for i, c := range cols {
		out[i] = bytes.Clone(c)
		if out[i] == nil {
			out[i] = []byte{}
		}
	}
	return out
}

type model struct {
	t       *testing.T
	seed    uint64
	step    int
	rng     *rand.Rand
	fb      *statetest.Faults
	pool    *Pool
	other   *Pool // a second pool, for foreign handles
	heads   []*mHandle
	snaps   []*mHandle
	foreign []*mHandle // handles of other
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

func (m *model) pick(list []*mHandle) *mHandle {
	if len(list) == 0 {
		return nil
	}
	return list[m.rng.IntN(len(list))]
}

// pickHead returns a head, mostly one of growth g.
func (m *model) pickHead(g Growth) *mHandle {
	if m.rng.IntN(5) > 0 {
		var fit []*mHandle
		for _, x := range m.heads {
			if x.lin.layout.Growth == g {
				fit = append(fit, x)
			}
		}
		if len(fit) > 0 {
			return m.pick(fit)
		}
	}
	return m.pick(m.heads)
}

// state returns the error a call on x answers before anything else.
func stateErr(x *mHandle) error {
	if x.released {
		return ErrReleased
	}
	if x.invalid {
		return ErrInvalidated
	}
	if x.evicted {
		return ErrEvicted
	}
	return nil
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
	lin := &mLineage{owner: owner, layout: l, parent: map[Version]Version{}}
	x := &mHandle{lin: lin, head: h, cols: make([][]byte, len(l.Columns))}
	for i, c := range l.Columns {
		if l.Growth == Mutable {
			x.cols[i] = make([]byte, l.Bound*c.RowBytes())
		} else {
			x.cols[i] = []byte{}
		}
	}
	m.heads = append(m.heads, x)
}

// commit records a new version of x with content cols.
func (m *model) commit(x *mHandle, cols [][]byte) {
	x.lin.last++
	x.lin.parent[x.lin.last] = x.v
	x.v = x.lin.last
	x.cols = cols
}

func (m *model) appendRows() {
	x := m.pickHead(Append)
	if x == nil {
		return
	}
	l := x.lin.layout
	n := m.rng.IntN(40)
	cols := m.randBatch(l, n)
	want := stateErr(x)
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
		if l.Growth == Mutable || (l.Bound > 0 && x.rows()+n > l.Bound) || (l.Window > 0 && n > l.Window) {
			want = ErrBound
		}
	}
	err := x.head.Append(cols)
	if want == nil && faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, want)
	if err == nil {
		next := cloneCols(x.cols)
		for i := range next {
			next[i] = append(next[i], cols[i]...)
		}
		m.commit(x, next)
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
	l := x.lin.layout
	rows := x.rows()
	n := m.rng.IntN(max(rows/2, 1) + 2)
	at := m.rng.IntN(rows+2) - 1
	cols := m.randBatch(l, n)
	want := stateErr(x)
	if m.rng.IntN(20) == 0 && len(cols) > 1 && n > 0 {
		cols[0] = cols[0][:len(cols[0])-l.Columns[0].RowBytes()]
		want = cmpErr(want, ErrShape)
	}
	if want == nil && (l.Growth != Mutable || at < 0 || at+n > rows) {
		want = ErrRange
	}
	err := x.head.Write(at, cols)
	if want == nil && faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, want)
	if err == nil {
		next := cloneCols(x.cols)
		for i, c := range l.Columns {
			copy(next[i][at*c.RowBytes():], cols[i])
		}
		m.commit(x, next)
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
	l := x.lin.layout
	n := m.rng.IntN(40) - 1
	want := stateErr(x)
	if want == nil {
		switch {
		case l.Growth == Mutable:
			want = ErrBound
		case n < 0:
			want = ErrRange
		case l.Bound > 0 && x.rows()+n > l.Bound, l.Window > 0 && n > l.Window:
			want = ErrBound
		}
	}
	spans, err := x.head.AppendDevice(n)
	if want == nil && faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, want)
	if err == nil {
		from := x.rows()
		added := m.fill(l, spans, from, from+n, m.randBatch(l, n), true)
		next := cloneCols(x.cols)
		for i := range next {
			next[i] = append(next[i], added[i]...)
		}
		m.commit(x, next)
	}
}

func (m *model) writeDevice() {
	x := m.pickHead(Mutable)
	if x == nil {
		return
	}
	l := x.lin.layout
	rows := x.rows()
	from := m.rng.IntN(rows+2) - 1
	to := from + m.rng.IntN(max(rows/2, 1)+2) - 1
	want := stateErr(x)
	if want == nil && (l.Growth != Mutable || from < 0 || to < from || to > rows) {
		want = ErrRange
	}
	spans, err := x.head.WriteDevice(from, to)
	if want == nil && faulted(err) {
		m.count(err)
		return
	}
	m.expect(err, want)
	if err == nil {
		base := make([][]byte, len(l.Columns))
		for i, c := range l.Columns {
			base[i] = x.cols[i][from*c.RowBytes() : to*c.RowBytes()]
		}
		written := m.fill(l, spans, from, to, base, false)
		next := cloneCols(x.cols)
		for i, c := range l.Columns {
			copy(next[i][from*c.RowBytes():], written[i])
		}
		m.commit(x, next)
	}
}

func (m *model) snapshot() {
	x := m.pick(m.heads)
	if x == nil {
		return
	}
	s, err := x.head.Snapshot()
	m.expect(err, stateErr(x))
	if err == nil {
		m.snaps = append(m.snaps, &mHandle{lin: x.lin, snap: s, cols: cloneCols(x.cols), v: x.v})
	}
}

func (m *model) branch() {
	x := m.pick(m.heads)
	if x == nil {
		return
	}
	c, err := x.head.Branch()
	m.expect(err, stateErr(x))
	if err == nil {
		m.heads = append(m.heads, &mHandle{lin: x.lin, head: c, cols: cloneCols(x.cols), v: x.v})
	}
}

func (m *model) merge() {
	x, c := m.pick(m.heads), m.pick(m.heads)
	if x == nil {
		return
	}
	if m.rng.IntN(4) > 0 {
		var kin []*mHandle
		for _, y := range m.heads {
			if y.lin == x.lin && y != x {
				kin = append(kin, y)
			}
		}
		if len(kin) > 0 {
			c = m.pick(kin)
		}
	}
	var want error
	switch {
	case x.released: // before the argument is looked at
		want = ErrReleased
	case c.lin.owner != x.lin.owner:
		want = ErrOwner
	case c.lin != x.lin:
		want = ErrDiverged
	case c == x:
		want = stateErr(x)
	case x.released || c.released:
		want = ErrReleased
	case x.invalid || c.invalid:
		want = ErrInvalidated
	case x.evicted || c.evicted:
		want = ErrEvicted
	case !x.lin.isAncestor(x.v, c.v):
		want = ErrDiverged
	}
	err := x.head.Merge(c.head)
	m.expect(err, want)
	if err == nil {
		x.v, x.cols = c.v, cloneCols(c.cols)
	}
}

func (m *model) rollback() {
	x := m.pick(m.heads)
	if x == nil {
		return
	}
	var to *mHandle
	// Mostly an ancestor snapshot of x's own lineage.
	var mine []*mHandle
	for _, s := range m.snaps {
		if s.lin == x.lin && !s.released && !s.invalid && s.lin.isAncestor(s.v, x.v) {
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
	case x.released: // before the argument is looked at
		want = ErrReleased
	case to.lin.owner != x.lin.owner:
		want = ErrOwner
	case x.invalid:
		want = ErrInvalidated
	case x.evicted:
		want = ErrEvicted
	case to.released:
		want = ErrReleased
	case to.invalid:
		want = ErrInvalidated
	case to.evicted:
		want = ErrEvicted
	case to.lin != x.lin || !x.lin.isAncestor(to.v, x.v):
		want = ErrNotAncestor
	}
	err := x.head.Rollback(to.snap)
	m.expect(err, want)
	if err != nil {
		return
	}
	if x.lin.layout.Descendants == Invalidate {
		gone := x.lin.path(x.v)
		for v := range x.lin.path(to.v) {
			delete(gone, v)
		}
		for _, list := range [][]*mHandle{m.heads, m.snaps} {
			for _, y := range list {
				if y == x || y.lin != x.lin || y.released {
					continue
				}
				for v := range y.lin.path(y.v) {
					if gone[v] {
						y.invalid = true
						break
					}
				}
			}
		}
	}
	x.v, x.cols = to.v, cloneCols(to.cols)
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
	if x.head != nil {
		err = x.head.Release()
	} else {
		err = x.snap.Release()
	}
	m.expect(err, nil)
	x.released = true
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
func (m *model) read(x *mHandle) {
	l := x.lin.layout
	rows := x.rows()
	from := m.rng.IntN(rows+2) - 1
	to := from + m.rng.IntN(rows+2) - 1
	want := stateErr(x)
	if want == nil && (from < 0 || to < from || to > rows) {
		want = ErrRange
	}
	if want == nil && from < x.floor() && from < to {
		want = ErrExpired
	}
	dst := make([][]byte, len(l.Columns))
	for i, c := range l.Columns {
		dst[i] = make([]byte, max(to-from, 0)*c.RowBytes())
	}
	var err error
	if x.head != nil {
		err = x.head.Read(from, to, dst)
	} else {
		err = x.snap.Read(from, to, dst)
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
		if want := x.cols[i][from*c.RowBytes() : to*c.RowBytes()]; !bytes.Equal(dst[i], want) {
			m.fatalf("rows [%d, %d) of column %d differ", from, to, i)
		}
	}
}

// verify compares every live handle with the model: content, rows,
// version, stats, and the structure's invariants.
func (m *model) verify() {
	m.t.Helper()
	for _, list := range [][]*mHandle{m.heads, m.snaps} {
		for _, x := range list {
			if x.released {
				continue
			}
			var st Stats
			var err error
			l := x.lin.layout
			rows, floor := x.rows(), x.floor()
			dst := make([][]byte, len(l.Columns))
			for i, c := range l.Columns {
				dst[i] = make([]byte, (rows-floor)*c.RowBytes())
			}
			var v Version
			var n, oldest int
			if x.head != nil {
				st, v, n, oldest = x.head.Stats(), x.head.Version(), x.head.Len(), x.head.Oldest()
				err = x.head.Read(floor, rows, dst)
			} else {
				st, v, n, oldest = x.snap.Stats(), x.snap.Version(), x.snap.Len(), x.snap.Oldest()
				err = x.snap.Read(floor, rows, dst)
			}
			if x.invalid {
				if !errors.Is(err, ErrInvalidated) {
					m.fatalf("invalidated handle reads with %v", err)
				}
				continue
			}
			if errors.Is(err, ErrEvicted) && !x.evicted {
				// The pool took it under pressure: only optional state
				// may go, and from now on every call answers ErrEvicted.
				if l.Retention != Optional {
					m.fatalf("%s %v state evicted", l.Retention, kind(x))
				}
				x.evicted = true
				m.counts["evicted "+kind(x)]++
			}
			if x.evicted {
				if !errors.Is(err, ErrEvicted) {
					m.fatalf("evicted handle reads with %v", err)
				}
				continue
			}
			if err != nil {
				m.fatalf("read: %v", err)
			}
			if v != x.v || st.Version != x.v || n != rows || st.Rows != rows {
				m.fatalf("version %d (stats %d), rows %d (stats %d); model: version %d, rows %d", v, st.Version, n, st.Rows, x.v, rows)
			}
			if oldest != floor {
				m.fatalf("oldest row %d, model %d", oldest, floor)
			}
			m.checkWindow(x, st)
			var logical int64
			for i, c := range l.Columns {
				logical += int64((rows - floor) * c.RowBytes())
				if !bytes.Equal(dst[i], x.cols[i][floor*c.RowBytes():]) {
					m.fatalf("column %d of %v at version %d differs from the model", i, kind(x), x.v)
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

func kind(x *mHandle) string {
	if x.head != nil {
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

// runModel runs one seed; maxBlocks, when not zero, caps the pool; when
// negative, the pool's blocks follow the rows (BlockBytes 0) and its cap is
// -maxBlocks KiB.
func runModel(t *testing.T, seed uint64, steps int, maxBlocks int64) {
	// Odd seeds run on the host backend, even ones on an arena whose
	// allocations lie back to back.
	var base device.Backend = device.Host()
	if seed%2 == 0 {
		base = statetest.NewArena(32 << 20)
	}
	fb := statetest.NewFaults(base)
	blockBytes := []int{256, 512, 1024}[seed%3]
	if maxBlocks == 0 {
		maxBlocks = int64(800 + seed%3*400)
	}
	opt := PoolOptions{BlockBytes: blockBytes, MaxBytes: int64(blockBytes) * maxBlocks}
	if maxBlocks < 0 {
		opt = PoolOptions{MaxBytes: -maxBlocks << 10}
	}
	p, err := NewPool(fb, opt)
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
		m.foreign = append(m.foreign, &mHandle{lin: &mLineage{owner: o, layout: l}, snap: s, cols: [][]byte{{}}})
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
	for _, list := range [][]*mHandle{m.heads, m.snaps} {
		for _, x := range list {
			if x.head != nil {
				x.head.Release()
			} else {
				x.snap.Release()
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
		x.snap.Release()
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
}
