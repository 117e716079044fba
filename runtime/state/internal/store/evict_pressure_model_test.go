package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// ownedRow is a unique 256-byte row: its id in the first 8 bytes, its owner
// byte in the rest.
func ownedRow(id uint64, owner byte) []byte {
	r := bytes.Repeat([]byte{owner}, 256)
	binary.LittleEndian.PutUint64(r, id)
	return r
}

type evictHandle struct {
	name    string
	h       *Head
	s       *Snap
	l       *Layout
	owner   byte
	rows    [][]byte // every row (nil: zero row of a mutable state)
	n       int      // Len (window: every row ever appended)
	evicted bool
}

func (x *evictHandle) reader() reader {
	if x.h != nil {
		return x.h
	}
	return x.s
}

// evictModel is TestPressureModel's state: the pool, the live handles
// and what each should read.
type evictModel struct {
	t        *testing.T
	rng      *rand.Rand
	p        *Pool
	hs       []*evictHandle
	mand     []*evictHandle
	id       uint64
	tier     bool
	layouts  []*Layout
	log      []string
	refusals []string
	cap      int
	stepN    int
}

func (m *evictModel) logf(f string, a ...any) {
	m.log = append(m.log, fmt.Sprintf(f, a...))
	if len(m.log) > 40 {
		m.log = m.log[1:]
	}
}

func (m *evictModel) fatalf(f string, a ...any) {
	m.t.Helper()
	for _, l := range m.log {
		m.t.Log(l)
	}
	m.t.Fatalf(f, a...)
}

func (m *evictModel) readable(x *evictHandle) (int, int) {
	lo := 0
	if x.l.Window > 0 {
		lo = max(0, x.n-x.l.Window)
	}
	return lo, x.n
}

// verify reads every handle and compares with the model.
func (m *evictModel) verify(x *evictHandle) {
	m.t.Helper()
	r := x.reader()
	lo, hi := m.readable(x)
	if x.evicted {
		if err := r.Read(lo, lo+min(1, hi-lo), [][]byte{make([]byte, 256*min(1, hi-lo))}); !errors.Is(err, ErrEvicted) && !(hi == lo) {
			m.fatalf("%s evicted before, read now: %v", x.name, err)
		}
		return
	}
	if r.Len() != x.n && !(x.h != nil && x.h.evicted) {
		// an evicted head's Len may differ
		if !(x.s != nil && x.s.evicted) {
			m.fatalf("%s Len %d, model %d", x.name, r.Len(), x.n)
		}
	}
	if hi == lo {
		return
	}
	dst := make([]byte, (hi-lo)*256)
	err := r.Read(lo, hi, [][]byte{dst})
	switch {
	case errors.Is(err, ErrEvicted):
		if x.l.Retention != Optional {
			m.fatalf("mandatory %s evicted", x.name)
		}
		m.logf("%s found evicted", x.name)
		x.evicted = true
		return
	case errors.Is(err, ErrNoMemory) && m.tier:
		m.logf("%s read (tier return): %v", x.name, err)
		return
	case err != nil:
		m.fatalf("%s read [%d,%d): %v", x.name, lo, hi, err)
	}
	for i := lo; i < hi; i++ {
		want := x.rows[i]
		if want == nil {
			want = make([]byte, 256)
		}
		got := dst[(i-lo)*256 : (i-lo+1)*256]
		if !bytes.Equal(got, want) {
			m.fatalf("%s row %d: got id %d owner %d, want id %d owner %d", x.name, i,
				binary.LittleEndian.Uint64(got), got[8], binary.LittleEndian.Uint64(want), want[8])
		}
	}
}

// noMem checks a call that failed with ErrNoMemory evicted nothing.
func (m *evictModel) noMem(what string, err error, before PoolStats) bool {
	m.t.Helper()
	if !errors.Is(err, ErrNoMemory) {
		return false
	}
	st := m.p.Stats()
	m.logf("%s: ErrNoMemory", what)
	if st.EvictedBytes != before.EvictedBytes {
		m.fatalf("%s failed with ErrNoMemory but evicted %d bytes: %v", what, st.EvictedBytes-before.EvictedBytes, err)
	}
	return true
}

func (m *evictModel) pickOpt(headOnly bool) *evictHandle {
	var c []*evictHandle
	for _, x := range m.hs {
		if headOnly && x.h == nil {
			continue
		}
		c = append(c, x)
	}
	if len(c) == 0 {
		return nil
	}
	return c[m.rng.IntN(len(c))]
}

func (m *evictModel) newHead(l *Layout, owner byte, mand bool) {
	before := m.p.Stats()
	h, err := m.p.NewHead(l, Owner(fmt.Sprint("o", owner)))
	if m.noMem("new head "+l.Type, err, before) {
		return
	}
	if err != nil {
		m.fatalf("new head: %v", err)
	}
	x := &evictHandle{name: fmt.Sprintf("h%d(%s/o%d)", m.id, l.Type, owner), h: h, l: l, owner: owner}
	m.id++
	if l.Growth == Mutable {
		x.rows = make([][]byte, l.Bound)
		x.n = l.Bound
	}
	if mand {
		m.mand = append(m.mand, x)
	} else {
		m.hs = append(m.hs, x)
	}
	m.logf("new %s", x.name)
}

func (m *evictModel) step() {
	t := m.t
	t.Helper()
	k := m.rng.IntN(100)
	before := m.p.Stats()
	switch {
	case k < 5 || len(m.hs) < 2:
		m.newHead(m.layouts[m.rng.IntN(len(m.layouts))], byte(1+m.rng.IntN(3)), false)
	case k < 30: // append or write on an optional head
		x := m.pickOpt(true)
		if x == nil || x.evicted {
			return
		}
		m.id++
		row := ownedRow(m.id, x.owner)
		if x.l.Growth == Mutable {
			at := m.rng.IntN(x.n)
			err := x.h.Write(at, [][]byte{row})
			m.logf("%s write %d id %d: %v", x.name, at, m.id, err)
			switch {
			case err == nil:
				x.rows[at] = row
			case errors.Is(err, ErrEvicted):
				x.evicted = true
			case m.noMem(x.name+" write", err, before):
			default:
				m.fatalf("%s write: %v", x.name, err)
			}
			return
		}
		if x.l.Bound > 0 && x.n >= x.l.Bound {
			return
		}
		err := x.h.Append([][]byte{row})
		m.logf("%s append id %d: %v", x.name, m.id, err)
		switch {
		case err == nil:
			x.rows = append(x.rows, row)
			x.n++
		case errors.Is(err, ErrEvicted):
			x.evicted = true
		case m.noMem(x.name+" append", err, before):
		default:
			m.fatalf("%s append: %v", x.name, err)
		}
	case k < 42: // snapshot
		x := m.pickOpt(true)
		if x == nil || x.evicted {
			return
		}
		s, err := x.h.Snapshot()
		m.logf("%s snapshot: %v", x.name, err)
		switch {
		case err == nil:
			m.id++
			m.hs = append(m.hs, &evictHandle{name: fmt.Sprintf("s%d<%s", m.id, x.name), s: s, l: x.l, owner: x.owner, rows: slices.Clone(x.rows), n: x.n})
		case errors.Is(err, ErrEvicted):
			x.evicted = true
		case m.noMem(x.name+" snapshot", err, before):
		default:
			m.fatalf("%s snapshot: %v", x.name, err)
		}
	case k < 52: // branch
		x := m.pickOpt(true)
		if x == nil || x.evicted {
			return
		}
		b, err := x.h.Branch()
		m.logf("%s branch: %v", x.name, err)
		switch {
		case err == nil:
			m.id++
			m.hs = append(m.hs, &evictHandle{name: fmt.Sprintf("b%d<%s", m.id, x.name), h: b, l: x.l, owner: x.owner, rows: slices.Clone(x.rows), n: x.n})
		case errors.Is(err, ErrEvicted):
			x.evicted = true
		case m.noMem(x.name+" branch", err, before):
		default:
			m.fatalf("%s branch: %v", x.name, err)
		}
	case k < 60: // rollback to a snapshot of the same layout
		x := m.pickOpt(true)
		if x == nil || x.evicted {
			return
		}
		var ss []*evictHandle
		for _, y := range m.hs {
			if y.s != nil && y.l == x.l && y.owner == x.owner {
				ss = append(ss, y)
			}
		}
		if len(ss) == 0 {
			return
		}
		y := ss[m.rng.IntN(len(ss))]
		err := x.h.Rollback(y.s)
		m.logf("%s rollback to %s: %v", x.name, y.name, err)
		switch {
		case err == nil:
			if y.evicted {
				m.fatalf("rollback to evicted %s succeeded", y.name)
			}
			x.rows, x.n = slices.Clone(y.rows), y.n
		case errors.Is(err, ErrEvicted):
			// the head or the snapshot
		case errors.Is(err, ErrNotAncestor), errors.Is(err, ErrExpired), errors.Is(err, ErrInvalidated):
		case m.noMem(x.name+" rollback", err, before):
		default:
			m.fatalf("%s rollback: %v", x.name, err)
		}
	case k < 68: // release an optional handle
		if len(m.hs) < 3 {
			return
		}
		i := m.rng.IntN(len(m.hs))
		x := m.hs[i]
		var err error
		if x.h != nil {
			err = x.h.Release()
		} else {
			err = x.s.Release()
		}
		m.logf("release %s: %v", x.name, err)
		if err != nil {
			m.fatalf("release %s: %v", x.name, err)
		}
		m.hs = slices.Delete(m.hs, i, i+1)
	case k < 88: // pressure: a mandatory append of 1..4 rows
		if len(m.mand) == 0 || m.rng.IntN(8) == 0 {
			m.newHead(wide("Session", Mandatory), 9, true)
		}
		x := m.mand[m.rng.IntN(len(m.mand))]
		n := 1 + m.rng.IntN(4)
		var rows [][]byte
		var cat []byte
		for range n {
			m.id++
			r := ownedRow(m.id, 9)
			rows = append(rows, r)
			cat = append(cat, r...)
		}
		err := x.h.Append([][]byte{cat})
		m.logf("%s append %d: %v (stats %+v)", x.name, n, err, m.p.Stats())
		switch {
		case err == nil:
			x.rows = append(x.rows, rows...)
			x.n += n
		case m.noMem(x.name+" mandatory append", err, before):
			if opt := m.optOnly(); opt+int64(m.cap)*256-before.Blocks*256 >= int64(n)*256 {
				m.refusals = append(m.refusals, fmt.Sprintf("step %d: mandatory append of %d blocks refused: free %d bytes, optional-only %d bytes\n%s", m.stepN, n, int64(m.cap)*256-before.Blocks*256, opt, m.dump()))
			}
		default:
			m.fatalf("%s append: %v", x.name, err)
		}
	case k < 96: // release a mandatory head
		if len(m.mand) == 0 {
			return
		}
		i := m.rng.IntN(len(m.mand))
		check(t, m.mand[i].h.Release())
		m.logf("release %s", m.mand[i].name)
		m.mand = slices.Delete(m.mand, i, i+1)
	default: // read some handle
		if x := m.pickOpt(false); x != nil {
			m.verify(x)
		}
	}
}

func (m *evictModel) verifyAll() {
	m.t.Helper()
	for _, x := range m.mand {
		m.verify(x)
	}
	for _, x := range m.hs {
		m.verify(x)
	}
	if err := checkInvariants(m.p); err != nil {
		m.fatalf("invariants: %v", err)
	}
}

func (m *evictModel) releaseAll() {
	for _, x := range append(m.hs, m.mand...) {
		if x.h != nil {
			check(m.t, x.h.Release())
		} else {
			check(m.t, x.s.Release())
		}
	}
	m.hs, m.mand = nil, nil
	if st := m.p.Stats(); st.Blocks != 0 {
		m.fatalf("after releasing everything: %d blocks in use (%+v)", st.Blocks, st)
	}
	if err := checkInvariants(m.p); err != nil {
		m.fatalf("invariants after release: %v", err)
	}
}

func runEvictModel(t *testing.T, seed uint64, tier bool, steps int, layouts []*Layout) {
	runEvictModelN(t, seed, tier, steps, layouts, 40)
}

func runEvictModelN(t *testing.T, seed uint64, tier bool, steps int, layouts []*Layout, blocks int) {
	opt := PoolOptions{BlockBytes: 256, MaxBytes: int64(blocks) * 256, PendingWait: -1}
	if tier {
		opt.HostTier = 12 * 256
	}
	p := newPool(t, opt)
	m := &evictModel{t: t, rng: rand.New(rand.NewPCG(seed, 77)), p: p, tier: tier, layouts: layouts, cap: blocks}
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			panic(fmt.Sprintf("seed %d: stalled", seed))
		}
	}()
	defer close(done)
	defer func() {
		if t.Failed() {
			// release to keep the pool's close quiet
			for _, x := range append(m.hs, m.mand...) {
				if x.h != nil {
					x.h.Release()
				} else {
					x.s.Release()
				}
			}
		}
	}()
	for i := range steps {
		m.stepN = i
		m.step()
		if i%10 == 0 {
			m.verifyAll()
		}
	}
	m.verifyAll()
	m.releaseAll()
	for _, o := range m.refusals {
		t.Error("refused with enough optional memory: " + o)
	}
}

// optOnly is the bytes only optional handles in device memory hold,
// together.
func (m *evictModel) optOnly() int64 {
	var roots []*root
	for _, x := range m.hs {
		if x.h != nil && x.h.r != nil && !x.h.evicted {
			roots = append(roots, headVictim{x.h}.rootsLocked()...)
		}
		if x.s != nil && x.s.r != nil && !x.s.evicted {
			roots = append(roots, x.s.r)
		}
	}
	var n int64
	onlyBlocks(roots, func(b *block) { n += int64(b.Bytes()) })
	return n
}

func pressureLayouts() []*Layout {
	app := wide("Cache", Optional)
	app.Descendants = Keep
	win := wide("Win", Optional)
	win.Descendants, win.Window = Keep, 5
	mut := wide("Mut", Optional)
	mut.Descendants, mut.Growth, mut.Bound = Keep, Mutable, 6
	return []*Layout{app, win, mut}
}

// TestPressureModel: seeded random sequences of optional heads of three
// owners (append, window and mutable states; snapshots, branches,
// rollbacks, releases) under mandatory appends on a small pool, with and
// without a host tier. Every row is unique and carries its owner, so
// that a read of another owner's row shows. It checks every readable row
// against the model, that mandatory state is never evicted, that a call
// refused with ErrNoMemory evicted nothing and was refused only when the
// optional state alone could not make its room, the pool's invariants,
// and that every block comes back.
func TestPressureModel(t *testing.T) {
	for _, tier := range []bool{false, true} {
		for seed := range raceScaled(30) {
			t.Run(fmt.Sprintf("tier=%v/%d", tier, seed), func(t *testing.T) {
				runEvictModel(t, seed, tier, 400, pressureLayouts())
			})
		}
	}
}

func (m *evictModel) dump() string {
	var out string
	for _, x := range m.hs {
		var roots []*root
		switch {
		case x.h != nil && x.h.r != nil && !x.h.evicted:
			roots = headVictim{x.h}.rootsLocked()
		case x.s != nil && x.s.r != nil && !x.s.evicted:
			roots = []*root{x.s.r}
		default:
			out += fmt.Sprintf("  %s: away (tier %v)\n", x.name, x.h != nil && x.h.tier != nil || x.s != nil && x.s.tier != nil)
			continue
		}
		alone := false
		for _, r := range roots {
			alone = alone || holdsAlone(r)
		}
		var ex int64
		onlyBlocks(roots, func(b *block) { ex += int64(b.Bytes()) })
		var blks []string
		for _, r := range roots {
			bs, _ := rootBlocks(r, nil)
			for _, b := range bs {
				blks = append(blks, fmt.Sprintf("%p/%d", b, b.Refs()))
			}
		}
		out += fmt.Sprintf("  %s: n %d alone %v only %d blocks %v\n", x.name, x.n, alone, ex, blks)
	}
	live := eviction{m.p}.listedVictims()
	out += fmt.Sprintf("  joint sets %v\n", len(jointSets(live)))
	return out
}

// raceScaled is n seeds, or two under the race detector, which runs the
// models many times slower.
func raceScaled(n uint64) uint64 {
	if raceDetector {
		return min(n, 2)
	}
	return n
}

// TestPressureModelCheckpointed is the model with checkpointed optional
// layouts besides, longer.
func TestPressureModelCheckpointed(t *testing.T) {
	ls := pressureLayouts()
	cp := wide("Ckpt", Optional)
	cp.Descendants, cp.Checkpoint = Keep, &CheckpointPolicy{Every: 2, Keep: 3}
	cpm := wide("CkMut", Optional)
	cpm.Descendants, cpm.Growth, cpm.Bound, cpm.Checkpoint = Keep, Mutable, 4, &CheckpointPolicy{Every: 1, Keep: 2}
	ls = append(ls, cp, cpm)
	for _, tier := range []bool{false, true} {
		for seed := range raceScaled(60) {
			t.Run(fmt.Sprintf("tier=%v/%d", tier, seed), func(t *testing.T) {
				runEvictModel(t, 1000+seed, tier, 1500, ls)
			})
		}
	}
}

// TestPressureModelWideTrees: the model with trees of more than one leaf
// (windows of 35 rows, mutable states of 40 rows), so that joint sets
// are found through interior nodes.
func TestPressureModelWideTrees(t *testing.T) {
	app := wide("Cache", Optional)
	app.Descendants = Keep
	win := wide("Win", Optional)
	win.Descendants, win.Window = Keep, 35
	mut := wide("Mut", Optional)
	mut.Descendants, mut.Growth, mut.Bound = Keep, Mutable, 40
	ls := []*Layout{app, win, mut}
	for _, tier := range []bool{false, true} {
		for seed := range raceScaled(20) {
			t.Run(fmt.Sprintf("tier=%v/%d", tier, seed), func(t *testing.T) {
				runEvictModelN(t, 5000+seed, tier, 2000, ls, 160)
			})
		}
	}
}
