package store

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestMoveAllocatesNothing: a rollback or a merge, of one head or of a
// group's members, allocates nothing once the heads have their blocks (a
// speculative decoder rolls back every step).
func TestMoveAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	p := newPool(t, PoolOptions{})
	h := must[*Head](t)(p.NewHead(rec(Keep), "s"))
	defer h.Release()
	check(t, h.Write(0, recRow(1)))
	var s Snap
	check(t, h.SnapshotInto(&s))
	defer s.Release()
	var c Head
	check(t, h.BranchInto(&c))
	defer c.Release()
	g := newTestGroup(t, p, Keep)
	defer g.Release()
	check(t, g.Head(1).Write(0, recRow(2)))
	cut := must[*GroupSnap](t)(g.Snapshot())
	defer cut.Release()
	child := must[*Group](t)(g.Branch())
	defer child.Release()
	for name, f := range map[string]func() error{
		"Head.Rollback":  func() error { return h.Rollback(&s) },
		"Head.Merge":     func() error { return h.Merge(&c) },
		"Group.Rollback": func() error { return g.Rollback(cut) },
		"Group.Merge":    func() error { return g.Merge(child) },
	} {
		check(t, f()) // the first may free what the head held past the target
		var err error
		if n := testing.AllocsPerRun(100, func() { err = f() }); n > 0 {
			t.Errorf("%s: %.2f allocations a call; want none", name, n)
		}
		check(t, err)
	}
}

// TestRollbackWritesOnInTheTail: a speculative decoder's step (snapshot,
// drafts, rollback, the accepted token) writes the token on in the tail
// block when no one took a draft, copying nothing; when a snapshot took
// one, the tail block is copied, and that snapshot still reads the draft.
func TestRollbackWritesOnInTheTail(t *testing.T) {
	for _, took := range []bool{false, true} {
		c := statetest.NewCounts(device.Host())
		p := must[*Pool](t)(NewPool(c, PoolOptions{BlockBytes: 256}))
		h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "me")) // 16 rows a key block
		check(t, h.Append(kvRows(5, 1)))
		want := kvRows(5, 1)
		var draft *Snap
		var wantDraft [][]byte
		for step := range 3 {
			s := must[*Snap](t)(h.Snapshot())
			check(t, h.Append(kvRows(2, byte(10+step)))) // in place, past the snapshot's rows
			if took {
				if draft != nil {
					check(t, draft.Release())
				}
				draft = must[*Snap](t)(h.Snapshot())
				wantDraft = concat(want, kvRows(2, byte(10+step)))
			}
			check(t, h.Rollback(s))
			c.Reset()
			check(t, h.Append(kvRows(1, byte(20+step))))
			want = concat(want, kvRows(1, byte(20+step)))
			if copies := c.Calls("CopyDtoD") + c.Calls("CopiesDtoD"); (copies > 0) != took {
				t.Errorf("took=%v step %d: %d device copies for the accepted row", took, step, copies)
			}
			check(t, s.Release())
			if !equalCols(readAll(t, h), want) {
				t.Fatalf("took=%v step %d: the head reads other rows", took, step)
			}
			if draft != nil && !equalCols(readAll(t, draft), wantDraft) {
				t.Fatalf("step %d: the draft's snapshot reads other rows after the accepted row", step)
			}
		}
		if draft != nil {
			check(t, draft.Release())
		}
		check(t, h.Release())
		check(t, p.Close())
	}
}

// TestRollbackKeepsASharedTail: a shared group whose drafts end a block
// registers the group's state there; a rollback past the drafts must not
// let the accepted rows overwrite the block the registration holds, or a
// session adopting the drafts' tokens reads other rows.
func TestRollbackKeepsASharedTail(t *testing.T) {
	p := newPool(t, PoolOptions{})
	prompt := make([]uint32, 16)
	for i := range prompt {
		prompt[i] = uint32(i*7 + 1)
	}
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
	defer a.Release()
	for _, tok := range prompt[:10] {
		feedTok(t, a, tok)
	}
	cut := must[*GroupSnap](t)(a.Snapshot())
	defer cut.Release()
	for _, tok := range prompt[10:] { // the drafts end the block: registered
		feedTok(t, a, tok)
	}
	want := readGroupCols(t, a.Head(0), 2)
	check(t, a.Rollback(cut))
	for _, tok := range []uint32{900, 901, 902} {
		feedTok(t, a, tok)
	}
	b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, groupRecLayout))
	defer b.Release()
	if n := must[int](t)(b.AdoptPrefix(keysOf(prompt))); n != 16 {
		t.Fatalf("AdoptPrefix = %d, want 16", n)
	}
	if got := readGroupCols(t, b.Head(0), 2); !equalCols(got, want) {
		t.Error("the adopted rows are not the drafts' the group registered")
	}
}

// TestRollbackWritesOnInAFullTail: a head of a shared layout made in no
// domain, whose drafts filled its tail block, writes the accepted row on
// in that block after the rollback, copying nothing: it registered
// nothing, so no other head can read the block. A head in a domain
// copies it, since a session may have adopted the full block.
func TestRollbackWritesOnInAFullTail(t *testing.T) {
	for _, domain := range []Domain{"", "d"} {
		c := statetest.NewCounts(device.Host())
		p := must[*Pool](t)(NewPool(c, PoolOptions{}))
		var h *Head
		if domain == "" {
			h = must[*Head](t)(p.NewHead(tokLayout, "me"))
		} else {
			h = must[*Head](t)(p.NewSharedHead(tokLayout, "me", domain))
		}
		want := [][]byte{{}, {}}
		for i := range 3 {
			check(t, h.Append(tokRow(uint32(i+1))))
			want = concat(want, tokRow(uint32(i+1)))
		}
		for step := range 3 {
			s := must[*Snap](t)(h.Snapshot())
			for i := h.Len(); i < 16; i++ { // the drafts fill the block
				check(t, h.Append(tokRow(uint32(100+i))))
			}
			check(t, h.Rollback(s))
			c.Reset()
			check(t, h.Append(tokRow(uint32(200+step))))
			want = concat(want, tokRow(uint32(200+step)))
			if copies := c.Calls("CopyDtoD") + c.Calls("CopiesDtoD"); (copies > 0) != (domain != "") {
				t.Errorf("domain %q, step %d: %d device copies for the accepted row", domain, step, copies)
			}
			check(t, s.Release())
			if !equalCols(readGroupCols(t, h, 2), want) {
				t.Fatalf("domain %q, step %d: the head reads other rows", domain, step)
			}
		}
		check(t, h.Release())
		check(t, p.Close())
	}
}

// TestRollbackPastDraftSnapshotsWritesOn: a decoder that snapshots after
// every draft and rolls back to one of them appends the accepted row in
// place in the tail block: the rollback invalidates the later drafts'
// snapshots (descendants=invalidate), so nothing reads the bytes past the
// target's rows. A branch taken past the target keeps the bytes (its
// reads are not waited for), and the next append copies the block. The
// snapshots at or before the target read their own rows throughout.
func TestRollbackPastDraftSnapshotsWritesOn(t *testing.T) {
	for _, branch := range []bool{false, true} {
		for k := range 4 {
			c := statetest.NewCounts(device.Host())
			p := must[*Pool](t)(NewPool(c, PoolOptions{}))
			h := must[*Head](t)(p.NewHead(tokLayout, "me"))
			want := [][]byte{{}, {}}
			for i := range 3 {
				check(t, h.Append(tokRow(uint32(i+1))))
				want = concat(want, tokRow(uint32(i+1)))
			}
			var snaps [4]*Snap
			var wants [4][][]byte
			var b *Head
			cur := want
			for i := range 4 {
				snaps[i] = must[*Snap](t)(h.Snapshot())
				wants[i] = cur
				check(t, h.Append(tokRow(uint32(100+i))))
				cur = concat(cur, tokRow(uint32(100+i)))
				if branch && i == 3 {
					b = must[*Head](t)(h.Branch())
				}
			}
			check(t, h.Rollback(snaps[k]))
			c.Reset()
			check(t, h.Append(tokRow(500)))
			if copies := c.Calls("CopyDtoD") + c.Calls("CopiesDtoD"); (copies > 0) != branch {
				t.Errorf("branch %v, back to draft %d: %d device copies for the accepted row", branch, k, copies)
			}
			for i, s := range snaps {
				got, err := readTok(s)
				switch {
				case i <= k && err != nil:
					t.Errorf("branch %v, back to draft %d: snapshot %d: %v", branch, k, i, err)
				case i <= k && !equalCols(got, wants[i]):
					t.Errorf("branch %v, back to draft %d: snapshot %d reads other rows", branch, k, i)
				case i > k && !errors.Is(err, ErrInvalidated):
					t.Errorf("branch %v, back to draft %d: snapshot %d: %v, want ErrInvalidated", branch, k, i, err)
				}
				check(t, s.Release())
			}
			if got, w := readGroupCols(t, h, 2), concat(wants[k], tokRow(500)); !equalCols(got, w) {
				t.Errorf("branch %v, back to draft %d: the head reads other rows", branch, k)
			}
			if b != nil {
				if err := b.Read(0, 1, [][]byte{make([]byte, 4), make([]byte, 8)}); !errors.Is(err, ErrInvalidated) {
					t.Errorf("branch %v, back to draft %d: branch read: %v, want ErrInvalidated", branch, k, err)
				}
				check(t, b.Release())
			}
			check(t, h.Release())
			check(t, p.Close())
		}
	}
}

// readTok returns every row of x, of tokLayout.
func readTok(x reader) ([][]byte, error) {
	n := x.Len()
	dst := [][]byte{make([]byte, 4*n), make([]byte, 8*n)}
	return dst, x.Read(0, n, dst)
}

// TestRollbackWaitsForDraftReaders: a rollback that lets its head write
// over a draft snapshot's rows in place does not return while a read of
// that snapshot, begun before the rollback invalidated it, is under way
// (here one holding the snapshot's read lock, as Snap.begin does); a read
// that begins after fails with ErrInvalidated.
func TestRollbackWaitsForDraftReaders(t *testing.T) {
	p := newPool(t, PoolOptions{})
	h := must[*Head](t)(p.NewHead(tokLayout, "me"))
	defer h.Release()
	check(t, h.Append(tokRow(1)))
	s0 := must[*Snap](t)(h.Snapshot())
	defer s0.Release()
	check(t, h.Append(tokRow(2)))
	s1 := must[*Snap](t)(h.Snapshot())
	defer s1.Release()
	check(t, h.Append(tokRow(3)))

	s1.mu.RLock() // a read of s1 under way
	done := make(chan error)
	go func() { done <- h.Rollback(s0) }()
	var early bool
	var err error
	select {
	case err = <-done:
		early = true
	case <-time.After(50 * time.Millisecond):
	}
	s1.mu.RUnlock()
	if early {
		t.Fatalf("the rollback returned (%v) while a read of the snapshot it invalidated was under way", err)
	}
	check(t, <-done)
	if _, err := readTok(s1); !errors.Is(err, ErrInvalidated) {
		t.Fatalf("read after the rollback: %v, want ErrInvalidated", err)
	}
	check(t, h.Append(tokRow(4)))
	if got, w := readGroupCols(t, h, 2), concat(tokRow(1), tokRow(4)); !equalCols(got, w) {
		t.Fatal("the head reads other rows")
	}
}

// TestRollbackDraftReadersRace: reads of drafts' snapshots running while
// the head rolls back past them and appends over their rows either fail
// with ErrInvalidated or read the snapshot's rows.
func TestRollbackDraftReadersRace(t *testing.T) {
	p := newPool(t, PoolOptions{})
	h := must[*Head](t)(p.NewHead(tokLayout, "me"))
	defer func() { check(t, h.Release()) }()
	for round := range 20 {
		base := h.Len()
		if base > 900 {
			check(t, h.Release())
			h = must[*Head](t)(p.NewHead(tokLayout, "me"))
			base = 0
		}
		s0 := must[*Snap](t)(h.Snapshot())
		var drafts [3]*Snap
		for i := range drafts {
			check(t, h.Append(tokRow(uint32(1000+i))))
			drafts[i] = must[*Snap](t)(h.Snapshot())
		}
		var wg, ready sync.WaitGroup
		for i, s := range drafts {
			wg.Add(1)
			ready.Add(1)
			go func() {
				defer wg.Done()
				dst := [][]byte{make([]byte, 4), make([]byte, 8)}
				for n := 0; ; n++ {
					err := s.Read(base+i, base+i+1, dst)
					if n == 0 {
						ready.Done()
					}
					if errors.Is(err, ErrInvalidated) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					if !equalCols(dst, tokRow(uint32(1000+i))) {
						t.Errorf("round %d: draft %d's snapshot read another row", round, i)
						return
					}
				}
			}()
		}
		ready.Wait()
		check(t, h.Rollback(s0))
		for range 3 {
			check(t, h.Append(tokRow(uint32(2000+round))))
		}
		wg.Wait()
		for _, s := range drafts {
			check(t, s.Release())
		}
		check(t, s0.Release())
	}
}
