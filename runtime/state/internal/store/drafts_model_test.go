package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// A model of a speculative decoder that snapshots after every draft:
// heads (a main one and branches) append drafts, snapshot them, roll back
// to snapshots (chained, to block boundaries, past more than eight
// drafts), branch and merge; every live handle is checked against a
// reference after every step, and readers of the snapshots run
// concurrently (any read that succeeds must return the snapshot's rows).

type bmHandle struct {
	name    string
	head    *Head
	snap    *Snap
	rows    [][]byte // per column
	path    []int    // version ids
	invalid bool
	// for readers: immutable once published
}

type bmModel struct {
	t       *testing.T
	r       *rand.Rand
	p       *Pool
	l       *Layout
	rb      []int
	next    int
	heads   []*bmHandle
	snaps   []*bmHandle
	pubMu   sync.Mutex
	pub     []*bmHandle // snapshots readers may read (rows immutable)
	bad     atomic.Int64
	badMsg  atomic.Pointer[string]
	badX    atomic.Pointer[bmHandle]
	step    int
	renew   int
	limited bool
	lastOps []string
}

func (m *bmModel) logOp(f string, a ...any) {
	m.lastOps = append(m.lastOps, fmt.Sprintf("%d: ", m.step)+fmt.Sprintf(f, a...))
	if len(m.lastOps) > 30 {
		m.lastOps = m.lastOps[1:]
	}
}

func (m *bmModel) fail(f string, a ...any) {
	m.t.Helper()
	for _, o := range m.lastOps {
		m.t.Log(o)
	}
	m.t.Fatalf("step %d: "+f, append([]any{m.step}, a...)...)
}

func (m *bmModel) rowsOf(n int) [][]byte {
	cols := make([][]byte, len(m.rb))
	for c, rb := range m.rb {
		cols[c] = make([]byte, n*rb)
		for i := range cols[c] {
			cols[c][i] = byte(m.r.IntN(256))
		}
	}
	return cols
}

func clone2(c [][]byte) [][]byte {
	out := make([][]byte, len(c))
	for i := range c {
		out[i] = bytes.Clone(c[i])
	}
	return out
}

func (m *bmModel) nrows(h *bmHandle) int { return len(h.rows[0]) / m.rb[0] }

func (m *bmModel) validHeads() []*bmHandle {
	var out []*bmHandle
	for _, h := range m.heads {
		if !h.invalid {
			out = append(out, h)
		}
	}
	return out
}

func isPrefix(a, b []int) bool { return len(a) <= len(b) && slices.Equal(a, b[:len(a)]) }

func (m *bmModel) invalidate(except *bmHandle, abandoned []int) {
	if len(abandoned) == 0 {
		return
	}
	hit := func(x *bmHandle) bool {
		for _, id := range x.path {
			if slices.Contains(abandoned, id) {
				return true
			}
		}
		return false
	}
	for _, x := range m.heads {
		if x != except && hit(x) {
			x.invalid = true
		}
	}
	for _, x := range m.snaps {
		if hit(x) {
			x.invalid = true
		}
	}
}

func (m *bmModel) doAppend(h *bmHandle) {
	n := 1
	switch k := m.r.IntN(10); {
	case k == 0:
		n = 1 + m.r.IntN(40)
	case k < 3:
		n = 2 + m.r.IntN(3)
	}
	if m.l.Window > 0 {
		n = min(n, m.l.Window)
	}
	rows := m.rowsOf(n)
	if err := h.head.Append(rows); m.pressure(err, h) {
		m.logOp("append %d to %s: %v", n, h.name, err)
		return
	} else if err != nil {
		m.fail("append %d rows to %s: %v", n, h.name, err)
	}
	m.next++
	h.path = append(slices.Clip(h.path), m.next)
	for c := range h.rows {
		h.rows[c] = append(slices.Clip(h.rows[c]), rows[c]...)
	}
	m.logOp("append %d to %s -> %d rows", n, h.name, m.nrows(h))
}

func (m *bmModel) doSnapshot(h *bmHandle) {
	s, err := h.head.Snapshot()
	if m.pressure(err, h) {
		m.logOp("snapshot of %s: %v", h.name, err)
		return
	}
	if err != nil {
		m.fail("snapshot of %s: %v", h.name, err)
	}
	x := &bmHandle{name: fmt.Sprintf("s%d.%d", m.step, len(m.lastOps)+m.next), snap: s, rows: clone2(h.rows), path: slices.Clone(h.path)}
	m.snaps = append(m.snaps, x)
	m.pubMu.Lock()
	m.pub = append(m.pub, x)
	m.pubMu.Unlock()
	m.logOp("snapshot %s of %s at %d rows", x.name, h.name, m.nrows(x))
}

func (m *bmModel) doBranch(h *bmHandle) {
	c, err := h.head.Branch()
	if m.pressure(err, h) {
		return
	}
	check(m.t, err)
	x := &bmHandle{name: fmt.Sprintf("b%d", m.step), head: c, rows: clone2(h.rows), path: slices.Clone(h.path)}
	m.heads = append(m.heads, x)
	m.logOp("branch %s of %s", x.name, h.name)
}

func (m *bmModel) doRollback(h *bmHandle) bool {
	var cands []*bmHandle
	for _, s := range m.snaps {
		if !s.invalid && isPrefix(s.path, h.path) {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return false
	}
	// prefer recent ones: drafts
	s := cands[len(cands)-1-min(len(cands)-1, m.r.IntN(min(len(cands), 12)))]
	if err := h.head.Rollback(s.snap); m.pressure(err, h) {
		if errors.Is(s.snap.Read(0, 0, make([][]byte, len(m.rb))), ErrEvicted) {
			s.invalid = true
		}
		m.logOp("rollback %s to %s: %v", h.name, s.name, err)
		return false
	} else if err != nil {
		m.fail("rollback %s to %s: %v", h.name, s.name, err)
	}
	m.invalidate(h, h.path[len(s.path):])
	h.path = slices.Clone(s.path)
	h.rows = clone2(s.rows)
	m.logOp("rollback %s to %s (%d rows)", h.name, s.name, m.nrows(h))
	return true
}

func (m *bmModel) doMerge(h *bmHandle) bool {
	for _, c := range m.heads {
		if c != h && !c.invalid && isPrefix(h.path, c.path) {
			if err := h.head.Merge(c.head); m.pressure(err, h) {
				return false
			} else if err != nil {
				m.fail("merge %s into %s: %v", c.name, h.name, err)
			}
			h.path = slices.Clone(c.path)
			h.rows = clone2(c.rows)
			m.logOp("merge %s into %s", c.name, h.name)
			return true
		}
	}
	return false
}

func (m *bmModel) releaseSome() {
	for len(m.snaps) > 40 || (len(m.snaps) > 0 && m.r.IntN(4) == 0) {
		i := m.r.IntN(len(m.snaps))
		if m.r.IntN(2) == 0 {
			i = 0
		}
		s := m.snaps[i]
		m.snaps = slices.Delete(m.snaps, i, i+1)
		m.pubMu.Lock()
		m.pub = slices.DeleteFunc(m.pub, func(x *bmHandle) bool { return x == s })
		m.pubMu.Unlock()
		if err := s.snap.Release(); err != nil {
			m.fail("release %s: %v", s.name, err)
		}
		m.logOp("release %s", s.name)
	}
	for len(m.heads) > 4 {
		i := 1 + m.r.IntN(len(m.heads)-1)
		h := m.heads[i]
		m.heads = slices.Delete(m.heads, i, i+1)
		check(m.t, h.head.Release())
		m.logOp("release %s", h.name)
	}
	for i := 1; i < len(m.heads); i++ {
		if m.heads[i].invalid && m.r.IntN(2) == 0 {
			check(m.t, m.heads[i].head.Release())
			m.logOp("release %s", m.heads[i].name)
			m.heads = slices.Delete(m.heads, i, i+1)
			i--
		}
	}
}

// pressure reports whether err is the pool's memory pressure (a pool
// with MaxBytes): out of memory, or an evicted handle; a head answering
// ErrEvicted is gone for the model.
func (m *bmModel) pressure(err error, h *bmHandle) bool {
	if !m.limited || err == nil {
		return false
	}
	if errors.Is(err, ErrEvicted) {
		if errors.Is(h.head.Read(0, 0, make([][]byte, len(m.rb))), ErrEvicted) {
			h.invalid = true
		}
		return true
	}
	return errors.Is(err, ErrNoMemory)
}

type bmReader interface {
	Read(from, to int, dst [][]byte) error
	ReadRows(idx []int, dst [][]byte) error
	ReadColumns(from, to int, dst [][]byte) error
	Len() int
}

func (m *bmModel) verify(x *bmHandle) {
	var rd bmReader
	if x.head != nil {
		rd = x.head
	} else {
		rd = x.snap
	}
	n := m.nrows(x)
	lo := 0
	if m.l.Window > 0 {
		lo = max(0, n-m.l.Window)
	}
	dst := make([][]byte, len(m.rb))
	for c, rb := range m.rb {
		dst[c] = make([]byte, (n-lo)*rb)
	}
	err := rd.Read(lo, n, dst)
	switch {
	case x.invalid && !errors.Is(err, ErrInvalidated) && !errors.Is(err, ErrEvicted):
		m.fail("%s should be invalidated; read: %v", x.name, err)
	case x.invalid:
		return
	case errors.Is(err, ErrEvicted):
		x.invalid = true // gone: the model stops asking
		return
	case errors.Is(err, ErrNoMemory):
		return
	case err != nil:
		m.fail("read %s: %v", x.name, err)
	}
	for c, rb := range m.rb {
		if !bytes.Equal(dst[c], x.rows[c][lo*rb:]) {
			m.fail("%s (%d rows) column %d reads other rows (first diff at byte %d)", x.name, n, c, firstDiffByte(dst[c], x.rows[c]))
		}
	}
	if rd.Len() != n {
		m.fail("%s: Len %d, want %d", x.name, rd.Len(), n)
	}
}

func firstDiffByte(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// reader reads published snapshots until stop; any successful read must
// return the rows the model recorded.
func (m *bmModel) reader(stop *atomic.Bool, seed uint64, st device.Stream) {
	r := rand.New(rand.NewPCG(seed, 7))
	for !stop.Load() {
		m.pubMu.Lock()
		if len(m.pub) == 0 {
			m.pubMu.Unlock()
			time.Sleep(time.Microsecond)
			continue
		}
		x := m.pub[len(m.pub)-1-r.IntN(min(len(m.pub), 6))]
		m.pubMu.Unlock()
		n := len(x.rows[0]) / m.rb[0]
		if n == 0 {
			continue
		}
		lo := 0
		if m.l.Window > 0 {
			lo = max(0, n-m.l.Window)
		}
		from := lo + r.IntN(n-lo)
		to := from + 1 + r.IntN(n-from)
		want := make([][]byte, len(m.rb))
		dst := make([][]byte, len(m.rb))
		for c, rb := range m.rb {
			want[c] = x.rows[c][from*rb : to*rb]
			dst[c] = make([]byte, (to-from)*rb)
		}
		var err error
		op := r.IntN(4)
		switch op {
		case 0:
			err = x.snap.Read(from, to, dst)
		case 1:
			idx := make([]int, to-from)
			for i := range idx {
				idx[i] = from + i
			}
			err = x.snap.ReadRows(idx, dst)
		case 2:
			err = x.snap.ReadColumns(from, to, dst)
		case 3:
			if st == nil {
				err = x.snap.Read(from, to, dst)
				break
			}
			err = x.snap.ReadAsync(st, from, to, dst)
			if err == nil {
				err = st.Sync()
			}
		}
		if err != nil {
			if errors.Is(err, ErrInvalidated) || errors.Is(err, ErrReleased) || errors.Is(err, ErrEvicted) || errors.Is(err, ErrNoMemory) {
				continue
			}
			msg := fmt.Sprintf("reader op %d on %s: %v", op, x.name, err)
			m.badMsg.Store(&msg)
			m.bad.Add(1)
			return
		}
		for c := range dst {
			if !bytes.Equal(dst[c], want[c]) {
				msg := fmt.Sprintf("reader op %d on %s rows [%d,%d) col %d: other bytes", op, x.name, from, to, c)
				m.badMsg.Store(&msg)
				m.badX.Store(x)
				m.bad.Add(1)
				return
			}
		}
	}
}

func runDraftModel(t *testing.T, seed uint64, steps int, l *Layout, opt PoolOptions, readers int, async bool) {
	b := device.Host()
	defer b.Close()
	p := must[*Pool](t)(NewPool(b, opt))
	m := &bmModel{t: t, r: rand.New(rand.NewPCG(seed, 1)), p: p, l: l, renew: 900}
	if opt.MaxBytes > 0 {
		m.renew, m.limited = 60, true
	}
	h0 := must[*Head](t)(p.NewHead(l, "me"))
	for c := range h0.rowBytes {
		m.rb = append(m.rb, h0.rowBytes[c])
	}
	main := &bmHandle{name: "h", head: h0, rows: make([][]byte, len(m.rb)), path: []int{-1}}
	m.next = 1
	m.heads = append(m.heads, main)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range readers {
		var st device.Stream
		if async {
			st = must[device.Stream](t)(b.(device.Streams).NewStream())
			defer st.Close()
		}
		wg.Add(1)
		go func() { defer wg.Done(); m.reader(&stop, seed*100+uint64(i), st) }()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	for m.step = 0; m.step < steps; m.step++ {
		if m.bad.Load() > 0 {
			stop.Store(true)
			wg.Wait()
			if x := m.badX.Load(); x != nil {
				m.fail("%s (the snapshot is invalidated by now: %v)", *m.badMsg.Load(), x.invalid)
			}
			m.fail("%s", *m.badMsg.Load())
		}
		vh := m.validHeads()
		if len(vh) == 0 {
			break
		}
		h := vh[m.r.IntN(len(vh))]
		if m.r.IntN(3) > 0 {
			h = main
			if main.invalid {
				h = vh[0]
			}
		}
		if m.nrows(h) > m.renew {
			// start over on a fresh head
			check(t, h.head.Release())
			h.head = must[*Head](t)(p.NewHead(l, "me"))
			h.rows, h.path, h.invalid = make([][]byte, len(m.rb)), nil, false
			m.next++
			h.path = []int{-m.next}
			m.logOp("renew %s", h.name)
			continue
		}
		switch k := m.r.IntN(20); {
		case k < 8: // a speculative step: drafts with snapshots, then a rollback
			drafts := 1 + m.r.IntN(4)
			if m.r.IntN(6) == 0 {
				drafts = 9 + m.r.IntN(4) // more than eight
			}
			if m.r.IntN(2) == 0 {
				m.doSnapshot(h)
			}
			for range drafts {
				m.doAppend(h)
				m.doSnapshot(h)
			}
			if m.r.IntN(5) == 0 {
				m.doBranch(h)
			}
			m.doRollback(h)
			if m.r.IntN(3) == 0 { // chained
				m.doAppend(h)
				m.doSnapshot(h)
				m.doRollback(h)
			}
			m.doAppend(h) // the accepted token
		case k < 11:
			m.doAppend(h)
		case k < 13:
			m.doSnapshot(h)
		case k < 14:
			m.doBranch(h)
		case k < 16:
			m.doRollback(h)
		case k < 17:
			m.doMerge(h)
		default:
			m.releaseSome()
		}
		for _, x := range m.heads {
			m.verify(x)
		}
		for _, x := range m.snaps {
			m.verify(x)
		}
	}
	stop.Store(true)
	wg.Wait()
	if m.bad.Load() > 0 {
		m.fail("%s", *m.badMsg.Load())
	}
	if st := p.Stats(); true {
		t.Logf("tier out %d in %d dropped %d, evictions %d", st.TierOut, st.TierIn, st.TierDropped, st.Evictions)
	}
	for _, s := range m.snaps {
		check(t, s.snap.Release())
	}
	for _, h := range m.heads {
		check(t, h.head.Release())
	}
	if st := p.Stats(); st.Live != 0 {
		t.Errorf("%d live handles after releasing all", st.Live)
	}
	check(t, p.Close())
}

func draftLayouts() map[string]*Layout {
	tok := *tokLayout
	tok.ShareKey = ""
	kvl := kv(Append, 0, Invalidate)
	kvl.BlockRows = 0
	return map[string]*Layout{"tok": &tok, "kv": kvl}
}

// TestDraftsDraftModel runs the drafts model on both draft layouts: alone,
// with reader goroutines reading the heads and snapshots while it runs,
// and with readers that read on streams (ReadAsync).
func TestDraftsDraftModel(t *testing.T) {
	steps := statetest.Steps(300, 1)
	for _, c := range []struct {
		name    string
		readers int
		async   bool
		seeds   []uint64
	}{
		{"alone", 0, false, []uint64{1, 2, 3, 4, 5, 6}},
		{"readers", 3, false, []uint64{11, 12, 13}},
		{"async", 3, true, []uint64{21, 22, 23}},
	} {
		for name, l := range draftLayouts() {
			for _, seed := range statetest.Seeds(c.seeds...) {
				t.Run(fmt.Sprintf("%s/%s/%d", c.name, name, seed), func(t *testing.T) {
					runDraftModel(t, seed, steps, l, PoolOptions{BlockBytes: 256}, c.readers, c.async)
				})
			}
		}
	}
}

func TestDraftsDraftModelWindow(t *testing.T) {
	steps := statetest.Steps(300, 1)
	for _, w := range []int{5, 16, 40} {
		l := *tokLayout
		l.ShareKey, l.Window, l.Bound = "", w, 0
		for _, seed := range statetest.Seeds(31, 32) {
			t.Run(fmt.Sprintf("w%d/%d", w, seed), func(t *testing.T) {
				runDraftModel(t, seed, steps, &l, PoolOptions{BlockBytes: 256}, 2, false)
			})
		}
	}
}

func TestDraftsDraftModelTier(t *testing.T) {
	steps := statetest.Steps(300, 1)
	for name, l := range draftLayouts() {
		l.Retention = Optional
		for _, seed := range statetest.Seeds(41, 42, 43) {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) {
				runDraftModel(t, seed, steps, l, PoolOptions{BlockBytes: 256, MaxBytes: 48 * 256, HostTier: 4000 * 256}, 2, false)
			})
		}
	}
}
