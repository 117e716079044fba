package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// allowedMoveErr reports whether err is one a concurrent group call may
// answer.
func allowedMoveErr(err error) bool {
	return err == nil || errors.Is(err, ErrDiverged) || errors.Is(err, ErrNotAncestor) || errors.Is(err, ErrInvalidated) ||
		errors.Is(err, ErrEvicted) || errors.Is(err, ErrNoMemory) || errors.Is(err, ErrReleased)
}

func TestGroupMovesConcurrentUnderPressure(t *testing.T) {
	for _, tier := range []int64{0, 4 << 10} {
		for _, desc := range []Descendants{Keep, Invalidate} {
			t.Run(fmt.Sprint(tier, desc), func(t *testing.T) { groupMovesConcurrent(t, tier, desc) })
		}
	}
}

func groupMovesConcurrent(t *testing.T, tier int64, desc Descendants) {
	p, err := NewPool(device.Host(), PoolOptions{BlockBytes: 256, MaxBytes: 24 * 256, HostTier: tier})
	check(t, err)
	defer p.Close()
	l := func(typ string) *Layout {
		x := optRow(typ)
		x.Descendants = desc
		x.Checkpoint = &CheckpointPolicy{Every: 2, Keep: 3}
		return x
	}
	g := must[*Group](t)(NewGroup(p, "a", l("A"), l("B")))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 100)
	report := func(what string, err error) {
		if !allowedMoveErr(err) {
			select {
			case errs <- fmt.Errorf("%s: %w", what, err):
			default:
			}
		}
	}
	run := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				f(i)
			}
		}()
	}
	run(func(i int) { // write, snapshot, write, roll back
		report("write", g.Head(i%2).Write(0, wideRow(byte(i))))
		cut, err := g.Snapshot()
		report("snapshot", err)
		if err != nil {
			return
		}
		report("write", g.Head(0).Write(0, wideRow(byte(i+1))))
		report("rollback", g.Rollback(cut))
		report("release cut", cut.Release())
	})
	run(func(i int) { // branch, write the branch, merge
		b, err := g.Branch()
		report("branch", err)
		if err != nil {
			return
		}
		report("write branch", b.Head(1).Write(0, wideRow(byte(100+i))))
		report("merge", g.Merge(b))
		report("release branch", b.Release())
	})
	run(func(i int) { // pressure
		h, err := p.NewHead(wide("Session", Mandatory), "m")
		report("new", err)
		if err != nil {
			return
		}
		for range 1 + i%20 {
			if err := h.Append(wideRow(byte(i))); err != nil {
				report("pressure", err)
				break
			}
		}
		report("release pressure", h.Release())
	})
	run(func(i int) { // cuts of the past and reads
		if cut, err := g.At(g.Head(0).Version()); err == nil {
			report("read cut", cut.Snap(i%2).Read(0, 1, [][]byte{make([]byte, 256)}))
			report("rollback at", g.Rollback(cut))
			cut.Release()
		} else if !errors.Is(err, ErrNotRetained) {
			report("at", err)
		}
	})
	time.Sleep(time.Second)
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("stalled")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := p.Stats()
	t.Logf("versions %d %d, evictions %d, tier in %d", g.Head(0).Version(), g.Head(1).Version(), st.Evictions, st.TierIn)
	checkInv(t, p)
	check(t, g.Release())
	if st := p.Stats(); st.PhysicalBytes != 0 || st.LogicalBytes != 0 || st.Live != 0 || st.TierBytes != 0 {
		t.Fatalf("after releasing everything: %+v", st)
	}
	_, err = p.Trim()
	check(t, err)
	if st := p.Stats(); st.ReservedBytes != 0 || st.Slabs != 0 || st.FreeBlocks != 0 {
		t.Fatalf("after releasing everything and Trim: %+v", st)
	}
}
