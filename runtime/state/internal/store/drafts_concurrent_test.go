package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDraftsGroupRollbackReaders: a group of two append members
// (descendants=invalidate) snapshots after every draft (a cut per draft),
// and rolls back to an earlier cut, while readers read the members' draft
// snapshots and other goroutines release cuts: any read that succeeds
// returns the member's rows, nothing stalls, nothing leaks.
func TestDraftsGroupRollbackReaders(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	tok := *tokLayout
	tok.ShareKey = ""
	g := must[*Group](t)(NewGroup(p, "me", &tok, kv(Append, 0, Invalidate)))
	defer func() { check(t, g.Release()) }()
	type pub struct {
		cut  *GroupSnap
		want [2][][]byte // per member, per column
	}
	var cur [2][][]byte
	cur[0], cur[1] = [][]byte{{}, {}}, [][]byte{{}, {}}
	appendBoth := func(k uint32) {
		check(t, g.Head(0).Append(tokRow(k)))
		check(t, g.Head(1).Append(kvRows(1, byte(k))))
		cur[0] = concat(cur[0], tokRow(k))
		cur[1] = concat(cur[1], kvRows(1, byte(k)))
	}
	var mu sync.Mutex
	var live []*pub
	var stop atomic.Bool
	var bad atomic.Pointer[string]
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				mu.Lock()
				if len(live) == 0 {
					mu.Unlock()
					continue
				}
				x := live[(n*7+i)%len(live)]
				mu.Unlock()
				m := n % 2
				s := x.cut.Snap(m)
				rows := s.Len()
				if rows == 0 {
					continue
				}
				dst := [][]byte{make([]byte, len(x.want[m][0])), make([]byte, len(x.want[m][1]))}
				err := s.Read(0, len(x.want[m][0])/[]int{4, 16}[m], dst)
				if errors.Is(err, ErrInvalidated) || errors.Is(err, ErrReleased) {
					continue
				}
				if err != nil || !equalCols(dst, x.want[m]) {
					msg := fmt.Sprintf("member %d snapshot read: %v, equal %v", m, err, err == nil && equalCols(dst, x.want[m]))
					bad.Store(&msg)
					return
				}
			}
		}()
	}
	// a releaser: releases old cuts concurrently
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			mu.Lock()
			var x *pub
			if len(live) > 20 {
				x = live[0]
				live = live[1:]
			}
			mu.Unlock()
			if x != nil {
				if err := x.cut.Release(); err != nil {
					msg := err.Error()
					bad.Store(&msg)
					return
				}
			}
			time.Sleep(10 * time.Microsecond)
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	for step := 0; time.Now().Before(deadline) && bad.Load() == nil; step++ {
		if g.Head(0).Len() > 900 {
			break
		}
		base := &pub{cut: must[*GroupSnap](t)(g.Snapshot()), want: [2][][]byte{clone2(cur[0]), clone2(cur[1])}}
		baseCur := [2][][]byte{clone2(cur[0]), clone2(cur[1])}
		var drafts []*pub
		for d := range 1 + step%5 {
			appendBoth(uint32(1000 + step*10 + d))
			x := &pub{cut: must[*GroupSnap](t)(g.Snapshot()), want: [2][][]byte{clone2(cur[0]), clone2(cur[1])}}
			drafts = append(drafts, x)
			mu.Lock()
			live = append(live, x)
			mu.Unlock()
		}
		done := make(chan error, 1)
		go func() { done <- g.Rollback(base.cut) }()
		select {
		case err := <-done:
			check(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("group rollback stalled")
		}
		cur = baseCur
		appendBoth(uint32(step))
		mu.Lock()
		live = append(live, base)
		mu.Unlock()
		if got := readGroupCols(t, g.Head(0), 2); !equalCols(got, cur[0]) {
			t.Fatalf("step %d: member 0 reads other rows", step)
		}
		if got := readGroupCols(t, g.Head(1), 2); !equalCols(got, cur[1]) {
			t.Fatalf("step %d: member 1 reads other rows", step)
		}
	}
	stop.Store(true)
	wg.Wait()
	if m := bad.Load(); m != nil {
		t.Fatal(*m)
	}
	for _, x := range live {
		check(t, x.cut.Release())
	}
}

// TestDraftsReleasedDuringRollback: the drafts' snapshots
// are released by other goroutines while the head rolls back past them:
// no stall, no error, no leak, and the head reads its rows.
func TestDraftsReleasedDuringRollback(t *testing.T) {
	p := newPool(t, PoolOptions{})
	h := must[*Head](t)(p.NewHead(tokLayout, "me"))
	want := [][]byte{{}, {}}
	for round := range 300 {
		if h.Len() > 900 {
			check(t, h.Release())
			h = must[*Head](t)(p.NewHead(tokLayout, "me"))
			want = [][]byte{{}, {}}
		}
		s0 := must[*Snap](t)(h.Snapshot())
		var drafts []*Snap
		for d := range 1 + round%10 {
			check(t, h.Append(tokRow(uint32(5000+d))))
			drafts = append(drafts, must[*Snap](t)(h.Snapshot()))
		}
		var wg sync.WaitGroup
		for i, s := range drafts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					dst := [][]byte{make([]byte, 4), make([]byte, 8)}
					_ = s.Read(0, 1, dst)
				}
				if err := s.Release(); err != nil {
					t.Error(err)
				}
			}()
		}
		done := make(chan error, 1)
		go func() { done <- h.Rollback(s0) }()
		select {
		case err := <-done:
			check(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("rollback stalled")
		}
		check(t, h.Append(tokRow(uint32(round))))
		want = concat(want, tokRow(uint32(round)))
		wg.Wait()
		check(t, s0.Release())
		if got := readGroupCols(t, h, 2); !equalCols(got, want) {
			t.Fatalf("round %d: the head reads other rows", round)
		}
	}
	check(t, h.Release())
	if st := p.Stats(); st.Live != 0 {
		t.Fatalf("%d live", st.Live)
	}
}
