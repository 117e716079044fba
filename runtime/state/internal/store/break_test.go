package store

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestRollbackAfterMergeKeepsTheChildsTail: a head merged to a branch that
// wrote in place in the shared tail block, then rolled back (Keep) to a
// snapshot before the branch's rows, must not write its next row over the
// branch's row: the branch stays live and reads it.
func TestRollbackAfterMergeKeepsTheChildsTail(t *testing.T) {
	p := must[*Pool](t)(NewPool(device.Host(), PoolOptions{BlockBytes: 256}))
	defer p.Close()
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "me")) // 16 rows a key block
	defer h.Release()
	check(t, h.Append(kvRows(3, 1)))
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	b := must[*Head](t)(h.Branch())
	defer b.Release()
	check(t, b.Append(kvRows(2, 2))) // in place in the shared tail block
	wantB := concat(kvRows(3, 1), kvRows(2, 2))
	check(t, h.Merge(b))
	check(t, h.Rollback(s))
	check(t, h.Append(kvRows(2, 3)))
	if !equalCols(readAll(t, h), concat(kvRows(3, 1), kvRows(2, 3))) {
		t.Errorf("the head reads other rows")
	}
	if !equalCols(readAll(t, b), wantB) {
		t.Errorf("the branch reads other rows after the head's rollback and append")
	}
}

// TestGroupRollbackAfterMergeKeepsTheChildsTail: as
// TestRollbackAfterMergeKeepsTheChildsTail, for a group's members.
func TestGroupRollbackAfterMergeKeepsTheChildsTail(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	g := newTestGroup(t, p, Keep)
	defer g.Release()
	check(t, g.Head(0).Append(kvRows(3, 1)))
	cut := must[*GroupSnap](t)(g.Snapshot())
	defer cut.Release()
	b := must[*Group](t)(g.Branch())
	defer b.Release()
	check(t, b.Head(0).Append(kvRows(2, 2)))
	check(t, g.Merge(b))
	check(t, g.Rollback(cut))
	check(t, g.Head(0).Append(kvRows(2, 3)))
	if !equalCols(readAll(t, g.Head(0)), concat(kvRows(3, 1), kvRows(2, 3))) {
		t.Errorf("the member reads other rows")
	}
	if !equalCols(readAll(t, b.Head(0)), concat(kvRows(3, 1), kvRows(2, 2))) {
		t.Errorf("the branch's member reads other rows after the group's rollback and append")
	}
}

// TestRollbackTailKeepsEveryHolder: after drafts in place in the tail
// block, a rollback and the next append leave every other holder reading
// its own rows: a branch of the draft (appending after, or not), a
// snapshot of the draft released before the rollback, a branch taken at
// the target before the draft, with either Descendants policy.
func TestRollbackTailKeepsEveryHolder(t *testing.T) {
	for _, desc := range []Descendants{Keep, Invalidate} {
		for _, holder := range []string{"draft branch", "draft branch appends", "released draft snapshot", "target branch", "target branch appends", "merged then released child"} {
			p := newPool(t, PoolOptions{BlockBytes: 256})
			h := must[*Head](t)(p.NewHead(kv(Append, 0, desc), "me"))
			check(t, h.Append(kvRows(3, 1)))
			s := must[*Snap](t)(h.Snapshot())
			var other *Head
			var want [][]byte
			switch holder {
			case "target branch", "target branch appends":
				other = must[*Head](t)(h.Branch())
				want = kvRows(3, 1)
			}
			if holder == "merged then released child" {
				c := must[*Head](t)(h.Branch())
				check(t, c.Append(kvRows(2, 2)))
				check(t, h.Merge(c))
				check(t, c.Release())
			} else {
				check(t, h.Append(kvRows(2, 2)))
			}
			switch holder {
			case "draft branch", "draft branch appends":
				other = must[*Head](t)(h.Branch())
				want = concat(kvRows(3, 1), kvRows(2, 2))
			case "released draft snapshot":
				d := must[*Snap](t)(h.Snapshot())
				check(t, d.Release())
			}
			check(t, h.Rollback(s))
			if holder == "target branch appends" || holder == "draft branch appends" && desc == Keep {
				check(t, other.Append(kvRows(1, 4)))
				want = concat(want, kvRows(1, 4))
			}
			check(t, h.Append(kvRows(2, 3)))
			if !equalCols(readAll(t, h), concat(kvRows(3, 1), kvRows(2, 3))) {
				t.Errorf("%v %s: the head reads other rows", desc, holder)
			}
			if other != nil {
				if desc == Invalidate && holder[:5] == "draft" {
					if err := other.Read(0, 1, make([][]byte, 2)); err == nil {
						t.Errorf("%v %s: the draft's branch is still valid", desc, holder)
					}
				} else if !equalCols(readAll(t, other), want) {
					t.Errorf("%v %s: the other holder reads other rows", desc, holder)
				}
				check(t, other.Release())
			}
			check(t, s.Release())
			check(t, h.Release())
		}
	}
}

// TestRollbackTailRacesATargetBranch: a branch taken at the rollback's
// target appends while the head drafts, rolls back and appends on: each
// reads its own rows, whichever claimed the tail block first.
func TestRollbackTailRacesATargetBranch(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	for round := range 20 {
		h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "me"))
		check(t, h.Append(kvRows(3, 1)))
		s := must[*Snap](t)(h.Snapshot())
		b := must[*Head](t)(h.Branch())
		done := make(chan error, 1)
		go func() { done <- b.Append(kvRows(2, 4)) }()
		check(t, h.Append(kvRows(2, 2)))
		check(t, h.Rollback(s))
		check(t, h.Append(kvRows(2, 3)))
		check(t, <-done)
		if !equalCols(readAll(t, h), concat(kvRows(3, 1), kvRows(2, 3))) {
			t.Errorf("round %d: the head reads other rows", round)
		}
		if !equalCols(readAll(t, b), concat(kvRows(3, 1), kvRows(2, 4))) {
			t.Errorf("round %d: the branch reads other rows", round)
		}
		check(t, b.Release())
		check(t, s.Release())
		check(t, h.Release())
	}
}

// TestGroupRollbackTailKeepsARegisteredState: a shared group registers
// its members' roots when the key member fills a block; another member's
// partial tail block, written past the rollback target by the draft that
// registered, is read by whoever adopts that state, so the group's
// rollback must not let that member write on in it.
func TestGroupRollbackTailKeepsARegisteredState(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	other := kv(Append, 0, Keep)
	g := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, other))
	toks := make([]uint32, 16)
	for i := range toks {
		toks[i] = uint32(i*3 + 5)
	}
	for _, tok := range toks[:15] {
		check(t, g.Head(0).Append(tokRow(tok)))
	}
	check(t, g.Head(1).Append(kvRows(3, 1)))
	cut := must[*GroupSnap](t)(g.Snapshot())
	check(t, g.Head(1).Append(kvRows(2, 2)))     // the draft, in place
	check(t, g.Head(0).Append(tokRow(toks[15]))) // fills the key block: registers
	registered := concat(kvRows(3, 1), kvRows(2, 2))
	check(t, g.Rollback(cut))
	check(t, g.Head(1).Append(kvRows(2, 3)))
	if !equalCols(readAll(t, g.Head(1)), concat(kvRows(3, 1), kvRows(2, 3))) {
		t.Errorf("the member reads other rows")
	}
	check(t, cut.Release())
	check(t, g.Release())
	b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, other))
	defer b.Release()
	if n, err := b.AdoptPrefix(keysOf(toks)); err != nil || n != 16 {
		t.Fatalf("AdoptPrefix = %d, %v; want 16", n, err)
	}
	if !equalCols(readAll(t, b.Head(1)), registered) {
		t.Errorf("the adopted member reads %d rows other than those registered", b.Head(1).Len())
	}
}

// TestShapeCacheFollowsEveryLayoutField: one *Layout mutated between
// heads, field by field, gives each head the shape a fresh copy of it
// would; a layout made bad after a good head answers ErrShape; two pools
// of different block sizes sharing a layout give each its own shape.
func TestShapeCacheFollowsEveryLayoutField(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	q := newPool(t, PoolOptions{BlockBytes: 512})
	l := kv(Append, 64, Keep)
	same := func(step string) {
		t.Helper()
		for _, pool := range []*Pool{p, q} {
			h := must[*Head](t)(pool.NewHead(l, "me"))
			f := must[*Head](t)(pool.NewHead(l.clone(), "me"))
			if !h.l.equal(l) || !slices.Equal(h.perBlock, f.perBlock) || !slices.Equal(h.rowBytes, f.rowBytes) ||
				!slices.Equal(h.blockBytes, f.blockBytes) || h.rows != f.rows || h.rowSum != f.rowSum {
				t.Errorf("%s: the head's shape is not its layout's", step)
			}
			check(t, h.Release())
			check(t, f.Release())
		}
	}
	same("first")
	l.Columns[0].ElemSize *= 2
	same("ElemSize")
	l.Columns[1].Width++
	same("Width")
	l.Columns[0].Name = "K2"
	same("Name")
	l.Type = "KV2"
	same("Type")
	l.Bound = 128
	same("Bound")
	l.Growth = Mutable
	same("Growth")
	l.Growth = Append
	l.Descendants = Invalidate
	same("Descendants")
	l.BlockRows = 4
	same("BlockRows")
	l.Bound, l.Window = 0, 8
	same("Window")
	l.Bound, l.Window = 64, 0
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 2}
	same("Checkpoint")
	l.Checkpoint.Every = 8
	same("Checkpoint.Every")
	l.Checkpoint = nil
	l.Columns = append(l.Columns, Column{Name: "X", ElemSize: 4, Width: 1})
	same("a column more")
	l.Columns[2].ElemSize = 0
	if _, err := p.NewHead(l, "me"); !errors.Is(err, ErrShape) {
		t.Errorf("a layout made bad after a good head: %v, want ErrShape", err)
	}
	l.Columns[2].ElemSize = 4
	l.BlockRows = 0
	same("BlockRows back")
	l.Columns[2].ElemSize = 1024 // past the pool's block, without BlockRows
	if _, err := p.NewHead(l, "me"); !errors.Is(err, ErrShape) {
		t.Errorf("a row larger than the block after a good head: %v, want ErrShape", err)
	}
}

// TestRollbackTailRandomHolders: random appends, snapshots, branches,
// merges, rollbacks and releases on one lineage (Keep), every live handle
// checked against the rows it should read after each step, with pool
// blocks and with BlockRows.
func TestRollbackTailRandomHolders(t *testing.T) {
	type held struct {
		s    *Snap
		h    *Head
		want [][]byte
	}
	for seed := uint64(200); seed < 260; seed++ { // 241 merged, then rolled back over the child's tail
		rng := rand.New(rand.NewPCG(seed, 7))
		l := kv(Append, 0, Keep)
		if seed%2 == 1 {
			l.BlockRows = 4
		}
		p := newPool(t, PoolOptions{BlockBytes: 256})
		heads := []*held{{h: must[*Head](t)(p.NewHead(l, "me")), want: concat()}}
		var snaps []*held
		tag := byte(1)
		for step := range 120 {
			x := heads[rng.IntN(len(heads))]
			switch op := rng.IntN(10); {
			case op < 4:
				n := 1 + rng.IntN(3)
				check(t, x.h.Append(kvRows(n, tag)))
				x.want = concat(x.want, kvRows(n, tag))
				tag++
			case op < 6:
				snaps = append(snaps, &held{s: must[*Snap](t)(x.h.Snapshot()), want: x.want})
			case op < 7 && len(heads) < 5:
				heads = append(heads, &held{h: must[*Head](t)(x.h.Branch()), want: x.want})
			case op < 9 && len(snaps) > 0:
				s := snaps[rng.IntN(len(snaps))]
				if err := x.h.Rollback(s.s); err == nil {
					x.want = s.want
				} else if !errors.Is(err, ErrNotAncestor) {
					t.Fatal(err)
				}
			case op < 10 && len(heads) > 1:
				c := heads[rng.IntN(len(heads))]
				if err := x.h.Merge(c.h); err == nil {
					x.want = c.want
				} else if !errors.Is(err, ErrDiverged) {
					t.Fatal(err)
				}
			}
			if rng.IntN(8) == 0 && len(snaps) > 0 {
				i := rng.IntN(len(snaps))
				check(t, snaps[i].s.Release())
				snaps = slices.Delete(snaps, i, i+1)
			}
			if rng.IntN(12) == 0 && len(heads) > 1 {
				i := 1 + rng.IntN(len(heads)-1)
				check(t, heads[i].h.Release())
				heads = slices.Delete(heads, i, i+1)
			}
			for i, y := range heads {
				if !equalCols(readAll(t, y.h), y.want) {
					t.Fatalf("seed %d step %d: head %d reads other rows", seed, step, i)
				}
			}
			for i, y := range snaps {
				if !equalCols(readAll(t, y.s), y.want) {
					t.Fatalf("seed %d step %d: snapshot %d reads other rows", seed, step, i)
				}
			}
		}
		for _, y := range snaps {
			check(t, y.s.Release())
		}
		for _, y := range heads {
			check(t, y.h.Release())
		}
	}
}

// TestRollbackTailKeepsAnAdoptedBlock: a shared head's draft fills a
// block, which the cache registers and another head adopts; once the
// cache forgets the block, the adopter alone holds it besides the head,
// and the head's rollback into that block must not let it write on there.
func TestRollbackTailKeepsAnAdoptedBlock(t *testing.T) {
	for _, forget := range []bool{false, true} {
		p := newPool(t, PoolOptions{})
		a := must[*Head](t)(p.NewSharedHead(tokLayout, "me", "d"))
		toks := make([]uint32, 16)
		rows := [][]byte{{}, {}}
		for i := range toks {
			toks[i] = uint32(i*5 + 2)
			r := tokRow(toks[i])
			rows[0], rows[1] = append(rows[0], r[0]...), append(rows[1], r[1]...)
		}
		for _, tok := range toks[:3] {
			check(t, a.Append(tokRow(tok)))
		}
		s := must[*Snap](t)(a.Snapshot())
		for _, tok := range toks[3:] {
			check(t, a.Append(tokRow(tok))) // fills the block: registered
		}
		b := must[*Head](t)(p.NewSharedHead(tokLayout, "you", "d"))
		if n, err := b.AdoptPrefix(keysOf(toks)); err != nil || n != 16 {
			t.Fatalf("AdoptPrefix = %d, %v; want 16", n, err)
		}
		if forget {
			p.ForgetPrefixes("d")
		}
		check(t, a.Rollback(s))
		check(t, a.Append(tokRow(999)))
		if got := readGroupCols(t, b, 2); !equalCols(got, rows) {
			t.Errorf("forget=%v: the adopter reads other rows after the head's rollback and append", forget)
		}
		check(t, s.Release())
		check(t, a.Release())
		check(t, b.Release())
	}
}
