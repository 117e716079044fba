package store

import (
	"errors"
	"sync"
	"testing"
)

// rec is a mutable one-column layout: a recurrent state of 4 rows of 8
// bytes.
func rec(desc Descendants) *Layout {
	return &Layout{
		Type:        "Rec",
		Columns:     []Column{{Name: "H", ElemSize: 8, Width: 1}},
		Growth:      Mutable,
		Bound:       4,
		Descendants: desc,
	}
}

func recRow(seed byte) [][]byte {
	b := make([]byte, 4*8)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return [][]byte{b}
}

// readRec returns the rows of a Rec head or snapshot.
func readRec(t testing.TB, x reader) []byte {
	t.Helper()
	dst := [][]byte{make([]byte, 4*8)}
	check(t, x.Read(0, 4, dst))
	return dst[0]
}

func newTestGroup(t testing.TB, p *Pool, desc Descendants) *Group {
	t.Helper()
	g, err := NewGroup(p, "s", kv(Append, 64, desc), rec(desc))
	check(t, err)
	return g
}

// groupState is what a failed call must leave unchanged.
type groupState struct {
	versions [2]Version
	kv       [][]byte
	rec      []byte
	stats    Stats
}

func stateOf(t testing.TB, g *Group) groupState {
	t.Helper()
	return groupState{
		versions: [2]Version{g.Head(0).Version(), g.Head(1).Version()},
		kv:       readAll(t, g.Head(0)),
		rec:      readRec(t, g.Head(1)),
		stats:    g.Stats(),
	}
}

func sameState(a, b groupState) bool {
	return a.versions == b.versions && equalCols(a.kv, b.kv) && string(a.rec) == string(b.rec) && a.stats == b.stats
}

func TestGroupRollbackAndMerge(t *testing.T) {
	p := newPool(t, PoolOptions{})
	g := newTestGroup(t, p, Invalidate)
	defer g.Release()
	check(t, g.Head(0).Append(kvRows(3, 1)))
	check(t, g.Head(1).Write(0, recRow(1)))
	cut := must[*GroupSnap](t)(g.Snapshot())
	defer cut.Release()
	check(t, g.Head(0).Append(kvRows(2, 2)))
	check(t, g.Head(1).Write(0, recRow(2)))
	check(t, g.Rollback(cut))
	if g.Head(0).Len() != 3 || g.Head(0).Version() != cut.Snap(0).Version() || string(readRec(t, g.Head(1))) != string(recRow(1)[0]) {
		t.Fatalf("after rollback: %d rows, version %d, rec %v", g.Head(0).Len(), g.Head(0).Version(), readRec(t, g.Head(1)))
	}
	// A draft on a branch, merged back: both members fast-forward.
	b := must[*Group](t)(g.Branch())
	defer b.Release()
	check(t, b.Head(0).Append(kvRows(1, 3)))
	check(t, b.Head(1).Write(0, recRow(3)))
	check(t, g.Merge(b))
	if g.Head(0).Len() != 4 || string(readRec(t, g.Head(1))) != string(recRow(3)[0]) {
		t.Fatalf("after merge: %d rows, rec %v", g.Head(0).Len(), readRec(t, g.Head(1)))
	}
	if g.Head(0).Version() != b.Head(0).Version() || g.Head(1).Version() != b.Head(1).Version() {
		t.Fatal("merge did not give the members the child's versions")
	}
}

// TestGroupAllOrNone: a rollback target one member cannot take, or a
// merge one member cannot make, moves no member.
func TestGroupAllOrNone(t *testing.T) {
	p := newPool(t, PoolOptions{})
	// KV keeps what a rollback abandons; Rec invalidates it.
	g, err := NewGroup(p, "s", kv(Append, 64, Keep), rec(Invalidate))
	check(t, err)
	defer g.Release()
	step := func(seed byte) {
		check(t, g.Head(0).Append(kvRows(1, seed)))
		check(t, g.Head(1).Write(0, recRow(seed)))
	}
	step(1)
	cut1 := must[*GroupSnap](t)(g.Snapshot())
	defer cut1.Release()
	step(2)
	cut2 := must[*GroupSnap](t)(g.Snapshot())
	defer cut2.Release()
	step(3)
	check(t, g.Rollback(cut1)) // abandons cut2: Rec's part is invalidated
	step(4)
	before := stateOf(t, g)
	if err := g.Rollback(cut2); !errors.Is(err, ErrInvalidated) {
		t.Fatalf("rollback to a cut one member invalidated: %v", err)
	}
	if !sameState(before, stateOf(t, g)) {
		t.Fatal("a failed group rollback moved a member")
	}
	// A cut whose Rec snapshot was released alone.
	cut3 := must[*GroupSnap](t)(g.Snapshot())
	defer cut3.Release()
	step(5)
	check(t, cut3.Snap(1).Release())
	before = stateOf(t, g)
	if err := g.Rollback(cut3); !errors.Is(err, ErrReleased) {
		t.Fatalf("rollback to a cut with a released part: %v", err)
	}
	if !sameState(before, stateOf(t, g)) {
		t.Fatal("a failed group rollback moved a member")
	}

	// Merge: the KV member diverged since the branch; the Rec member alone
	// could fast-forward, but no member moves.
	g2 := newTestGroup(t, p, Keep)
	defer g2.Release()
	child := must[*Group](t)(g2.Branch())
	defer child.Release()
	check(t, child.Head(0).Append(kvRows(1, 4)))
	check(t, child.Head(1).Write(0, recRow(4)))
	check(t, g2.Head(0).Append(kvRows(1, 5)))
	before = stateOf(t, g2)
	if err := g2.Merge(child); !errors.Is(err, ErrDiverged) {
		t.Fatalf("merge after a member diverged: %v", err)
	}
	if !sameState(before, stateOf(t, g2)) {
		t.Fatal("a failed group merge moved a member")
	}
	// Foreign cuts and children.
	if err := g2.Rollback(cut1); !errors.Is(err, ErrNotAncestor) {
		t.Fatalf("rollback to another group's cut: %v", err)
	}
	if err := g2.Merge(g); !errors.Is(err, ErrDiverged) {
		t.Fatalf("merge of another group: %v", err)
	}
	if err := g2.Rollback(nil); !errors.Is(err, ErrNotAncestor) {
		t.Fatalf("rollback to nil: %v", err)
	}
	if err := g2.Merge(nil); !errors.Is(err, ErrDiverged) {
		t.Fatalf("merge of nil: %v", err)
	}
	if !sameState(before, stateOf(t, g2)) {
		t.Fatal("a failed group call changed a member")
	}
}

// TestGroupCoupled: Rollback, Merge and Release of a member answer
// ErrCoupled and change nothing; its other calls, and its own snapshots
// and branches, are its own.
func TestGroupCoupled(t *testing.T) {
	p := newPool(t, PoolOptions{})
	g := newTestGroup(t, p, Invalidate)
	kvh, rech := g.Head(0), g.Head(1)
	check(t, kvh.Append(kvRows(2, 1)))
	s := must[*Snap](t)(kvh.Snapshot())
	defer s.Release()
	check(t, kvh.Append(kvRows(2, 2)))
	b := must[*Head](t)(rech.Branch())
	check(t, b.Write(0, recRow(5)))
	before := stateOf(t, g)
	for name, err := range map[string]error{
		"Rollback": kvh.Rollback(s),
		"Merge":    rech.Merge(b),
		"Release":  kvh.Release(),
	} {
		if !errors.Is(err, ErrCoupled) {
			t.Errorf("%s on a member: %v, want ErrCoupled", name, err)
		}
	}
	if !sameState(before, stateOf(t, g)) {
		t.Fatal("a coupled call changed a member")
	}
	// The member's own branch is an ordinary handle.
	b2 := must[*Head](t)(b.Branch())
	check(t, b.Merge(b2))
	check(t, b2.Release())
	check(t, b.Release())
	if st := p.Stats(); st.Live != 3 { // two members and the snapshot
		t.Fatalf("live handles %d, want 3 (each member counts)", st.Live)
	}
	check(t, g.Release())
	check(t, g.Release())
	if err := kvh.Append(kvRows(1, 1)); !errors.Is(err, ErrReleased) {
		t.Fatalf("a member after the group's release: %v", err)
	}
	if _, err := g.Snapshot(); !errors.Is(err, ErrReleased) {
		t.Fatalf("a released group: %v", err)
	}
	if st := p.Stats(); st.Live != 1 {
		t.Fatalf("live handles after release %d, want 1", st.Live)
	}
}

// TestGroupConsistentCut: a writer updates the members one after the
// other; a cut never sees the second member ahead of the first.
func TestGroupConsistentCut(t *testing.T) {
	p := newPool(t, PoolOptions{})
	g, err := NewGroup(p, "s", kv(Append, 1<<16, Keep), kv(Append, 1<<16, Keep))
	check(t, err)
	defer g.Release()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if g.Head(0).Append(kvRows(1, byte(i))) != nil || g.Head(1).Append(kvRows(1, byte(i))) != nil {
				return // the bound: the cuts below have seen enough
			}
		}
	}()
	defer wg.Wait()
	defer close(stop)
	for i := 0; i < 2000; i++ {
		cut := must[*GroupSnap](t)(g.Snapshot())
		a, b := cut.Snap(0).Len(), cut.Snap(1).Len()
		check(t, cut.Release())
		if a != b && a != b+1 {
			t.Fatalf("cut of %d and %d rows: a write fell inside it", a, b)
		}
	}
}

// TestGroupFailureGivesBack: NewGroup under MaxBytes that fails at the
// second member, and a Snapshot that fails at the second member, leave
// the pool as they found it.
func TestGroupFailureGivesBack(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 256 * 4})
	big := &Layout{Type: "Big", Columns: []Column{{Name: "A", ElemSize: 256, Width: 1}}, Growth: Mutable, Bound: 16}
	before := p.Stats()
	if _, err := NewGroup(p, "s", kv(Append, 8, Keep), big); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("new group past MaxBytes: %v", err)
	}
	if after := p.Stats(); after.Live != before.Live || after.PhysicalBytes != before.PhysicalBytes || after.LogicalBytes != before.LogicalBytes {
		t.Fatalf("a failed NewGroup kept handles or blocks: %+v", after)
	}
	if _, err := NewGroup(p, "s", kv(Append, 8, Keep)); !errors.Is(err, ErrShape) {
		t.Fatalf("a group of one: %v", err)
	}
	if _, err := NewGroup(p, "", kv(Append, 8, Keep), rec(Keep)); !errors.Is(err, ErrOwner) {
		t.Fatalf("a group of the empty owner: %v", err)
	}

	g := newTestGroup(t, p, Invalidate)
	defer g.Release()
	check(t, g.Head(1).Write(0, recRow(1)))
	early := must[*Snap](t)(g.Head(1).Snapshot())
	defer early.Release()
	check(t, g.Head(1).Write(0, recRow(2)))
	br := must[*Head](t)(g.Head(1).Branch())
	check(t, br.Rollback(early)) // invalidates the Rec member itself
	check(t, br.Release())
	live := p.Stats().Live
	if _, err := g.Snapshot(); !errors.Is(err, ErrInvalidated) {
		t.Fatalf("snapshot of a group with an invalidated member: %v", err)
	}
	if _, err := g.Branch(); !errors.Is(err, ErrInvalidated) {
		t.Fatalf("branch of a group with an invalidated member: %v", err)
	}
	if p.Stats().Live != live {
		t.Fatal("a failed group snapshot or branch kept handles")
	}
}

// TestGroupNil: a nil group or cut answers errors, never a panic.
func TestGroupNil(t *testing.T) {
	var g *Group
	var cut *GroupSnap
	if _, err := g.Snapshot(); !errors.Is(err, ErrReleased) {
		t.Errorf("Snapshot: %v", err)
	}
	if _, err := g.Branch(); !errors.Is(err, ErrReleased) {
		t.Errorf("Branch: %v", err)
	}
	if err := g.Rollback(cut); !errors.Is(err, ErrReleased) {
		t.Errorf("Rollback: %v", err)
	}
	if err := g.Merge(nil); !errors.Is(err, ErrReleased) {
		t.Errorf("Merge: %v", err)
	}
	if g.Release() != nil || cut.Release() != nil || g.Len() != 0 || cut.Len() != 0 || g.Head(0) != nil || cut.Snap(0) != nil || g.Stats() != (Stats{}) {
		t.Error("nil group or cut")
	}
}

// TestReleasedAnswersReleased: a released group or head answers
// ErrReleased from Merge and Rollback whatever it is passed (nil, a
// stranger, its own branch or snapshot), before it looks at the argument.
func TestReleasedAnswersReleased(t *testing.T) {
	p := newPool(t, PoolOptions{})
	g := must[*Group](t)(NewGroup(p, "me", tokLayout, rec(Invalidate)))
	cut := must[*GroupSnap](t)(g.Snapshot())
	defer cut.Release()
	br := must[*Group](t)(g.Branch())
	defer br.Release()
	check(t, g.Release())
	for name, err := range map[string]error{
		"Merge(nil)":      g.Merge(nil),
		"Merge(branch)":   g.Merge(br),
		"Rollback(nil)":   g.Rollback(nil),
		"Rollback(cut)":   g.Rollback(cut),
		"AdoptPrefix":     nilErr(g.AdoptPrefix(keysOf([]uint32{1}))),
		"Snapshot":        nilErr(g.Snapshot()),
		"Branch":          nilErr(g.Branch()),
		"member Rollback": g.Head(1).Rollback(nil),
	} {
		if !errors.Is(err, ErrReleased) {
			t.Errorf("released group %s: %v; want ErrReleased", name, err)
		}
	}
	h := must[*Head](t)(p.NewHead(rec(Invalidate), "me"))
	snap := must[*Snap](t)(h.Snapshot())
	defer snap.Release()
	check(t, h.Release())
	for name, err := range map[string]error{
		"Merge(nil)":     h.Merge(nil),
		"Rollback(nil)":  h.Rollback(nil),
		"Rollback(snap)": h.Rollback(snap),
	} {
		if !errors.Is(err, ErrReleased) {
			t.Errorf("released head %s: %v; want ErrReleased", name, err)
		}
	}
}

// nilErr returns a call's error, its value dropped.
func nilErr[T any](_ T, err error) error { return err }
