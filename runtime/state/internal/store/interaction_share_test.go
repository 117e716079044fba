package store_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/store"
)

// The interaction model's shared prefixes, and kernels that read block tables.
// A shared head's rows derive from its keys (each row from every key up to
// it, as a decoder's keys and values do), so any prefix adopted from the
// cache must read as the rows the head's own keys give.

const sharedBlockRows = 16

func sharedLayout(width int) *store.Layout {
	return &store.Layout{
		Type:      "Prompt",
		Columns:   []store.Column{{Name: "KV", ElemSize: 4, Width: width}, {Name: "Token", ElemSize: 4, Width: 1}},
		Growth:    store.Append,
		Bound:     256,
		BlockRows: sharedBlockRows,
		ShareKey:  "Token",
	}
}

// copyLayout copies l, columns included: the reference's own layout.
func copyLayout(l *store.Layout) *store.Layout {
	c := *l
	c.Columns = append([]store.Column(nil), l.Columns...)
	return &c
}

// derived returns rows [from, to) of a shared layout of KV width w.
func derived(toks []int32, from, to, w int) [][]byte {
	cols := [][]byte{{}, {}}
	h := uint32(2166136261)
	for i, t := range toks[:to] {
		h = (h ^ uint32(t)) * 16777619
		if i < from {
			continue
		}
		for j := range w {
			cols[0] = binary.LittleEndian.AppendUint32(cols[0], h+uint32(j*7919)|1)
		}
		cols[1] = binary.LittleEndian.AppendUint32(cols[1], uint32(t))
	}
	return cols
}

func keyBytes(toks []int32) []byte {
	var b []byte
	for _, t := range toks {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return b
}

// template returns a prompt of a few shared beginnings, then new tokens.
func (m *interaction) template() []int32 {
	base := int32(1 + m.rng.IntN(3))
	n := m.rng.IntN(3 * sharedBlockRows)
	out := make([]int32, 0, n+8)
	for i := range n {
		out = append(out, base*1000+int32(i)+1)
	}
	return append(out, m.newTokens(m.rng.IntN(8))...)
}

func (m *interaction) newTokens(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = 900000 + m.rng.Int32N(3)
	}
	return out
}

// sharedSession starts a shared session that adopts what it can of a
// prompt and appends the rest, or extends one.
func (m *interaction) sharedSession() {
	if x := m.pickHead("shared"); x != nil && m.rng.IntN(2) == 0 {
		more := m.newTokens(1 + m.rng.IntN(20))
		if x.StateErr() != nil || len(x.toks)+len(more) > 256 {
			return
		}
		toks := append(append([]int32{}, x.toks...), more...)
		cols := derived(toks, len(x.toks), len(toks), x.lin.Layout.Columns[0].Width)
		m.need = m.needRows(x.lin.Layout, len(more))
		if m.expect(x.Head.Append(cols), nil) {
			x.toks = toks
			x.Append(cols)
		}
		return
	}
	toks := m.template()
	l := copyLayout(m.shared)
	h, err := m.pool.NewSharedHead(m.shared, m.newOwner(), "d")
	if !m.expect(err, nil) {
		return
	}
	x := newRef(h, l, "shared")
	m.heads = append(m.heads, x)
	m.nextCall()
	n, err := h.AdoptPrefix(keyBytes(toks))
	if !m.expect(err, nil) {
		return
	}
	w := l.Columns[0].Width
	if n > 0 {
		x.toks = toks[:n]
		x.Commit(derived(toks, 0, n, w))
		m.checkAdopted(x, n)
	}
	cols := derived(toks, n, len(toks), w)
	m.need = m.needRows(l, len(toks)-n)
	m.nextCall()
	if m.expect(h.Append(cols), nil) {
		x.toks = toks
		x.Append(cols)
	}
}

// checkAdopted reads the rows a head just adopted.
func (m *interaction) checkAdopted(x *ref, n int) {
	dst := [][]byte{make([]byte, n*x.lin.Layout.Columns[0].RowBytes()), make([]byte, 4*n)}
	err := x.Head.Read(0, n, dst)
	if faultErr(err) {
		return // verify reads it again, with no fault
	}
	if err != nil || !bytes.Equal(dst[0], x.Cols[0]) || !bytes.Equal(dst[1], x.Cols[1]) {
		x.Head.Release() // to look past it: the head leaves the model
		x.Release()
		m.heads = removeRef(m.heads, x)
	}
	if err != nil {
		m.fail("cross-owner read: a prefix adopted across layouts reads past its blocks", "%v", err)
	}
	switch {
	case !bytes.Equal(dst[1], x.Cols[1]):
		m.fail("garbage prefix adopted (keys a kernel had not written)", "adopted %d rows whose keys differ from the prompt's", n)
	case !bytes.Equal(dst[0], x.Cols[0]):
		m.fail("cross-owner read: a prefix adopted across layouts (one Layout value reused and widened)",
			"adopted %d rows at KV width %d whose values differ, the shared layout was widened %d times", n, x.lin.Layout.Columns[0].Width, m.widened)
	}
}

// widenShared widens the KV column of the one shared Layout value the
// model reuses: heads made from it now are of another layout, and must
// never adopt blocks of the narrower one.
func (m *interaction) widenShared() {
	if m.widened >= 3 {
		return
	}
	m.widened++
	w := m.shared.Columns[0].Width + 4
	m.shared.Columns = []store.Column{{Name: "KV", ElemSize: 4, Width: w}, {Name: "Token", ElemSize: 4, Width: 1}}
}

// sharedDeviceAppend fills whole blocks of a shared head through a kernel
// queued on a recorded stream, gated: while it has not run, the blocks hold
// no keys yet, so no prompt may adopt them; once it has, the head's own
// prompt adopts every full block the head holds.
func (m *interaction) sharedDeviceAppend() {
	x := m.pickHead("shared")
	if x == nil || x.StateErr() != nil {
		return
	}
	from := len(x.toks)
	k := sharedBlockRows - from%sharedBlockRows + sharedBlockRows*m.rng.IntN(2)
	if from+k > 256 {
		return
	}
	m.need = m.needRows(x.lin.Layout, k)
	spans, err := x.Head.AppendDevice(k)
	if !m.expect(err, nil) {
		return
	}
	toks := append(append([]int32{}, x.toks...), m.newTokens(k)...)
	cols := derived(toks, from, from+k, x.lin.Layout.Columns[0].Width)
	st := m.stream()
	g := st.gate()
	defer g.open() // a skipped failure must not leave the stream held
	m.queueCopy(st, x.lin.Layout, spans, cols)
	x.toks = toks
	x.Append(cols)
	m.nextCall()
	m.guard("RecordStream of a shared head", func() { m.expect(x.Head.RecordStream(st), nil) })
	m.nextCall()
	probe, err := m.pool.NewSharedHead(m.shared, m.newOwner(), "d")
	if m.expect(err, nil) {
		// The keys the blocks hold before the kernel ran: the host rows'
		// before from, zeros (fresh blocks) after.
		keys := append(keyBytes(toks[:from]), make([]byte, 4*k)...)
		n, err := probe.AdoptPrefix(keys)
		if err == nil && n > from/sharedBlockRows*sharedBlockRows && sameWidth(m.shared, x.lin.Layout) {
			probe.Release()
			m.pool.ForgetPrefixes("d") // to look past it: no later prompt adopts the garbage
			m.fail("prefix registered before the kernel that writes it ran (garbage keys adopted)",
				"a prompt of the keys before the kernel ran adopted %d rows, %d of them written by the kernel", n, n-from)
		}
		m.expect(probe.Release(), nil)
	}
	m.settle(st, g)
	m.checkRegistered(x)
}

func sameWidth(a, b *store.Layout) bool { return a.Columns[0].Width == b.Columns[0].Width }

// checkRegistered checks that a head's own prompt adopts every full block
// the head holds, once the kernels that wrote them are done.
func (m *interaction) checkRegistered(x *ref) {
	if !sameWidth(m.shared, x.lin.Layout) {
		return
	}
	want := len(x.toks) / sharedBlockRows * sharedBlockRows
	got := 0
	for try := 0; try < 50 && got < want; try++ {
		if try > 0 {
			time.Sleep(time.Millisecond)
		}
		if err := x.Head.Read(0, 0, [][]byte{{}, {}}); err != nil {
			return // a fault or eviction: nothing to conclude
		}
		probe, err := m.pool.NewSharedHead(m.shared, m.newOwner(), "d")
		if err != nil {
			return
		}
		got, err = probe.AdoptPrefix(keyBytes(x.toks))
		probe.Release()
		if err != nil {
			return
		}
	}
	if got < want {
		m.fail("prefix registered before the kernel that writes it ran (the real prompt adopts less than a live head holds)",
			"adopted %d of the %d rows in full blocks", got, want)
	}
}

// queueCopy queues on st a kernel that writes cols through spans.
func (m *interaction) queueCopy(st *interactionStream, l *store.Layout, spans [][]device.Span, cols [][]byte) {
	inner := m.be.Backend
	type w struct {
		p device.Ptr
		b []byte
	}
	var work []w
	for i, c := range l.Columns {
		off := 0
		for _, s := range spans[i] {
			n := s.Rows * c.RowBytes()
			work = append(work, w{s.Ptr, cols[i][off : off+n]})
			off += n
		}
	}
	st.do(func() error {
		for _, x := range work {
			if err := inner.CopyHtoD(x.p, x.b); err != nil {
				return err
			}
		}
		return nil
	})
}

// tableKernel queues, on a stream recorded on a head, a kernel that reads
// the head's first column through its block table, and before it runs
// writes the head with copy-on-write: the kernel must read the version it
// was queued at.
func (m *interaction) tableKernel() {
	x := m.pickHead([]string{"mutable", "ckpt"}[m.rng.IntN(2)])
	if x == nil || x.StateErr() != nil || x.Rows() == 0 {
		return
	}
	if len(x.tables) == 0 {
		t, err := x.Head.BlockTable()
		if !m.expect(err, nil) {
			return
		}
		x.tables = append(x.tables, t)
	}
	tc, err := x.tables[0].Column(0)
	if err != nil && faultErr(err) && m.pool.Stats().TierBytes > 0 {
		m.counts["kernel reads a table: the head's return from the host tier failed"]++
		return // Column brings the head back first, and that found no room
	}
	if errors.Is(err, store.ErrEvicted) && x.lin.Layout.Retention == store.Optional {
		// Evicted since the last verify: the table says so rather than
		// hand out the blocks eviction freed.
		x.Evicted = true
		m.counts["kernel reads a table: evicted"]++
		return
	}
	if err != nil && (faultErr(err) || errors.Is(err, store.ErrNotRetained)) && x.lin.Layout.Retention == store.Reconstructable {
		m.counts["kernel reads a table: its rebuild failed"]++
		return // Column rebuilds an evicted head first, and that failed
	}
	if err != nil {
		m.fail("failed block-table update not reported by the write that caused it", "%v", err)
	}
	st := m.stream()
	m.nextCall()
	if !m.expect(x.Head.RecordStream(st), nil) {
		return
	}
	m.nextCall()
	s, err := x.Head.Snapshot()
	if !m.expect(err, nil) {
		return
	}
	m.snaps = append(m.snaps, &ref{RefHandle: x.Snapshot(s), lin: x.lin})
	want := append([]byte{}, x.Cols[0]...)
	rows := x.Rows()
	out := make([]byte, len(want))
	g := st.gate()
	defer g.open()
	inner := m.be.Backend
	st.do(func() error { return readThroughTable(inner, tc, rows, out) })
	m.nextCall()
	m.writeRowsOf(x)
	m.settle(st, g)
	if !bytes.Equal(out, want) {
		m.fail("block table stale under a queued kernel (an entry rewritten before the kernel ran)",
			"the kernel queued at version %d read other rows", m.snaps[len(m.snaps)-1].V)
	}
}

// readThroughTable reads rows [0, rows) of one column as a kernel does,
// through the table's entries.
func readThroughTable(b device.Backend, tc store.TableColumn, rows int, out []byte) error {
	per, rb := tc.RowsPerBlock, tc.RowBytes
	if per <= 0 || tc.Blocks*per < rows || tc.First != 0 {
		return errors.New("table too short")
	}
	raw := make([]byte, 8*tc.Blocks)
	if err := b.CopyDtoH(raw, tc.Ptr); err != nil {
		return err
	}
	for blk := 0; blk*per < rows; blk++ {
		hi := min((blk+1)*per, rows)
		p := device.Ptr(binary.LittleEndian.Uint64(raw[8*blk:]))
		if err := b.CopyDtoH(out[blk*per*rb:hi*rb], p); err != nil {
			return err
		}
	}
	return nil
}

// writeRowsOf writes at least one row of x (a mutable head).
func (m *interaction) writeRowsOf(x *ref) {
	l := x.lin.Layout
	at := m.rng.IntN(x.Rows())
	n := 1 + m.rng.IntN(x.Rows()-at)
	cols := m.randBatch(l, n)
	m.need = m.needRows(l, n)
	if m.expect(x.Head.Write(at, cols), nil) {
		x.Write(at, cols)
	}
}
