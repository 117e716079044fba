package store_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/store"
)

// The interaction model's steps on versions (snapshot, branch, merge, rollback,
// release), on tables, streams and history, and its checks.

// runStep runs one step with faults armed now and then, and checks what
// a failed call must leave alone, then every handle.
func (m *interaction) runStep(name string, f func()) {
	m.op = name
	if name != "probe" && m.rng.IntN(4) == 0 {
		m.be.arm(backendOp(1+m.rng.IntN(int(mAll))), m.rng.IntN(6))
	}
	m.mark()
	m.need, m.skipping, m.cur, m.held = 0, false, nil, nil
	m.protect(name, f)
	fired := m.be.disarm()
	if m.faulted && !m.skipping {
		m.protect(name, func() { m.checkFailed(m.before, fired) })
	}
	for _, st := range m.streams {
		st.Sync() // kernels land before the rows are compared
	}
	m.protect("verify", m.verify)
}

// mark takes the pool's figures that a failing call must leave as they
// are: at the start of a step, and before the last call of a step that
// makes several.
func (m *interaction) mark() {
	m.before, m.faulted, m.lastErr = m.pool.Stats(), false, nil
}

// nextCall ends a call of a step that makes several: when it failed, it
// checks what the failure must leave alone, then marks for the next call.
func (m *interaction) nextCall() {
	if m.faulted && !m.skipping {
		m.checkFailed(m.before, m.be.hasFired())
	}
	m.mark()
}

// protect runs f: a panic fails the model as its own defect class, and a
// skipped failure ends the step.
func (m *interaction) protect(what string, f func()) {
	m.t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if _, ok := r.(skipStep); ok {
			m.be.disarm()
			return
		}
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(skipStep); !ok {
					panic(r)
				}
			}
		}()
		m.panicked(what, r)
	}()
	f()
}

// checkFailed checks a step whose call failed: with no eviction, the pool
// holds what it held; a call that fails for memory evicts nothing, and
// fails only when the pool is more than half full.
func (m *interaction) checkFailed(before store.PoolStats, fired bool) {
	after := m.pool.Stats()
	// A move to the host tier is an eviction here, and a return from it
	// a rebuild: it stands even when the call then fails.
	moved := after.TierOut != before.TierOut
	evicted := after.EvictedBytes != before.EvictedBytes || moved
	// A rebuild of an evicted reconstructable head (at the start of a
	// call) stands even when the call then fails, and so does what it
	// evicted to make its room: an At that rebuilt its head, evicting
	// optional state, then found no room for the version it rebuilds.
	rebuilt := after.RebuiltBytes != before.RebuiltBytes || after.TierIn != before.TierIn
	if !fired && errors.Is(m.lastErr, store.ErrNoMemory) {
		if evicted && !rebuilt {
			m.fail("eviction by a call that failed (ErrNoMemory after evicting optional state)",
				"evicted %d bytes (moved %d to the host tier, which dropped %d), then failed: %v", after.EvictedBytes-before.EvictedBytes,
				after.TierOut-before.TierOut, after.TierDropped-before.TierDropped, m.lastErr)
		}
		used := before.PhysicalBytes - before.CachedBytes
		if m.need > 0 && used+before.PendingBytes+m.need <= m.capB/2 {
			class := "ErrNoMemory under half the cap (size classes fragment MaxBytes)"
			if before.PendingBytes > 0 || after.PendingBytes > 0 {
				class = "ErrNoMemory while blocks are pending behind a kernel"
			}
			m.fail(class, "%d bytes in use, %d pending, about %d wanted, cap %d: %v",
				used, before.PendingBytes, m.need, m.capB, m.lastErr)
		}
	}
	if !evicted && !rebuilt && (after.PhysicalBytes != before.PhysicalBytes || after.LogicalBytes != before.LogicalBytes || after.Live != before.Live) {
		class := "a failed call changed the pool (a block leaked or was kept)"
		switch {
		case m.op == "at":
			class = "a failed reconstruction (At) leaked a block"
		case strings.Contains(fmt.Sprint(m.lastErr), "RecordStream") && after.Live == before.Live:
			class = "a failed RecordStream changed the blocks held (its opening took or freed them)"
		}
		m.fail(class,
			"physical %d -> %d, logical %d -> %d, live %d -> %d: %v", before.PhysicalBytes, after.PhysicalBytes,
			before.LogicalBytes, after.LogicalBytes, before.Live, after.Live, m.lastErr)
	}
}

func (m *interaction) snapshot() {
	x := m.pickHead("")
	if x == nil {
		return
	}
	s, err := x.Head.Snapshot()
	if m.expect(err, x.StateErr()) {
		m.snaps = append(m.snaps, &ref{RefHandle: x.Snapshot(s), lin: x.lin, toks: x.toks})
	}
}

func (m *interaction) branch() {
	x := m.pickHead("")
	if x == nil {
		return
	}
	c, err := x.Head.Branch()
	if m.expect(err, x.StateErr()) {
		m.heads = append(m.heads, &ref{RefHandle: x.Branch(c), lin: x.lin, toks: x.toks})
	}
}

func (m *interaction) merge() {
	x := m.pickHead("")
	if x == nil {
		return
	}
	var kin []*ref
	for _, y := range m.heads {
		if y.lin == x.lin && y != x && !y.Released {
			kin = append(kin, y)
		}
	}
	c := m.pick(kin)
	if c == nil {
		return
	}
	want := x.StateErr()
	if want == nil {
		want = c.StateErr()
	}
	if want == nil && !x.CanMerge(c.RefHandle) {
		want = store.ErrDiverged
	}
	if m.expect(x.Head.Merge(c.Head), want) {
		x.Merge(c.RefHandle)
		x.toks = c.toks
	}
}

func (m *interaction) rollback() {
	x := m.pickHead("")
	if x == nil {
		return
	}
	var mine []*ref
	for _, s := range m.snaps {
		if !s.Released && !s.Invalid && !s.Evicted && x.CanRollback(s.RefHandle) {
			mine = append(mine, s)
		}
	}
	to := m.pick(mine)
	if to == nil {
		return
	}
	if !m.expect(x.Head.Rollback(to.Snap), x.StateErr()) {
		return
	}
	x.Rollback(to.RefHandle) // invalidates what the rollback drops
	x.toks = to.toks
}

func (m *interaction) release() {
	list := &m.heads
	if m.rng.IntN(2) == 0 {
		list = &m.snaps
	}
	x := m.pick(*list)
	if x == nil {
		return
	}
	m.releaseRef(x)
	*list = removeRef(*list, x)
}

func (m *interaction) releaseRef(x *ref) {
	if m.rng.IntN(2) == 0 {
		for _, t := range x.tables {
			m.expect(t.Release(), nil)
		}
	}
	var err error
	if x.Head != nil {
		err = x.Head.Release()
	} else {
		err = x.Snap.Release()
	}
	m.expect(err, nil)
	x.Release()
	x.tables = nil
}

func removeRef(list []*ref, x *ref) []*ref {
	for i, y := range list {
		if y == x {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// blockTable takes a table of a head or snapshot, or releases one.
func (m *interaction) blockTable() {
	x := m.pick(append(append([]*ref{}, m.heads...), m.snaps...))
	if x == nil || x.Released {
		return
	}
	if len(x.tables) >= 2 {
		t := x.tables[0]
		x.tables = x.tables[1:]
		m.expect(t.Release(), nil)
		return
	}
	var t *store.BlockTable
	var err error
	if x.Head != nil {
		t, err = x.Head.BlockTable()
	} else {
		t, err = x.Snap.BlockTable()
	}
	if m.expect(err, x.StateErr()) {
		x.tables = append(x.tables, t)
	}
}

// recordStream records a model stream on a handle, or a stream of another
// backend, which must be refused.
func (m *interaction) recordStream() {
	x := m.pick(append(append([]*ref{}, m.heads...), m.snaps...))
	if x == nil || x.Released {
		return
	}
	rec := func(st device.Stream) error {
		if x.Head != nil {
			return x.Head.RecordStream(st)
		}
		return x.Snap.RecordStream(st)
	}
	if m.rng.IntN(3) == 0 {
		if err := rec(m.foreign); err == nil {
			m.fail("RecordStream accepted another backend's stream", "%s of %s", x.Kind(), x.lin.Layout.Type)
		}
		return
	}
	m.expect(rec(m.stream()), x.StateErr())
}

// ancestorVersion picks a version of x's own ancestry.
func (m *interaction) ancestorVersion(x *ref) store.Version {
	var vs []store.Version
	for v := range x.lin.Path(x.V) {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs[m.rng.IntN(len(vs))]
}

// at reconstructs a version of a checkpointed head and checks its rows.
func (m *interaction) at() {
	x := m.pickHead("ckpt")
	if x == nil || x.StateErr() != nil {
		return
	}
	v := m.ancestorVersion(x)
	m.need = m.needRows(x.lin.Layout, x.lin.Layout.Bound)
	s, err := x.Head.At(v)
	if errors.Is(err, store.ErrNotRetained) {
		m.counts["at: not retained"]++
		return
	}
	if !m.expect(err, nil) {
		return
	}
	// The head's own version is the last with its rows (a mutable head
	// always has Bound): VersionAt answers it from the history.
	if vv, err := x.Head.VersionAt(x.Rows()); m.expect(err, nil) && vv != x.V {
		m.fail("VersionAt answers another version", "VersionAt(%d) = %d, the head is at %d", x.Rows(), vv, x.V)
	}
	y := &ref{RefHandle: x.At(s, v), lin: x.lin, fromAt: true}
	if s.Version() != v {
		m.fail("At answers another version", "At(%d) is at %d", v, s.Version())
	}
	dst := make([][]byte, len(y.Cols))
	for i := range dst {
		dst[i] = make([]byte, len(y.Cols[i]))
	}
	if err := s.Read(0, y.Rows(), dst); faultErr(err) {
		m.snaps = append(m.snaps, y) // verify reads it again, with no fault
		return
	} else if err != nil {
		m.fail("At's snapshot unreadable", "%v", err)
	}
	for i := range dst {
		if !bytes.Equal(dst[i], y.Cols[i]) {
			s.Release() // to look past it
			class := "At reconstructs other rows than the version held"
			if x.lin.gated {
				class = staleDeltaClass
			}
			m.fail(class, "At(%d), column %d, %d rows", v, i, y.Rows())
		}
	}
	m.snaps = append(m.snaps, y)
}

// stepHead runs a host step function on a checkpointed head (the tier's
// seeds): it rewrites every row from the rows before and an input, which
// the history keeps; At rebuilds the version by running it again.
func (m *interaction) stepHead() {
	x := m.pickHead("ckpt")
	if x == nil {
		return
	}
	in := [][]byte{m.randBytes(1 + m.rng.IntN(4))}
	m.need = m.needRows(x.lin.Layout, x.lin.Layout.Bound)
	verify := m.rng.IntN(2) == 0
	switch k := m.rng.IntN(8); {
	case k == 0:
		// A step that writes its rows in place, then fails: the head
		// stays as it was (the version before rebuilt by replay).
		err := x.Head.StepHost(in, verify, modelStepFails)
		if want := x.StateErr(); want != nil || !errors.Is(err, errModelStep) {
			m.expect(err, want)
		}
	case m.expect(x.Head.StepHost(in, verify, []func(rows, in [][]byte) ([][]byte, error){modelStep, modelStepOwn}[k%2]), x.StateErr()):
		next := cloneCols(x.Cols)
		stepRows(next, in)
		x.Commit(next)
	}
}

// modelStep is the model's step function: stepRows, in place.
func modelStep(rows, in [][]byte) ([][]byte, error) {
	stepRows(rows, in)
	return rows, nil
}

// modelStepOwn is modelStep handing back rows of its own, which the
// runtime copies into the state's.
func modelStepOwn(rows, in [][]byte) ([][]byte, error) {
	next := make([][]byte, len(rows))
	for c, col := range rows {
		next[c] = bytes.Clone(col)
	}
	stepRows(next, in)
	return next, nil
}

// errModelStep is modelStepFails's error.
var errModelStep = errors.New("the model's step failed on purpose")

// modelStepFails is modelStep, then a failure.
func modelStepFails(rows, in [][]byte) ([][]byte, error) {
	stepRows(rows, in)
	return nil, errModelStep
}

// stepRows makes every byte b at index k of column c b*5 + in[0][k%len(in[0])] + c.
func stepRows(cols, in [][]byte) {
	for c, col := range cols {
		for k := range col {
			col[k] = col[k]*5 + in[0][k%len(in[0])] + byte(c)
		}
	}
}

// plan asks for a plan, which reconstructs nothing: it evicts nothing.
func (m *interaction) plan() {
	x := m.pickHead("ckpt")
	if x == nil || x.StateErr() != nil {
		return
	}
	before := m.pool.Stats()
	_, err := x.Head.Plan(m.ancestorVersion(x))
	if !errors.Is(err, store.ErrNotRetained) {
		m.expect(err, nil)
	}
	// Plan's opening rebuilds an evicted reconstructable head, or brings
	// a head back from the host tier, as every call's does, and that
	// allocation may evict: only Plan's own work must not.
	if after := m.pool.Stats(); after.EvictedBytes != before.EvictedBytes && after.RebuiltBytes == before.RebuiltBytes && after.TierIn == before.TierIn {
		m.fail("Plan evicted optional state", "evicted %d bytes", after.EvictedBytes-before.EvictedBytes)
	}
}

func (m *interaction) trim() {
	before := m.pool.Stats()
	n, err := m.pool.Trim()
	if !m.expect(err, nil) {
		return
	}
	after := m.pool.Stats()
	if after.ReservedBytes != before.ReservedBytes-n || after.PhysicalBytes != before.PhysicalBytes {
		m.fail("Trim changed what is in use", "gave back %d: reserved %d -> %d, physical %d -> %d",
			n, before.ReservedBytes, after.ReservedBytes, before.PhysicalBytes, after.PhysicalBytes)
	}
}

// read reads a random range of a handle, expired rows included.
func (m *interaction) read() {
	x := m.pick(append(append([]*ref{}, m.heads...), m.snaps...))
	if x == nil {
		return
	}
	rows := x.Rows()
	from := m.rng.IntN(rows + 1)
	to := from + m.rng.IntN(rows-from+1)
	want := x.StateErr()
	if want == nil && from < x.Floor() && from < to {
		want = store.ErrExpired
	}
	dst := make([][]byte, len(x.lin.Layout.Columns))
	for i, c := range x.lin.Layout.Columns {
		dst[i] = make([]byte, (to-from)*c.RowBytes())
	}
	// Every third read leaves a column out (ReadColumns), and every third
	// reads on a model stream (ReadAsync, in stream order after the head's
	// AppendAsync copies on any stream); the step number picks, not rng,
	// so that the seeds' steps stay as they were.
	var err error
	switch {
	case m.step%3 == 1:
		dst[m.step%len(dst)] = nil
		err = x.readColumns(from, to, dst)
	case m.step%3 == 2 && m.held == nil && len(m.streams) > 0:
		st := m.streams[m.step%len(m.streams)]
		m.counts["read: async"]++
		if err = x.readAsync(st, from, to, dst); err == nil {
			err = st.Sync()
		}
	default:
		err = x.read(from, to, dst)
	}
	if !m.expect(err, want) {
		return
	}
	for i, c := range x.lin.Layout.Columns {
		if dst[i] == nil {
			continue // left out
		}
		if !bytes.Equal(dst[i], x.Cols[i][from*c.RowBytes():to*c.RowBytes()]) {
			m.fail(m.contentClass(x), "rows [%d, %d) of column %d of a %s", from, to, i, x.Kind())
		}
	}
}

func (x *ref) read(from, to int, dst [][]byte) error {
	if x.Head != nil {
		return x.Head.Read(from, to, dst)
	}
	return x.Snap.Read(from, to, dst)
}

func (x *ref) readColumns(from, to int, dst [][]byte) error {
	if x.Head != nil {
		return x.Head.ReadColumns(from, to, dst)
	}
	return x.Snap.ReadColumns(from, to, dst)
}

func (x *ref) readAsync(st device.Stream, from, to int, dst [][]byte) error {
	if x.Head != nil {
		return x.Head.ReadAsync(st, from, to, dst)
	}
	return x.Snap.ReadAsync(st, from, to, dst)
}

// staleDeltaClass is the defect of a device write's history delta taken
// before its kernel ran: At rebuilds the rows the version had before the
// kernel.
const staleDeltaClass = "history delta captured before the kernel recorded on its stream wrote the rows (At reads stale rows; beyond issue 21's thirteen)"

func (m *interaction) contentClass(x *ref) string {
	if x.lin.gated && (x.fromAt || x.Head != nil && x.lin.Layout.Retention == store.Reconstructable && m.pool.Stats().RebuiltBytes > 0) {
		// Rows rebuilt from the history of a lineage a gated kernel
		// wrote: a snapshot At rebuilt whose own read in at() failed by
		// an injected fault, or a reconstructable head rebuilt after
		// eviction (the pool has rebuilt one; which, the model does not
		// see).
		return staleDeltaClass
	}
	if x.lin.family == "shared" {
		return "content of a shared head differs from the reference (cross-owner read or garbage prefix adopted)"
	}
	return "content differs from the reference"
}

// needRows estimates, generously, the bytes a call that writes rows of l
// takes: per column, the rows and two blocks more, or, where the model
// knows the column's blocks (blockOf), the whole blocks the rows take and
// two more. Blocks round up to 256 bytes: rows of a byte, one a block
// (BlockRows 1), take 256 bytes a row, and an estimate of the rows' bytes
// called the store's ErrNoMemory for them one under half the cap (seed
// 1223, step 8: 55 such rows, 14080 bytes of a 12288-byte cap).
func (m *interaction) needRows(l *store.Layout, rows int) int64 {
	var n int64
	for _, c := range l.Columns {
		rb := int64(c.RowBytes())
		need := int64(rows)*rb + 2*2048
		if per, bb := m.blockOf(l, c); per > 0 {
			need = max(need, int64((rows+per-1)/per+2)*bb)
		}
		n += need
	}
	return n
}

// TestInteractionNeedCoversBlocks checks the model's estimate of what a
// call takes (needRows) against what the store takes, on both of the
// model's pools: a new mutable head takes its bound's rows, in whole
// blocks. An estimate under that called the store's correct ErrNoMemory a
// defect (seed 1223: rows of one byte, one a block).
func TestInteractionNeedCoversBlocks(t *testing.T) {
	col := func(name string, elem, width int) store.Column {
		return store.Column{Name: name, ElemSize: elem, Width: width}
	}
	layouts := []*store.Layout{
		{Columns: []store.Column{col("C0", 1, 1)}, Bound: 55, BlockRows: 1},
		{Columns: []store.Column{col("C0", 8, 6)}, Bound: 64},
		{Columns: []store.Column{col("C0", 8, 6), col("C1", 1, 3)}, Bound: 40, BlockRows: 3},
		{Columns: []store.Column{col("C0", 4, 5), col("C1", 2, 1)}, Bound: 17, BlockRows: 12},
	}
	for _, seed := range []uint64{1, 2} { // a pool of 256-byte blocks, one whose blocks follow the rows
		m := newInteraction(t, seed)
		for i, l := range layouts {
			l.Type, l.Growth = fmt.Sprint("Need", i), store.Mutable
			before := m.pool.Stats().PhysicalBytes
			h, err := m.pool.NewHead(l, m.newOwner())
			if err != nil {
				t.Fatal(err)
			}
			took := m.pool.Stats().PhysicalBytes - before
			if need := m.needRows(l, l.Bound); took == 0 || need < took {
				t.Errorf("seed %d, layout %d: a new head of %d rows took %d bytes, the model estimates %d", seed, i, l.Bound, took, need)
			}
			h.Release()
		}
		if err := m.pool.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// blockOf returns the rows a block of column c of l holds, at least, and
// the block's bytes: the layout's BlockRows, in blocks rounded up to 256
// bytes; else, on a pool of fixed blocks (odd seeds, newInteraction), the
// rows of the narrowest fit over l's columns. 0 where the pool sizes the
// blocks by the rows (needRows' rows and two blocks hold them).
func (m *interaction) blockOf(l *store.Layout, c store.Column) (per int, bytes int64) {
	if l.BlockRows > 0 {
		return l.BlockRows, (int64(l.BlockRows*c.RowBytes()) + 255) &^ 255
	}
	if m.seed%2 == 0 {
		return 0, 0
	}
	bb := m.pool.BlockBytes()
	per = bb
	for _, o := range l.Columns {
		per = min(per, max(bb/o.RowBytes(), 1))
	}
	return per, int64(bb)
}

// verify compares every live handle with the reference, and its tables.
func (m *interaction) verify() {
	if err := store.CheckStreamMarks(m.pool); err != nil {
		m.fail("a stream mark says a block carries its stream, and it does not", "%v", err)
	}
	for _, list := range [][]*ref{m.heads, m.snaps} {
		for _, x := range list {
			if !x.Released {
				m.verifyOne(x)
			}
		}
	}
}

func (m *interaction) verifyOne(x *ref) {
	l := x.lin.Layout
	rows, floor := x.Rows(), x.Floor()
	dst := make([][]byte, len(l.Columns))
	for i, c := range l.Columns {
		dst[i] = make([]byte, (rows-floor)*c.RowBytes())
	}
	in := m.pool.Stats().TierIn
	err := x.read(floor, rows, dst)
	if l.Checkpoint != nil && err == nil && m.pool.Stats().TierIn != in {
		// A head with a history back from the host tier: it is checked
		// as any other, and its history goes on from there.
		m.counts[fmt.Sprintf("%v %s with a history back from the host tier", l.Retention, x.Kind())]++
	}
	switch {
	case x.Invalid:
		if !errors.Is(err, store.ErrInvalidated) {
			m.fail("rollback invalidation", "invalidated %s reads with %v", x.Kind(), err)
		}
		return
	case errors.Is(err, store.ErrEvicted) && l.Retention == store.Optional,
		errors.Is(err, store.ErrNotRetained) && l.Retention == store.Reconstructable:
		x.Evicted = true
		m.counts["evicted "+x.Kind()]++
		return
	case x.Evicted:
		m.fail("evicted state came back", "%s reads with %v", x.Kind(), err)
	case errors.Is(err, store.ErrNoMemory) && l.Retention == store.Reconstructable:
		return // its rebuild finds no room now
	case errors.Is(err, store.ErrNoMemory) && l.Retention == store.Optional && m.pool.Stats().TierBytes > 0:
		m.counts["in the host tier, no room to return"]++
		return // in the host tier, and its return finds no room now
	case err != nil:
		m.fail("mandatory state lost (read fails)", "%v %s of %s: %v", l.Retention, x.Kind(), l.Type, err)
	}
	var v store.Version
	var n int
	if x.Head != nil {
		v, n = x.Head.Version(), x.Head.Len()
	} else {
		v, n = x.Snap.Version(), x.Snap.Len()
	}
	if v != x.V || n != rows {
		m.fail("version or rows differ from the reference", "%s at version %d with %d rows, want %d with %d", x.Kind(), v, n, x.V, rows)
	}
	for i, c := range l.Columns {
		if !bytes.Equal(dst[i], x.Cols[i][floor*c.RowBytes():]) {
			m.fail(m.contentClass(x), "column %d of a %s of %s (%s) at version %d, rows [%d, %d)", i, x.Kind(), l.Type, x.lin.family, x.V, floor, rows)
		}
	}
	for _, t := range x.tables {
		m.checkTable(x, t)
	}
}

// checkTable checks that a live table locates every readable row of x.
func (m *interaction) checkTable(x *ref, t *store.BlockTable) {
	inner := m.be.Backend
	rows, floor := x.Rows(), x.Floor()
	for ci := range x.lin.Layout.Columns {
		tc, err := t.Column(ci)
		if err != nil {
			m.fail("failed block-table update not reported by the write that caused it", "%s table column %d: %v", x.Kind(), ci, err)
		}
		per, rb := tc.RowsPerBlock, tc.RowBytes
		if per <= 0 || tc.Blocks < (rows+per-1)/per {
			m.fail("block table stale", "%d entries of %d rows for %d rows", tc.Blocks, per, rows)
		}
		if rows == 0 {
			continue
		}
		if tc.First > floor/per {
			m.fail("block table stale", "the table starts at block %d; the window's first readable row %d is in block %d", tc.First, floor, floor/per)
		}
		raw := make([]byte, 8*(tc.Blocks-tc.First))
		if err := inner.CopyDtoH(raw, tc.Ptr); err != nil {
			m.fail("block table stale", "reading the table: %v", err)
		}
		for b := floor / per; b*per < rows; b++ {
			lo, hi := max(b*per, floor), min((b+1)*per, rows)
			got := make([]byte, (hi-lo)*rb)
			p := device.Ptr(binary.LittleEndian.Uint64(raw[8*(b-tc.First):])) + device.Ptr((lo-b*per)*rb)
			if err := inner.CopyDtoH(got, p); err != nil || !bytes.Equal(got, x.Cols[ci][lo*rb:hi*rb]) {
				m.fail("block table stale (an entry does not locate the handle's rows)",
					"%s of %s, column %d, entry %d (rows [%d, %d)): %v", x.Kind(), x.lin.Layout.Type, ci, b, lo, hi, err)
			}
		}
	}
}

// finish releases everything and checks that nothing is left: no block in
// use or pending, nothing reserved after Trim, a clean Close.
func (m *interaction) finish() {
	m.op = "finish"
	for _, st := range m.streams {
		st.Sync()
	}
	for _, list := range [][]*ref{m.heads, m.snaps} {
		for _, x := range list {
			m.protect("release at the end", func() { m.releaseRef(x) })
		}
	}
	keys := make([]string, 0, len(m.counts))
	for k := range m.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		m.t.Logf("%-44s %d", k, m.counts[k])
	}
	if m.broken {
		m.t.Log("no leak checks: a handle was dropped after a panic")
		return
	}
	// Forgotten prefixes that a stream used go behind a fence too: they
	// are forgotten first, then every fence is waited for.
	m.pool.ForgetPrefixes("d")
	m.pool.WaitPending()
	st := m.pool.Stats()
	if st.PhysicalBytes == 0 && st.LogicalBytes == 0 && st.Live == 0 && st.Blocks == 0 && st.PendingBytes != 0 {
		m.fail("pending blocks never returned after every handle was released and WaitPending", "%+v", st)
	}
	if st.PhysicalBytes != 0 || st.LogicalBytes != 0 || st.Live != 0 || st.PendingBytes != 0 || st.Blocks != 0 {
		m.fail("leak: blocks in use after every handle was released (a failed reconstruction keeps a block)", "%+v", st)
	}
	if st.TierBytes != 0 {
		m.fail("leak: the host tier holds bytes after every handle was released", "%+v", st)
	}
	if st.TierIn > st.TierOut || st.TierDropped > st.TierOut {
		m.fail("the host tier brought back or dropped more than it took", "%+v", st)
	}
	m.t.Logf("host tier: out %d, in %d, dropped %d bytes", st.TierOut, st.TierIn, st.TierDropped)
	if _, err := m.pool.Trim(); err != nil {
		m.fail("Trim at the end", "%v", err)
	}
	if st := m.pool.Stats(); st.ReservedBytes != 0 {
		m.fail("leak: memory reserved after every handle was released and Trim", "%+v", st)
	}
	if err := m.pool.Close(); err != nil {
		m.fail("Close at the end", "%v", err)
	}
	for _, s := range m.streams {
		s.Close()
	}
}
