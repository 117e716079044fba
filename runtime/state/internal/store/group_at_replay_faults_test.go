package store

import (
	"bytes"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Step functions that misbehave when they are run again (by
// Group.At, or by a failed step's restore).

// flaky is recur as a host step; once broken, it panics (mode 2), ends
// its goroutine (mode 3) or fails (mode 1) whenever it runs.
type flaky struct{ mode *atomic.Int32 }

func (f flaky) StepHost(rows, in [][]byte) error {
	switch f.mode.Load() {
	case 1:
		return errBG
	case 2:
		panic("the flaky step")
	case 3:
		runtime.Goexit()
	}
	recur(rows, in)
	return nil
}

func groupAtFault(t *testing.T, mode int32) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l0 := kv(Append, 64, Keep)
	l0.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 4}
	g := must[*Group](t)(NewGroup(p, "s", l0, recLayout(4, 4, Keep)))
	var m atomic.Int32
	f := flaky{&m}
	var vs []Version
	var recs [][][]byte
	for i := range 6 {
		check(t, g.Head(1).StepHostWith([][]byte{{byte(i)}}, true, f))
		check(t, g.Head(0).Append(kvRows(1, byte(i))))
		vs = append(vs, g.Head(0).Version())
		r, _ := bgRead(g.Head(1), 10)
		recs = append(recs, r)
	}
	before := p.Stats()
	m.Store(mode)
	var wg sync.WaitGroup
	wg.Add(1)
	var err error
	go func() {
		defer wg.Done()
		var c *GroupSnap
		c, err = g.At(vs[2])
		if err == nil {
			c.Release()
		}
	}()
	wg.Wait()
	if mode != 3 && err == nil {
		t.Fatalf("Group.At replaying a broken step succeeded")
	}
	if after := p.Stats(); after.Live != before.Live || after.PhysicalBytes != before.PhysicalBytes {
		t.Fatalf("Group.At that failed kept something: live %d -> %d, physical %d -> %d", before.Live, after.Live, before.PhysicalBytes, after.PhysicalBytes)
	}
	m.Store(0)
	c := must[*GroupSnap](t)(g.At(vs[2]))
	got, _ := bgRead(c.Snap(1), 10)
	if !bytes.Equal(got[0], recs[2][0]) || !bytes.Equal(got[1], recs[2][1]) {
		t.Fatalf("Group.At after a broken replay reads other rows")
	}
	check(t, g.Rollback(c))
	check(t, c.Release())
	got, _ = bgRead(g.Head(1), 10)
	if !bytes.Equal(got[0], recs[2][0]) || g.Head(0).Len() != 3 {
		t.Fatalf("after the rollback: other rows")
	}
	check(t, g.Release())
	if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.Live != 0 || ps.HistoryBytes != 0 {
		t.Fatalf("after releasing everything: %+v", ps)
	}
}

func TestGroupAtReplayFails(t *testing.T)   { groupAtFault(t, 1) }
func TestGroupAtReplayPanics(t *testing.T)  { groupAtFault(t, 2) }
func TestGroupAtReplayGoexits(t *testing.T) { groupAtFault(t, 3) }

// TestFailedStepRestoreWhoseReplayBreaks: a step fails after writing
// in place; its restore replays the earlier steps, whose function is now
// broken, so the restore fails and the head is lost for now. Once the
// function works again, the head's next call rebuilds the version before
// the failed step: the version is never lost.
func TestFailedStepRestoreWhoseReplayBreaks(t *testing.T) {
	for _, ret := range []Retention{Mandatory, Optional, Reconstructable} {
		t.Run(ret.String(), func(t *testing.T) {
			p := newPool(t, PoolOptions{BlockBytes: 256})
			l := recLayout(100, 2, Keep) // one checkpoint: the restore replays every step
			l.Retention = ret
			h := must[*Head](t)(p.NewHead(l, "o"))
			var m atomic.Int32
			f := flaky{&m}
			for i := range 5 {
				check(t, h.StepHostWith([][]byte{{byte(i), 3}}, true, f))
			}
			v := h.Version()
			want, _ := bgRead(h, 10)
			s := must[*Snap](t)(h.Snapshot()) // a holder: the next step copies, then writes in place
			check(t, h.StepHostWith([][]byte{{9}}, true, f))
			check(t, s.Release())
			v2 := h.Version()
			want2, _ := bgRead(h, 10)
			_ = v
			// Fails after writing in place; the restore's replays fail.
			m.Store(0)
			err := h.StepHostWith([][]byte{{7}}, true, failAfter{f: f, m: &m})
			if !errors.Is(err, errBG) {
				t.Fatalf("the failing step: %v", err)
			}
			m.Store(0)
			got, err := bgRead(h, 10)
			if err != nil || h.Version() != v2 || !bytes.Equal(got[0], want2[0]) || !bytes.Equal(got[1], want2[1]) {
				t.Fatalf("after the failed step whose restore broke: version %d (want %d), read %v, same rows %v",
					h.Version(), v2, err, err == nil && bytes.Equal(got[0], want2[0]))
			}
			check(t, h.StepHostWith([][]byte{{8}}, true, f))
			recur(want2, [][]byte{{8}})
			got, _ = bgRead(h, 10)
			if !bytes.Equal(got[0], want2[0]) || !bytes.Equal(got[1], want2[1]) {
				t.Fatalf("the step after: other rows")
			}
			_ = want
			check(t, h.Release())
			if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.Live != 0 || ps.HistoryBytes != 0 {
				t.Fatalf("after releasing everything: %+v", ps)
			}
		})
	}
}

// failAfter writes the rows in place, then breaks the step function f
// (mode 1: the restore's replays fail) and fails.
type failAfter struct {
	f flaky
	m *atomic.Int32
}

func (s failAfter) StepHost(rows, in [][]byte) error {
	recur(rows, in)
	s.m.Store(1)
	return errBG
}
