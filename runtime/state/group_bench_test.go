package state

import "testing"

// Group calls against the same calls on the members one by one
// (docs/BENCHMARKS.md, "Groups"): a KV cache of 256 rows and a recurrent
// state of 4 rows.

func benchGroup(b *testing.B) (*Pool, *Group) {
	p := newPool(b, PoolOptions{})
	g, err := NewGroup(p, "s", kv(Append, 4096, Invalidate), rec(Invalidate))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Release() })
	check(b, g.Head(0).Append(kvRows(256, 1)))
	check(b, g.Head(1).Write(0, recRow(1)))
	return p, g
}

func BenchmarkGroupSnapshot(b *testing.B) {
	_, g := benchGroup(b)
	for b.Loop() {
		cut, err := g.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		cut.Release()
	}
}

func BenchmarkGroupSnapshotMembers(b *testing.B) {
	_, g := benchGroup(b)
	for b.Loop() {
		s0, err := g.Head(0).Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		s1, err := g.Head(1).Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		s0.Release()
		s1.Release()
	}
}

// A speculative round: a cut, one write to each member, a rollback to
// the cut.
func BenchmarkGroupRollback(b *testing.B) {
	_, g := benchGroup(b)
	row, h := kvRows(1, 2), recRow(2)
	for b.Loop() {
		cut, err := g.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		check(b, g.Head(0).Append(row))
		check(b, g.Head(1).Write(0, h))
		check(b, g.Rollback(cut))
		cut.Release()
	}
}

// The same round on two heads outside any group.
func BenchmarkGroupRollbackMembers(b *testing.B) {
	p := newPool(b, PoolOptions{})
	k := must[*Head](b)(p.NewHead(kv(Append, 4096, Invalidate), "s"))
	r := must[*Head](b)(p.NewHead(rec(Invalidate), "s"))
	defer k.Release()
	defer r.Release()
	check(b, k.Append(kvRows(256, 1)))
	check(b, r.Write(0, recRow(1)))
	row, h := kvRows(1, 2), recRow(2)
	for b.Loop() {
		s0 := must[*Snap](b)(k.Snapshot())
		s1 := must[*Snap](b)(r.Snapshot())
		check(b, k.Append(row))
		check(b, r.Write(0, h))
		check(b, k.Rollback(s0))
		check(b, r.Rollback(s1))
		s0.Release()
		s1.Release()
	}
}
