package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestGateShutsEveryShard: for each shard of the gate, a head of that
// shard with a step in flight that waits to be let go, its snapshot, and
// a group of that shard: Close waits for the step (it frees the memory
// the step writes), the step's call succeeds, and afterwards calls on the
// head, the snapshot and the group answer ErrReleased. A Close that held
// fewer shards would return while the step ran.
func TestGateShutsEveryShard(t *testing.T) {
	for k := range uint8(gateShards) {
		t.Run(fmt.Sprint("shard", k), func(t *testing.T) { gateShutsShard(t, k) })
	}
}

func gateShutsShard(t *testing.T, k uint8) {
	be := device.Host()
	defer be.Close()
	p, err := NewPool(be, PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := recLayout(4, 2, Invalidate)
	var h *Head
	for h == nil || h.gate != k {
		if h != nil {
			h.Release()
		}
		if h, err = p.NewHead(l, "o"); err != nil {
			t.Fatal(err)
		}
	}
	s, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var g *Group
	for g == nil || g.gate != k {
		if g != nil {
			g.Release()
		}
		if g, err = NewGroup(p, "g", l, kv(Append, 0, Invalidate)); err != nil {
			t.Fatal(err)
		}
	}
	started, letGo, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- h.StepHost([][]byte{{1}}, false, func(rows, in [][]byte) ([][]byte, error) {
			close(started)
			<-letGo
			return hostRecur(rows, in)
		})
	}()
	<-started
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned while a step of shard %d ran: %v", k, err)
	case <-time.After(10 * time.Millisecond):
	}
	close(letGo)
	if err := <-done; err != nil {
		t.Errorf("the step: %v", err)
	}
	if err := <-closed; err == nil {
		t.Error("Close with live handles returned no error naming them")
	}
	if err := h.Append(nil); !errors.Is(err, ErrReleased) {
		t.Errorf("the head after Close: %v, want ErrReleased", err)
	}
	if err := s.Read(0, 1, [][]byte{make([]byte, 16), make([]byte, 8)}); !errors.Is(err, ErrReleased) {
		t.Errorf("the snapshot after Close: %v, want ErrReleased", err)
	}
	if _, err := g.Snapshot(); !errors.Is(err, ErrReleased) {
		t.Errorf("the group after Close: %v, want ErrReleased", err)
	}
}

// TestGateLogicalBytesOverShards: the pool's LogicalBytes is the sum of
// what heads of every shard hold, and drops to zero as they go.
func TestGateLogicalBytesOverShards(t *testing.T) {
	be := device.Host()
	defer be.Close()
	p, err := NewPool(be, PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l := kv(Append, 0, Invalidate)
	var heads []*Head
	var want int64
	for i := range 2*gateShards + 3 {
		h, err := p.NewHead(l, Owner(fmt.Sprint("o", i%3)))
		if err != nil {
			t.Fatal(err)
		}
		heads = append(heads, h)
		if err := h.Append(kvRows(i+1, byte(i))); err != nil {
			t.Fatal(err)
		}
		want += int64(i+1) * 24
		if got := p.Stats().LogicalBytes; got != want {
			t.Fatalf("after %d heads: LogicalBytes %d, want %d", i+1, got, want)
		}
	}
	for i, h := range heads {
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
		want -= int64(i+1) * 24
		if got := p.Stats().LogicalBytes; got != want {
			t.Fatalf("after %d releases: LogicalBytes %d, want %d", i+1, got, want)
		}
	}
}

// TestHeadShards: new heads take the gate's shards in turn, a branch and
// a snapshot take their head's shard, and every head's id, unique, names
// its shard (gateOf), so that a beam search's branches stay in their
// root's shard.
func TestHeadShards(t *testing.T) {
	be := device.Host()
	defer be.Close()
	p, err := NewPool(be, PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l := kv(Append, 0, Invalidate)
	ids := map[uint64]bool{}
	var seen [gateShards]bool
	for range gateShards {
		h, err := p.NewHead(l, "o")
		if err != nil {
			t.Fatal(err)
		}
		if seen[h.gate] {
			t.Fatalf("two of %d new heads in shard %d", gateShards, h.gate)
		}
		seen[h.gate] = true
		c, err := h.Branch()
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []*Head{h, c} {
			if x.gate != h.gate || gateOf(x.id) != x.gate || ids[x.id] {
				t.Fatalf("head %d in shard %d (its id's %d), its root's %d; ids so far %v", x.id, x.gate, gateOf(x.id), h.gate, ids)
			}
			ids[x.id] = true
		}
		if s.gate != h.gate {
			t.Fatalf("a snapshot of a branch in shard %d, its root's %d", s.gate, h.gate)
		}
		check(t, s.Release())
		check(t, c.Release())
		check(t, h.Release())
	}
}
