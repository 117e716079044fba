package store

import (
	"bytes"
	"errors"
	"testing"
)

// checkpointedKV is the KV cache a group keeps beside a replayed
// recurrent state: 64 rows, a checkpoint every 8 versions, the last 4
// kept, so that every cut of the group is one its members can rebuild.
func checkpointedKV() *Layout {
	l := kv(Append, 64, Invalidate)
	l.Checkpoint = &CheckpointPolicy{Every: 8, Keep: 4}
	return l
}

// TestGroupAt: a group whose members keep histories rebuilds its cut at a
// version of its first member, the replayed member by running its steps
// again, as one group snapshot that Rollback takes; Plan prices it; a
// member without history, or a version past the history, answers
// ErrNotRetained and leaves nothing taken.
func TestGroupAt(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	recL := recLayout(4, 4, Invalidate)
	g := must[*Group](t)(NewGroup(p, "a", checkpointedKV(), recL))
	defer g.Release()
	kvH, recH := g.Head(0), g.Head(1)
	// A token: the recurrent step, then the KV row, as a decoder feeds one.
	type cut struct {
		kv  Version
		rec [][]byte
		n   int
	}
	var cuts []cut
	for i := range 12 {
		in := [][]byte{{byte(i + 1), 3}}
		check(t, recH.StepHost(in, true, hostRecur))
		check(t, kvH.Append(kvRows(1, byte(i))))
		cuts = append(cuts, cut{kv: kvH.Version(), rec: readAll(t, recH), n: i + 1})
	}
	live := p.Stats().Live
	for _, c := range []cut{cuts[1], cuts[5], cuts[10]} {
		pl, err := g.Plan(c.kv)
		if err != nil || pl.Steps == 0 || pl.Target != c.kv {
			t.Errorf("Plan(%d): %+v, %v; want a plan that replays steps", c.kv, pl.Candidate, err)
		}
		v := must[*GroupSnap](t)(g.At(c.kv))
		if got := v.Snap(0).Len(); got != c.n {
			t.Errorf("At(%d): the KV member holds %d rows, want %d", c.kv, got, c.n)
		}
		rec := [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
		check(t, v.Snap(1).Read(0, 10, rec))
		if !bytes.Equal(rec[0], c.rec[0]) || !bytes.Equal(rec[1], c.rec[1]) {
			t.Errorf("At(%d): the recurrent member reads other rows than after %d steps", c.kv, c.n)
		}
		check(t, v.Release())
	}
	// Roll back to the cut after 6 tokens, rebuilt, then on.
	v := must[*GroupSnap](t)(g.At(cuts[5].kv))
	check(t, g.Rollback(v))
	check(t, v.Release())
	if kvH.Len() != 6 || kvH.Version() != cuts[5].kv || !bytes.Equal(readAll(t, recH)[0], cuts[5].rec[0]) {
		t.Errorf("after Rollback to the rebuilt cut: %d KV rows at %d, recurrent rows equal %v; want 6 at %d, equal",
			kvH.Len(), kvH.Version(), bytes.Equal(readAll(t, recH)[0], cuts[5].rec[0]), cuts[5].kv)
	}
	for _, bad := range []Version{cuts[9].kv, 1 << 40} { // abandoned by the rollback; never made
		if _, err := g.At(bad); !errors.Is(err, ErrNotRetained) {
			t.Errorf("At(%d): %v, want ErrNotRetained", bad, err)
		}
		if _, err := g.Plan(bad); !errors.Is(err, ErrNotRetained) {
			t.Errorf("Plan(%d): %v, want ErrNotRetained", bad, err)
		}
	}
	if got := p.Stats().Live; got != live {
		t.Errorf("the pool holds %d live handles after the calls, had %d: a failed At left snapshots", got, live)
	}

	// A member without history: no cut can be rebuilt.
	plain := must[*Group](t)(NewGroup(p, "b", kv(Append, 64, Invalidate), recL))
	defer plain.Release()
	check(t, plain.Head(0).Append(kvRows(2, 1)))
	if _, err := plain.At(plain.Head(0).Version()); !errors.Is(err, ErrNotRetained) {
		t.Errorf("At on a group with a member without checkpoints: %v, want ErrNotRetained", err)
	}
	var none *Group
	if _, err := none.At(1); !errors.Is(err, ErrReleased) {
		t.Errorf("At on a nil group: %v, want ErrReleased", err)
	}
	if _, err := none.Plan(1); !errors.Is(err, ErrReleased) {
		t.Errorf("Plan on a nil group: %v, want ErrReleased", err)
	}
}
