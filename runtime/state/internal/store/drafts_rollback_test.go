package store

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Rollbacks past drafts' snapshots that write on in the tail
// block (move.go: lowerTails, snapWaits).

// gateRecord is the host backend whose Record, armed, waits for let
// before it records: a call that checks its stream (checkStream) stops
// there, after Snap.begin and before it records the stream on blocks.
type gateRecord struct {
	device.Backend
	device.Streams
	armed   atomic.Bool
	entered chan struct{}
	let     chan struct{}
}

func newGateRecord() *gateRecord {
	b := device.Host()
	return &gateRecord{Backend: b, Streams: b.(device.Streams), entered: make(chan struct{}), let: make(chan struct{})}
}

func (g *gateRecord) Record(st device.Stream) (device.Event, error) {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.let
	}
	return g.Streams.Record(st)
}

// A host kernel that waits until its gate opens, then copies 4 bytes at
// its argument into draftSeen: work queued on a stream before the reads
// the test checks.
var (
	draftGate    chan struct{}
	draftSeen    []byte
	draftKernels sync.Once
)

func draftKernel(t *testing.T, b device.Backend) device.Function {
	t.Helper()
	draftKernels.Do(func() {
		check(t, device.RegisterHostKernel("drafts.gate", func(mem device.HostMemory, _, _ device.Dim3, args []any) error {
			<-draftGate
			if len(args) == 1 {
				src, err := mem.Bytes(args[0].(device.Ptr), 4)
				if err != nil {
					return err
				}
				draftSeen = bytes.Clone(src)
			}
			return nil
		}))
	})
	k := b.(device.Kernels)
	mod := must[device.Module](t)(k.LoadModule("drafts"))
	return must[device.Function](t)(mod.Function("drafts.gate"))
}

// draftHead returns a head of tokLayout with rows 1, 2, 3, the snapshot
// s0 of them, then rows 101 and 102 each followed by a snapshot (s1 at 4
// rows, s2 at 5).
func draftHead(t *testing.T, p *Pool) (h *Head, s0, s1, s2 *Snap) {
	t.Helper()
	h = must[*Head](t)(p.NewHead(tokLayout, "me"))
	for i := range 3 {
		check(t, h.Append(tokRow(uint32(i+1))))
	}
	s0 = must[*Snap](t)(h.Snapshot())
	check(t, h.Append(tokRow(101)))
	s1 = must[*Snap](t)(h.Snapshot())
	check(t, h.Append(tokRow(102)))
	s2 = must[*Snap](t)(h.Snapshot())
	return h, s0, s1, s2
}

// draftRig returns a pool over a gateRecord backend, a head with its
// drafts' snapshots (draftHead: s2 is released at the test's end with the
// rest) and a stream of the backend.
func draftRig(t *testing.T) (g *gateRecord, h *Head, s0, s1 *Snap, st device.Stream) {
	t.Helper()
	g = newGateRecord()
	t.Cleanup(func() { g.Backend.Close() })
	p := must[*Pool](t)(NewPool(g, PoolOptions{}))
	t.Cleanup(func() { check(t, p.Close()) })
	h, s0, s1, s2 := draftHead(t, p)
	st = must[device.Stream](t)(g.NewStream())
	t.Cleanup(func() {
		check(t, st.Close())
		for _, s := range []*Snap{s2, s1, s0} {
			check(t, s.Release())
		}
		check(t, h.Release())
	})
	return g, h, s0, s1, st
}

// TestDraftsReadAsyncOfDraftDuringRollback: a ReadAsync of a draft's
// snapshot that began before the rollback invalidated it, and queued its
// copy to run later on the stream, delivers the snapshot's rows: the
// rollback waits for the call (the snapshot's read lock) and then sees the
// stream recorded on the tail block, so the head's next append copies the
// block rather than write its row over the draft's.
func TestDraftsReadAsyncOfDraftDuringRollback(t *testing.T) {
	g, h, s0, s1, st := draftRig(t)
	draftGate = make(chan struct{})
	check(t, g.Backend.(device.Kernels).Launch(st, draftKernel(t, g.Backend), device.Dim3{X: 1}, device.Dim3{X: 1}, 0))

	g.armed.Store(true)
	dst := [][]byte{make([]byte, 4), make([]byte, 8)}
	readErr := make(chan error, 1)
	go func() { readErr <- s1.ReadAsync(st, 3, 4, dst) }()
	<-g.entered // the read has begun: s1 valid, its read lock held
	rbErr := make(chan error, 1)
	go func() { rbErr <- h.Rollback(s0) }()
	time.Sleep(100 * time.Millisecond) // the rollback marks s1 and lowers the tail's fill, then waits for s1's lock
	close(g.let)
	var err error
	select {
	case err = <-readErr:
	case <-time.After(5 * time.Second):
		t.Fatal("ReadAsync stalled")
	}
	select {
	case e := <-rbErr:
		check(t, e)
	case <-time.After(5 * time.Second):
		t.Fatal("Rollback stalled")
	}
	check(t, h.Append(tokRow(500)))
	close(draftGate)
	check(t, st.Sync())
	if err != nil {
		t.Logf("ReadAsync: %v (acceptable)", err)
		return
	}
	if !equalCols(dst, tokRow(101)) {
		t.Fatalf("a ReadAsync of draft snapshot s1 that succeeded delivered another row: %v, want %v (row 500 is %v)", dst, tokRow(101), tokRow(500))
	}
}

// TestDraftsRecordStreamOfDraftDuringRollback: a kernel reads a draft's
// snapshot through its spans on a stream, and the stream is recorded on
// the snapshot (RecordStream) by a call that began before the rollback
// invalidated the snapshot: the stream keeps the snapshot's blocks (the
// guide's promise), so the head's next append does not write over the
// rows the kernel reads.
func TestDraftsRecordStreamOfDraftDuringRollback(t *testing.T) {
	g, h, s0, s1, st := draftRig(t)
	spans := must[[][]device.Span](t)(s1.Spans(3, 4))
	draftGate = make(chan struct{})
	draftSeen = nil
	check(t, g.Backend.(device.Kernels).Launch(st, draftKernel(t, g.Backend), device.Dim3{X: 1}, device.Dim3{X: 1}, 0, spans[0][0].Ptr))

	g.armed.Store(true)
	recErr := make(chan error, 1)
	go func() { recErr <- s1.RecordStream(st) }()
	<-g.entered
	rbErr := make(chan error, 1)
	go func() { rbErr <- h.Rollback(s0) }()
	time.Sleep(100 * time.Millisecond)
	close(g.let)
	err := <-recErr
	check(t, <-rbErr)
	check(t, h.Append(tokRow(500)))
	close(draftGate)
	check(t, st.Sync())
	if err != nil {
		t.Logf("RecordStream: %v (acceptable)", err)
		return
	}
	if !bytes.Equal(draftSeen, tokRow(101)[0]) {
		t.Fatalf("RecordStream on draft s1 succeeded, yet the kernel queued before it read %v, want %v", draftSeen, tokRow(101)[0])
	}
}

// TestDraftsGroupRegisteredStateKept: a shared group registers
// every member's state when its shared member's append ends at a block
// boundary; the registration holds each member's version past a cut
// (capture). A rollback of the group to that cut must not let another
// member write on in place in the tail block whose rows the registered
// state reads: a group adopting the prefix would read the accepted row
// instead of the registered one.
func TestDraftsGroupRegisteredStateKept(t *testing.T) {
	for _, extraSnap := range []bool{false, true} {
		c := statetest.NewCounts(device.Host())
		p := must[*Pool](t)(NewPool(c, PoolOptions{}))
		other := kv(Append, 0, Invalidate)
		a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, other))
		var toks []uint32
		want := [][]byte{{}, {}}
		for i := range 15 {
			check(t, a.Head(1).Append(kvRows(1, byte(i))))
			want = concat(want, kvRows(1, byte(i)))
			toks = append(toks, uint32(i+1))
			check(t, a.Head(0).Append(tokRow(uint32(i+1))))
		}
		cut := must[*GroupSnap](t)(a.Snapshot())
		check(t, a.Head(1).Append(kvRows(1, 0xAA))) // the draft
		want = concat(want, kvRows(1, 0xAA))
		toks = append(toks, 16)
		check(t, a.Head(0).Append(tokRow(16))) // a full block: registers both members
		var drafts *GroupSnap
		if extraSnap {
			drafts = must[*GroupSnap](t)(a.Snapshot())
		}
		check(t, a.Rollback(cut))
		c.Reset()
		check(t, a.Head(1).Append(kvRows(1, 0xBB))) // the accepted row
		t.Logf("extraSnap %v: %d device copies for the accepted row", extraSnap, c.Calls("CopyDtoD")+c.Calls("CopiesDtoD"))
		check(t, a.Head(0).Append(tokRow(99)))

		b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, other))
		n, err := b.AdoptPrefix(keysOf(toks))
		if err != nil || n != 16 {
			t.Fatalf("extraSnap %v: AdoptPrefix = %d, %v; want 16", extraSnap, n, err)
		}
		got := readGroupCols(t, b.Head(1), 2)
		if !equalCols(got, want) {
			t.Errorf("extraSnap %v: the adopted member reads other rows than the registered state's: row 15 %v, want %v",
				extraSnap, got[1][15*8:], want[1][15*8:])
		}
		check(t, b.Release())
		if drafts != nil {
			check(t, drafts.Release())
		}
		check(t, cut.Release())
		check(t, a.Release())
		check(t, p.Close())
	}
}

var _ = errors.Is

// TestDraftsGroupAdoptedRowsKept: another owner's group adopts the
// registered state (sharing the blocks) before the first group rolls back
// past the registration and appends: the adopter's rows, which it reads
// as its own, must not change under it.
func TestDraftsGroupAdoptedRowsKept(t *testing.T) {
	p := newPool(t, PoolOptions{})
	other := kv(Append, 0, Invalidate)
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, other))
	defer a.Release()
	var toks []uint32
	for i := range 15 {
		check(t, a.Head(1).Append(kvRows(1, byte(i))))
		toks = append(toks, uint32(i+1))
		check(t, a.Head(0).Append(tokRow(uint32(i+1))))
	}
	cut := must[*GroupSnap](t)(a.Snapshot())
	defer cut.Release()
	check(t, a.Head(1).Append(kvRows(1, 0xAA)))
	toks = append(toks, 16)
	check(t, a.Head(0).Append(tokRow(16))) // registers
	b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, other))
	defer b.Release()
	if n, err := b.AdoptPrefix(keysOf(toks)); err != nil || n != 16 {
		t.Fatalf("AdoptPrefix = %d, %v", n, err)
	}
	before := readGroupCols(t, b.Head(1), 2)
	check(t, a.Rollback(cut))
	check(t, a.Head(1).Append(kvRows(1, 0xBB)))
	if after := readGroupCols(t, b.Head(1), 2); !equalCols(before, after) {
		t.Fatalf("owner b's adopted member changed under it when owner a appended: row 15 %v, was %v", after[1][15*8:], before[1][15*8:])
	}
}
