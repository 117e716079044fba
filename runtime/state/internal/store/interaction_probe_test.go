package store_test

import (
	"errors"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/gpustate/gpustate/examples/replay/buffer"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/internal/store"
)

// The interaction model's probes: small pools of their own, set up by the model's
// random numbers, where a property needs a pool in a known state: full of
// optional state, with blocks pending behind a kernel, with a backend call
// that blocks, closed under live handles; nil handles; a generated type's
// ReadInto; and, as a test of its own, the cost of rollback over a long
// history.

type probeEntry struct {
	name string
	f    func()
}

func (m *interaction) probes() []probeEntry {
	return []probeEntry{
		{"pending blocks under the cap", m.probePending},
		{"plan in a full pool", m.probePlan},
		{"a blocking Free", m.probeBlockingFree},
		{"a closed pool", m.probeClosed},
		{"nil handles", m.probeNil},
		{"a failed ReadInto", m.probeReadInto},
		{"many size classes under the cap", m.probeClasses},
		{"failed reconstructions", m.probeReconstruct},
	}
}

// probe runs a random probe; runInteraction also runs each once per seed.
func (m *interaction) probe() {
	ps := m.probes()
	m.runProbe(ps[m.rng.IntN(len(ps))])
}

func (m *interaction) runProbe(p probeEntry) {
	m.op = "probe: " + p.name
	p.f()
}

// probeClasses makes one-row heads of many row sizes in a pool whose
// blocks follow the rows, under a cap far above what they hold: every
// allocation must succeed (a cap is usable whatever the size classes).
func (m *interaction) probeClasses() {
	const capBytes = 4 << 20
	p, err := store.NewPool(newInteractionBackend(), store.PoolOptions{MaxBytes: capBytes})
	if err != nil {
		m.t.Fatal(err)
	}
	var hs []*store.Head
	base := 1 + m.rng.IntN(8)
	for i := range 16 {
		l := &store.Layout{Type: "ProbeClass", Columns: []store.Column{{Name: "V", ElemSize: 8, Width: 32 * (base + i)}}, Growth: store.Append}
		h, err := p.NewHead(l, store.Owner(fmt.Sprint("c", i)))
		if err != nil {
			m.t.Fatal(err)
		}
		hs = append(hs, h)
		if err := h.Append([][]byte{m.randBytes(l.Columns[0].RowBytes())}); err != nil {
			st := p.Stats()
			m.fail("ErrNoMemory under half the cap (size classes fragment MaxBytes)",
				"head %d of one row of %d bytes: %d bytes in use of a cap of %d: %v", i, l.Columns[0].RowBytes(), st.PhysicalBytes, capBytes, err)
		}
	}
	m.closeProbe(p, hs...)
}

// probeReconstruct makes reconstructions fail at a backend call, through
// At and through the rebuild of an evicted reconstructable head: a failed
// one leaves the pool's blocks as they were.
func (m *interaction) probeReconstruct() {
	p, be, l := m.smallPool(48)
	if _, err := p.CostModel(); err != nil { // calibrated first: not under test here
		m.t.Fatalf("probe setup: %v", err)
	}
	cl := &store.Layout{Type: "ProbeCkpt", Columns: l.Columns, Growth: store.Mutable, Bound: 4, BlockRows: 1,
		Checkpoint: &store.CheckpointPolicy{Every: 3, Keep: 2}, Retention: store.Reconstructable}
	c, err := p.NewHead(cl, "c")
	if err != nil {
		m.t.Fatal(err)
	}
	for range 5 {
		if err := c.Write(m.rng.IntN(4), [][]byte{m.randBytes(256)}); err != nil {
			m.t.Fatalf("probe setup: %v", err)
		}
	}
	for i := range 6 {
		before := p.Stats()
		be.arm(mCopyDtoD, i%3)
		s, err := c.At(store.Version(4 + m.rng.IntN(2)))
		be.disarm()
		if err == nil {
			s.Release()
			continue
		}
		if after := p.Stats(); after.PhysicalBytes != before.PhysicalBytes {
			m.fail("a failed reconstruction (At) leaked a block", "physical %d -> %d: %v", before.PhysicalBytes, after.PhysicalBytes, err)
		}
	}
	m.probeRebuild(p, be, l, c)
}

// probeRebuild evicts the reconstructable head c by filling the pool,
// frees the room again, and makes its rebuild fail.
func (m *interaction) probeRebuild(p *store.Pool, be *interactionBackend, l *store.Layout, c *store.Head) {
	var fill []*store.Head
	for i := 0; i < 60 && p.Stats().EvictedBytes == 0; i++ {
		fill = append(fill, m.mustHead(p, l, store.Owner(fmt.Sprint("f", i)), 1))
	}
	for _, h := range fill {
		h.Release()
	}
	if p.Stats().EvictedBytes == 0 {
		m.closeProbe(p, c)
		return
	}
	for i := range 4 {
		before := p.Stats()
		be.arm(mCopyDtoD|mAlloc, i)
		err := c.Read(0, 1, [][]byte{make([]byte, 256)})
		be.disarm()
		if err == nil {
			break
		}
		if after := p.Stats(); after.PhysicalBytes != before.PhysicalBytes {
			m.fail("a failed rebuild of evicted reconstructable state leaked a block", "physical %d -> %d: %v", before.PhysicalBytes, after.PhysicalBytes, err)
		}
	}
	m.closeProbe(p, c)
}

// smallPool returns a pool of 256-byte blocks capped at n blocks, on a
// backend of its own, and a layout of one 256-byte row per block.
func (m *interaction) smallPool(n int) (*store.Pool, *interactionBackend, *store.Layout) {
	be := newInteractionBackend()
	p, err := store.NewPool(be, store.PoolOptions{BlockBytes: 256, MaxBytes: int64(n) * 256})
	if err != nil {
		m.t.Fatal(err)
	}
	l := &store.Layout{Type: "Probe", Columns: []store.Column{{Name: "V", ElemSize: 4, Width: 64}}, Growth: store.Append, BlockRows: 1}
	return p, be, l
}

func (m *interaction) closeProbe(p *store.Pool, hs ...*store.Head) {
	for _, h := range hs {
		h.Release()
	}
	p.WaitPending()
	if err := p.Close(); err != nil {
		m.fail("probe pool close", "%v", err)
	}
}

// probePending releases a head whose blocks a kernel still uses, which
// finishes a moment later, and allocates at once: the reference holds no
// more than the cap, so the call waits for the pending blocks instead of
// failing, and evicts no optional state.
func (m *interaction) probePending() {
	const capBlocks = 64
	p, be, l := m.smallPool(capBlocks)
	k := 16 + m.rng.IntN(40)
	a := m.mustHead(p, l, "a", k)
	ol := *l
	ol.Retention = store.Optional
	o := m.mustHead(p, &ol, "o", capBlocks-k)
	st, _ := be.NewStream()
	defer st.Close()
	if err := a.RecordStream(st); err != nil {
		m.fail("RecordStream", "%v", err)
	}
	st.(*interactionStream).do(func() error { time.Sleep(2 * time.Millisecond); return nil })
	a.Release()
	j := 1 + m.rng.IntN(k)
	b, err := p.NewHead(l, "b")
	if err != nil {
		m.t.Fatal(err)
	}
	err = b.Append([][]byte{make([]byte, j*256)})
	ev := p.Stats().EvictedBytes
	if errors.Is(err, store.ErrNoMemory) {
		m.fail("ErrNoMemory while blocks are pending behind a kernel", "%d of %d blocks live, %d pending, %d wanted: %v", capBlocks-k, capBlocks, k, j, err)
	}
	if ev > 0 {
		m.fail("eviction while pending blocks would do (optional state evicted before waiting for a kernel)", "evicted %d bytes for %d blocks, %d pending", ev, j, k)
	}
	m.closeProbe(p, o, b)
}

// mustHead returns a head of l for owner with rows rows.
func (m *interaction) mustHead(p *store.Pool, l *store.Layout, owner store.Owner, rows int) *store.Head {
	h, err := p.NewHead(l, owner)
	if err != nil {
		m.t.Fatal(err)
	}
	if rows > 0 {
		if err := h.Append([][]byte{m.randBytes(rows * l.Columns[0].RowBytes())}); err != nil {
			m.t.Fatalf("probe setup: %v", err)
		}
	}
	return h
}

// probePlan fills a small pool with optional state and asks a checkpointed
// head for a plan, its pool's first: Plan reconstructs nothing, so it
// evicts nothing.
func (m *interaction) probePlan() {
	p, _, l := m.smallPool(32 + m.rng.IntN(32))
	cl := &store.Layout{Type: "ProbeCkpt", Columns: l.Columns, Growth: store.Mutable, Bound: 2, BlockRows: 1,
		Checkpoint: &store.CheckpointPolicy{Every: 1, Keep: 2}}
	c, err := p.NewHead(cl, "c")
	if err != nil {
		m.t.Fatal(err)
	}
	for range 2 {
		if err := c.Write(0, [][]byte{m.randBytes(256)}); err != nil {
			m.t.Fatalf("probe setup: %v", err)
		}
	}
	ol := *l
	ol.Retention = store.Optional
	var opt []*store.Head
	for i := 0; i < 200 && p.Stats().EvictedBytes == 0; i++ {
		opt = append(opt, m.mustHead(p, &ol, store.Owner(fmt.Sprint("o", i)), 1))
	}
	before := p.Stats().EvictedBytes
	_, err = c.Plan(1)
	if after := p.Stats().EvictedBytes; after != before {
		m.fail("Plan evicted optional state (its first call calibrates through reclaim)", "evicted %d bytes (%v)", after-before, err)
	}
	m.closeProbe(p, append(opt, c)...)
}

// probeBlockingFree makes the backend's Free block while Trim gives a slab
// back, and checks that calls on an unrelated head complete meanwhile: no
// pool lock is held across a backend call that waits.
func (m *interaction) probeBlockingFree() {
	be := newInteractionBackend()
	p, err := store.NewPool(be, store.PoolOptions{BlockBytes: 256})
	if err != nil {
		m.t.Fatal(err)
	}
	l := &store.Layout{Type: "Probe", Columns: []store.Column{{Name: "V", ElemSize: 4, Width: 4}}, Growth: store.Append, BlockRows: 1}
	u := m.mustHead(p, l, "u", 3)
	vl := *l
	vl.Columns = []store.Column{{Name: "W", ElemSize: 4, Width: 64}}
	vl.BlockRows = 2 + m.rng.IntN(5) // blocks of another size: a slab of their own
	v := m.mustHead(p, &vl, "v", 4)
	v.Release()
	gate, in := make(chan struct{}), make(chan struct{}, 1)
	be.mu.Lock()
	be.blockFree, be.inFree = gate, in
	be.mu.Unlock()
	trimmed := make(chan struct{})
	go func() { p.Trim(); close(trimmed) }()
	select {
	case <-in:
	case <-trimmed:
		close(gate)
		m.closeProbe(p, u)
		return
	}
	calls := map[string]func(){
		"Read":   func() { u.Read(0, 1, [][]byte{make([]byte, 16)}) },
		"Append": func() { u.Append([][]byte{make([]byte, 16)}) },
		"Stats":  func() { p.Stats() },
		"Snapshot": func() {
			s, err := u.Snapshot()
			if err == nil {
				s.Release()
			}
		},
	}
	var stalled []string
	for name, f := range calls {
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			stalled = append(stalled, name)
		}
	}
	close(gate)
	<-trimmed
	if len(stalled) > 0 {
		m.fail("lock held across a blocking backend call (Free under the pool lock)", "while Free blocked in Trim, %v on an unrelated head stalled", stalled)
	}
	m.closeProbe(p, u)
}

// probeClosed closes a pool under live handles: they then answer
// ErrReleased and report no rows and no bytes.
func (m *interaction) probeClosed() {
	p, _, l := m.smallPool(64)
	h := m.mustHead(p, l, "h", 1+m.rng.IntN(8))
	s, err := h.Snapshot()
	if err != nil {
		m.t.Fatal(err)
	}
	if err := p.Close(); err == nil {
		m.fail("Close under live handles", "no error naming them")
	}
	hs, ss := h.Stats(), s.Stats()
	if h.Len() != 0 || s.Len() != 0 || hs.Rows != 0 || hs.LogicalBytes != 0 || hs.PhysicalBytes != 0 ||
		ss.Rows != 0 || ss.LogicalBytes != 0 || ss.PhysicalBytes != 0 {
		m.fail("a handle of a closed pool still reports its rows or bytes", "head: len %d %+v; snapshot: len %d %+v", h.Len(), hs, s.Len(), ss)
	}
	if err := h.Read(0, 0, [][]byte{{}}); !errors.Is(err, store.ErrReleased) {
		m.fail("a handle of a closed pool still reads", "%v", err)
	}
}

// probeNil calls methods on nil handles: each answers, none panics.
func (m *interaction) probeNil() {
	var h *store.Head
	var s *store.Snap
	var t *store.BlockTable
	var p *store.Pool
	var g *buffer.TransitionState
	calls := []struct {
		name string
		f    func()
	}{
		{"(*Head).Len", func() { h.Len() }}, {"(*Head).Version", func() { h.Version() }},
		{"(*Head).Stats", func() { h.Stats() }}, {"(*Head).Read", func() { h.Read(0, 0, nil) }},
		{"(*Head).Append", func() { h.Append(nil) }}, {"(*Head).Snapshot", func() { h.Snapshot() }},
		{"(*Head).Branch", func() { h.Branch() }}, {"(*Head).Rollback", func() { h.Rollback(nil) }},
		{"(*Head).RecordStream", func() { h.RecordStream(nil) }}, {"(*Head).BlockTable", func() { h.BlockTable() }},
		{"(*Head).At", func() { h.At(0) }}, {"(*Head).Release", func() { h.Release() }},
		{"(*Snap).Len", func() { s.Len() }}, {"(*Snap).Read", func() { s.Read(0, 0, nil) }},
		{"(*Snap).Stats", func() { s.Stats() }}, {"(*Snap).Release", func() { s.Release() }},
		{"(*BlockTable).Column", func() { t.Column(0) }}, {"(*BlockTable).Release", func() { t.Release() }},
		{"(*Pool).Stats", func() { p.Stats() }}, {"(*Pool).Trim", func() { p.Trim() }},
		{"(*Pool).NewHead", func() { p.NewHead(&store.Layout{}, "x") }}, {"(*Pool).Close", func() { p.Close() }},
		{"(*Head).Merge(nil)", func() {
			if x := m.pickHead(""); x != nil && x.StateErr() == nil {
				x.Head.Merge(nil)
			}
		}},
		{"generated (*TransitionState).Len", func() { g.Len() }},
		{"generated (*TransitionState).Release", func() { g.Release() }},
	}
	for _, c := range calls {
		m.cur = nil // a panic here is the nil handle's, no model handle's
		m.guard("nil receiver: "+c.name, c.f)
	}
}

// probeReadInto makes a generated ReadInto fail (a backend fault, then a
// closed pool): dst must be left as it was.
func (m *interaction) probeReadInto() {
	be := newInteractionBackend()
	p, err := state.NewPool(be, state.PoolOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	s, err := buffer.NewTransitionState(p, "learner")
	if err != nil {
		m.t.Fatal(err)
	}
	n := 8 + m.rng.IntN(100)
	batch := buffer.Transition{Obs: make([]float32, 4*n), Action: make([]int32, n), Reward: make([]float32, n)}
	if err := s.Append(batch); err != nil {
		m.t.Fatal(err)
	}
	dst := buffer.Transition{Obs: make([]float32, 0, 4*n), Action: make([]int32, 0, n), Reward: make([]float32, 0, n)}
	be.arm(mCopyDtoH, 0)
	err = s.ReadInto(&dst, 0, n)
	be.disarm()
	if err == nil {
		m.fail("probe setup", "ReadInto with a failing copy succeeded")
	}
	if len(dst.Obs) != 0 || len(dst.Action) != 0 || len(dst.Reward) != 0 {
		m.fail("a failed call changed its arguments (generated ReadInto resized dst before failing)", "%v; dst now holds %d rows", err, len(dst.Action))
	}
	p.Close()
	if err := s.ReadInto(&dst, 0, n); err == nil || len(dst.Action) != 0 {
		m.fail("a failed call changed its arguments (generated ReadInto on a closed pool)", "%v; dst now holds %d rows", err, len(dst.Action))
	}
}

// rollbackCost runs merge, append, snapshot, append, rollback cycles on a
// head that invalidates descendants (the merge of a branch that appended
// grows the line two segments: a rollback's append goes on in the head's
// segment), with a branch of its lineage live and growing twice as deep,
// and counts the segments each of the head's
// rollbacks passes to find what it invalidates (Head.InvalidationSteps):
// a rollback's work must not grow with the history behind it (O(log
// depth) per live handle; a walk of every handle's chain grows with the
// cycles). A count, not a time: timed, the check flaked under -race on a
// loaded machine. BenchmarkRollbackInvalidate times the cycle.
func rollbackCost(t *testing.T, cycles int) {
	p, err := store.NewPool(device.Host(), store.PoolOptions{BlockBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l := &store.Layout{Type: "RollbackCost", Columns: []store.Column{{Name: "V", ElemSize: 4, Width: 1}}, Growth: store.Append,
		Descendants: store.Invalidate, BlockRows: 16}
	h, err := p.NewHead(l, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	br, err := h.Branch()
	if err != nil {
		t.Fatal(err)
	}
	defer br.Release()
	row := [][]byte{make([]byte, 4)}
	cycle := func(x *store.Head) int {
		c, err := x.Branch()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Append(row); err != nil {
			t.Fatal(err)
		}
		if err := x.Merge(c); err != nil {
			t.Fatal(err)
		}
		c.Release()
		if err := x.Append(row); err != nil {
			t.Fatal(err)
		}
		s, err := x.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Append(row); err != nil {
			t.Fatal(err)
		}
		before := x.InvalidationSteps()
		if err := x.Rollback(s); err != nil {
			t.Fatal(err)
		}
		n := x.InvalidationSteps() - before
		s.Release()
		return n
	}
	var early, late int
	for i := range cycles {
		cycle(br)
		cycle(br)
		n := cycle(h)
		if i < 10 {
			early = max(early, n)
		}
		if i >= cycles-10 {
			late = max(late, n)
		}
	}
	t.Logf("segments passed per rollback: %d early, %d after %d cycles", early, late, cycles)
	if lim := early + 3*bits.Len(uint(4*cycles)) + 2; late > lim {
		t.Fatalf("defect class: rollback cost grows with history (descendants=invalidate walks every handle's segment chain): "+
			"a rollback after %d cycles passed %d segments, the first ones %d (limit %d)", cycles, late, early, lim)
	}
}
