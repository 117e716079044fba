package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestEvictCheckpointedHeadCountedOnce: an optional head with a
// checkpoint history frees blocks alone (its version and checkpoints
// together: headVictim.exclusiveLocked), yet each of its roots holds
// nothing alone (holdsAlone), so jointSets also makes it a member of a
// set with a snapshot of an older version. A mandatory call that needs
// one block more than the head and snapshot hold together must fail
// without evicting anything (docs/INTERNALS.md: "a call that fails
// anyway changes nothing").
func TestEvictCheckpointedHeadCountedOnce(t *testing.T) {
	for _, tier := range []bool{false, true} {
		for _, every := range []int{1, 2} {
			t.Run(fmt.Sprintf("tier=%v/every%d", tier, every), func(t *testing.T) {
				opt := PoolOptions{BlockBytes: 256, MaxBytes: 24 * 256}
				if tier {
					opt.HostTier = 64 << 10
				}
				p := newPool(t, opt)
				l := wide("Cache", Optional)
				l.Checkpoint = &CheckpointPolicy{Every: every, Keep: 8}
				h := must[*Head](t)(p.NewHead(l, "a"))
				defer h.Release()
				fill(t, h, 2, 1)
				s := must[*Snap](t)(h.Snapshot())
				defer s.Release()
				fill(t, h, 2, 3)
				st0 := p.Stats()
				live := eviction{p}.listedVictims()
				t.Logf("optional blocks %d (%d bytes); freeable counted %d bytes; joint sets %d",
					st0.Blocks, st0.Blocks*256, eviction{p}.freeable(1<<40), len(jointSets(live)))
				m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), "m"))
				defer m.Release()
				fill(t, m, 24-int(st0.Blocks), 50)
				var rows []byte
				for i := range st0.Blocks + 1 {
					rows = append(rows, wideRow(byte(90 + i))[0]...)
				}
				err := m.Append([][]byte{rows})
				st := p.Stats()
				t.Logf("append of %d blocks: %v", st0.Blocks+1, err)
				if !errors.Is(err, ErrNoMemory) {
					t.Fatalf("append of more than all optional state: %v, want ErrNoMemory", err)
				}
				if st.EvictedBytes != 0 || st.TierOut != 0 {
					t.Fatalf("a call that failed with ErrNoMemory evicted %d bytes (moved %d to the tier)", st.EvictedBytes, st.TierOut)
				}
				if err := h.Read(0, 1, [][]byte{make([]byte, 256)}); err != nil {
					t.Fatalf("head after a failed call: %v", err)
				}
				checkInv(t, p)
			})
		}
	}
}

func pressureGroupLayouts(cp bool) []*Layout {
	a, b := wide("GA", Optional), wide("GB", Optional)
	a.Descendants, b.Descendants = Keep, Keep
	if cp {
		a.Checkpoint = &CheckpointPolicy{Every: 1, Keep: 8}
		b.Checkpoint = &CheckpointPolicy{Every: 1, Keep: 8}
	}
	return []*Layout{a, b}
}

// TestEvictGroupCutsBranchOneSet: an optional group, two cuts at its
// version and a branch of it share every block; together they are one
// victim, evicted whole, and every byte comes back after release.
func TestEvictGroupCutsBranchOneSet(t *testing.T) {
	for _, tier := range []bool{false, true} {
		t.Run(fmt.Sprint("tier=", tier), func(t *testing.T) {
			opt := PoolOptions{BlockBytes: 256, MaxBytes: 10 * 256}
			if tier {
				opt.HostTier = 16 * 256
			}
			p := newPool(t, opt)
			g := must[*Group](t)(NewGroup(p, "g", pressureGroupLayouts(false)...))
			for i := range 2 {
				fill(t, g.Head(i), 2, byte(10*i))
			}
			c1 := must[*GroupSnap](t)(g.Snapshot())
			c2 := must[*GroupSnap](t)(g.Snapshot())
			b := must[*Group](t)(g.Branch())
			m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), "m"))
			fill(t, m, 6, 50)
			before := p.Stats()
			err := m.Append([][]byte{catWide(wideRow(1), wideRow(2), wideRow(3), wideRow(4), wideRow(5))})
			if !errors.Is(err, ErrNoMemory) {
				t.Fatalf("append of 5 with 4 optional: %v", err)
			}
			if st := p.Stats(); st.EvictedBytes != before.EvictedBytes {
				t.Fatalf("failed call evicted %d", st.EvictedBytes-before.EvictedBytes)
			}
			for i := range 2 {
				if got := readWide(t, b.Head(i)); !bytes.Equal(got, catWide(wideRow(byte(10*i)), wideRow(byte(10*i+1)))) {
					t.Fatal("branch rows after failed call")
				}
			}
			check(t, m.Append([][]byte{catWide(wideRow(1), wideRow(2), wideRow(3), wideRow(4))}))
			for i := range 2 {
				for name, x := range map[string]reader{"group": g.Head(i), "branch": b.Head(i)} {
					if err := x.Read(0, 1, [][]byte{make([]byte, 256)}); !errors.Is(err, ErrEvicted) {
						t.Errorf("%s member %d: %v, want ErrEvicted", name, i, err)
					}
				}
			}
			if err := g.Rollback(c1); err == nil {
				t.Errorf("rollback to an evicted cut succeeded")
			} else {
				t.Logf("rollback to the evicted cut: %v", err)
			}
			checkInv(t, p)
			check(t, c1.Release())
			check(t, c2.Release())
			check(t, b.Release())
			check(t, g.Release())
			check(t, m.Release())
			if st := p.Stats(); st.Blocks != 0 {
				t.Fatalf("%d blocks after release", st.Blocks)
			}
			checkInv(t, p)
		})
	}
}

// TestEvictCheckpointedGroupCountedOnce: TestEvictCheckpointedHeadCountedOnce
// for a group whose members keep checkpoints, with a cut of an older
// version: a call that needs more than the group and cut hold together
// fails, and must evict nothing.
func TestEvictCheckpointedGroupCountedOnce(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 40 * 256})
	g := must[*Group](t)(NewGroup(p, "g", pressureGroupLayouts(true)...))
	defer g.Release()
	for i := range 2 {
		fill(t, g.Head(i), 2, byte(10*i))
	}
	c := must[*GroupSnap](t)(g.Snapshot())
	defer c.Release()
	for i := range 2 {
		fill(t, g.Head(i), 2, byte(10*i+5))
	}
	st0 := p.Stats()
	live := eviction{p}.listedVictims()
	t.Logf("blocks %d; freeable counted %d bytes; joint sets %d", st0.Blocks, eviction{p}.freeable(1<<40), len(jointSets(live)))
	m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), "m"))
	defer m.Release()
	fill(t, m, 40-int(st0.Blocks), 50)
	var rows []byte
	for i := range st0.Blocks + 1 {
		rows = append(rows, wideRow(byte(i))[0]...)
	}
	err := m.Append([][]byte{rows})
	st := p.Stats()
	t.Logf("append of %d blocks: %v", st0.Blocks+1, err)
	if !errors.Is(err, ErrNoMemory) {
		t.Fatalf("want ErrNoMemory, got %v", err)
	}
	if st.EvictedBytes != 0 {
		t.Fatalf("a call that failed with ErrNoMemory evicted %d bytes", st.EvictedBytes)
	}
}
