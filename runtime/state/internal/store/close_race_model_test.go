package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// closeRow is one kv row tagged with its writer (w) and a counter (n): the
// key column holds w and n, the value column w again.
func closeRow(w, n uint32) [][]byte {
	k := make([]byte, 16)
	v := make([]byte, 8)
	binary.LittleEndian.PutUint32(k[0:], w)
	binary.LittleEndian.PutUint32(k[4:], n)
	binary.LittleEndian.PutUint32(k[8:], ^w)
	binary.LittleEndian.PutUint32(k[12:], n*2654435761)
	binary.LittleEndian.PutUint64(v, uint64(w)<<32|uint64(n))
	return [][]byte{k, v}
}

// closeModel is the rows a kv handle should read, per column.
type closeModel [2][]byte

func (m closeModel) rows() int { return len(m[1]) / 8 }

func (m closeModel) with(row [][]byte) closeModel {
	return closeModel{append(bytes.Clone(m[0]), row[0]...), append(bytes.Clone(m[1]), row[1]...)}
}

// closeCheck reads every row of x and compares them with m.
func closeCheck(x reader, m closeModel) error {
	n := m.rows()
	dst := [][]byte{make([]byte, n*16), make([]byte, n*8)}
	if err := x.Read(0, n, dst); err != nil {
		return err
	}
	for c := range 2 {
		if !bytes.Equal(dst[c], m[c]) {
			w := 16
			if c == 1 {
				w = 8
			}
			for i := 0; i < n; i++ {
				if !bytes.Equal(dst[c][i*w:(i+1)*w], m[c][i*w:(i+1)*w]) {
					return fmt.Errorf("column %d row %d of %d: got %x, want %x", c, i, n, dst[c][i*w:(i+1)*w], m[c][i*w:(i+1)*w])
				}
			}
		}
	}
	if l := x.Len(); l != n {
		return fmt.Errorf("Len %d, model %d: %w", l, n, errLen)
	}
	return nil
}

// errLen marks a Len that differs from the model: a handle of a closed
// pool reports no rows.
var errLen = errors.New("Len differs")

// closeWorker works on handles of its own until the pool is closed.
type closeWorker struct {
	t       *testing.T
	id      uint32
	p       *Pool
	rng     *rand.Rand
	n       uint32
	closing *atomic.Bool
	st      device.Stream
	// pressure: the pool is capped, and calls may answer ErrNoMemory
	pressure bool

	h     *Head
	hm    closeModel
	snaps []*Snap
	sms   []closeModel
	kids  []*Head
	kms   []closeModel
	r     *Head // recLayout head, stepped
	g     *Group
	cuts  []*GroupSnap
	table *BlockTable
}

// errOK reports whether err is acceptable; false when the test must fail.
func (w *closeWorker) errOK(op string, err error) (closed bool, fail error) {
	if err == nil {
		return false, nil
	}
	if (errors.Is(err, ErrReleased) || errors.Is(err, errLen)) && w.closing.Load() {
		return true, nil
	}
	if w.pressure && errors.Is(err, ErrNoMemory) {
		return false, nil // a failed call changes nothing: the model holds
	}
	return false, fmt.Errorf("worker %d %s (closing %v): %w", w.id, op, w.closing.Load(), err)
}

// step runs one random call; closed says a call answered ErrReleased.
func (w *closeWorker) step() (closed bool, fail error) {
	w.n++
	switch op := w.rng.IntN(19); op {
	case 0, 1:
		row := closeRow(w.id, w.n)
		if err := w.h.Append(row); err != nil {
			return w.errOK("Append", err)
		}
		w.hm = w.hm.with(row)
	case 2:
		if err := closeCheck(w.h, w.hm); err != nil {
			return w.errOK("Read", err)
		}
	case 3:
		s, err := w.h.Snapshot()
		if err != nil {
			return w.errOK("Snapshot", err)
		}
		w.snaps, w.sms = append(w.snaps, s), append(w.sms, w.hm)
	case 4:
		if len(w.snaps) == 0 {
			return false, nil
		}
		i := w.rng.IntN(len(w.snaps))
		if w.rng.IntN(2) == 0 {
			if err := closeCheck(w.snaps[i], w.sms[i]); err != nil {
				return w.errOK("Snap.Read", err)
			}
			return false, nil
		}
		if err := w.snaps[i].Release(); err != nil {
			return false, fmt.Errorf("Snap.Release: %w", err)
		}
		w.snaps = append(w.snaps[:i], w.snaps[i+1:]...)
		w.sms = append(w.sms[:i], w.sms[i+1:]...)
	case 5:
		c, err := w.h.Branch()
		if err != nil {
			return w.errOK("Branch", err)
		}
		w.kids, w.kms = append(w.kids, c), append(w.kms, w.hm)
	case 6:
		if len(w.kids) == 0 {
			return false, nil
		}
		i := w.rng.IntN(len(w.kids))
		row := closeRow(w.id, w.n)
		if err := w.kids[i].Append(row); err != nil {
			return w.errOK("Branch.Append", err)
		}
		w.kms[i] = w.kms[i].with(row)
		if err := closeCheck(w.kids[i], w.kms[i]); err != nil {
			return w.errOK("Branch.Read", err)
		}
	case 7:
		if len(w.kids) == 0 {
			return false, nil
		}
		i := w.rng.IntN(len(w.kids))
		err := w.h.Merge(w.kids[i])
		if errors.Is(err, ErrDiverged) {
			return false, nil
		}
		if err != nil {
			return w.errOK("Merge", err)
		}
		w.hm = w.kms[i]
	case 8:
		if len(w.kids) == 0 {
			return false, nil
		}
		i := w.rng.IntN(len(w.kids))
		if err := w.kids[i].Release(); err != nil {
			return false, fmt.Errorf("Branch.Release: %w", err)
		}
		w.kids = append(w.kids[:i], w.kids[i+1:]...)
		w.kms = append(w.kms[:i], w.kms[i+1:]...)
	case 9:
		if len(w.snaps) == 0 {
			return false, nil
		}
		i := w.rng.IntN(len(w.snaps))
		err := w.h.Rollback(w.snaps[i])
		if errors.Is(err, ErrNotAncestor) {
			return false, nil
		}
		if err != nil {
			return w.errOK("Rollback", err)
		}
		w.hm = w.sms[i]
	case 10:
		if err := w.r.StepHost([][]byte{{byte(w.id), byte(w.n)}}, true, hostRecur); err != nil {
			return w.errOK("StepHost", err)
		}
	case 11:
		v := w.r.Version()
		if v > 1 {
			s, err := w.r.At(v - 1)
			if err != nil && !errors.Is(err, ErrNotRetained) {
				return w.errOK("At", err)
			}
			if err == nil {
				s.Release()
			}
			if _, err := w.r.Plan(v - 1); err != nil && !errors.Is(err, ErrNotRetained) {
				return w.errOK("Plan", err)
			}
		}
	case 12:
		if err := w.g.Head(0).Append(kvRows(1, byte(w.n))); err != nil {
			return w.errOK("member Append", err)
		}
		cut, err := w.g.Snapshot()
		if err != nil {
			return w.errOK("Group.Snapshot", err)
		}
		w.cuts = append(w.cuts, cut)
	case 13:
		if len(w.cuts) > 0 {
			i := w.rng.IntN(len(w.cuts))
			if err := w.g.Rollback(w.cuts[i]); err != nil && !errors.Is(err, ErrNotAncestor) {
				return w.errOK("Group.Rollback", err)
			}
			if w.rng.IntN(2) == 0 {
				if err := w.cuts[i].Release(); err != nil {
					return false, fmt.Errorf("GroupSnap.Release: %w", err)
				}
				w.cuts = append(w.cuts[:i], w.cuts[i+1:]...)
			}
		}
		b, err := w.g.Branch()
		if err != nil {
			return w.errOK("Group.Branch", err)
		}
		if err := b.Head(1).Write(0, recRow(byte(w.n))); err != nil {
			b.Release()
			return w.errOK("member Write", err)
		}
		if err := w.g.Merge(b); err != nil && !errors.Is(err, ErrDiverged) {
			b.Release()
			return w.errOK("Group.Merge", err)
		}
		if err := b.Release(); err != nil {
			return false, fmt.Errorf("Group.Release: %w", err)
		}
	case 14:
		row := closeRow(w.id, w.n)
		if err := w.h.AppendAsync(w.st, row); err != nil {
			return w.errOK("AppendAsync", err)
		}
		w.hm = w.hm.with(row)
	case 16:
		h, err := w.p.NewHead(kv(Append, 0, Keep), Owner(fmt.Sprint("w", w.id)))
		if err != nil {
			return w.errOK("NewHead", err)
		}
		row := closeRow(w.id, w.n)
		err = h.Append(row)
		if err == nil {
			err = closeCheck(h, closeModel{}.with(row))
		}
		if rerr := h.Release(); rerr != nil {
			return false, fmt.Errorf("Release of a new head: %w", rerr)
		}
		if err != nil {
			return w.errOK("new head Append/Read", err)
		}
	case 17:
		g, err := NewGroup(w.p, Owner(fmt.Sprint("w", w.id)), kv(Append, 0, Keep), rec(Keep))
		if err != nil {
			return w.errOK("NewGroup", err)
		}
		cut, err := g.Snapshot()
		if err == nil {
			err = cut.Release()
		}
		if rerr := g.Release(); rerr != nil {
			return false, fmt.Errorf("Release of a new group: %w", rerr)
		}
		if err != nil {
			return w.errOK("new group Snapshot", err)
		}
	case 18:
		st := w.p.Stats()
		if st.Live < 0 || (w.closing.Load() && false) {
			return false, fmt.Errorf("Stats: %+v", st)
		}
		if _, err := w.p.Trim(); err != nil {
			return w.errOK("Trim", err)
		}
	case 15:
		if w.table == nil {
			t, err := w.h.BlockTable()
			if err != nil {
				return w.errOK("BlockTable", err)
			}
			w.table = t
		}
		if _, err := w.table.Column(0); err != nil {
			return w.errOK("Column", err)
		}
	}
	return false, nil
}

// afterClose runs one call of each kind, every one of which must answer
// ErrReleased, then releases everything, which must answer nil.
func (w *closeWorker) afterClose() error {
	calls := map[string]error{
		"Append":      w.h.Append(closeRow(w.id, 0)),
		"Read":        w.h.Read(0, 0, [][]byte{nil, nil}),
		"AppendAsync": w.h.AppendAsync(w.st, closeRow(w.id, 0)),
		"StepHost":    w.r.StepHost(nil, false, hostRecur),
		"Merge":       nil,
	}
	_, calls["Snapshot"] = w.h.Snapshot()
	_, calls["Branch"] = w.h.Branch()
	_, calls["At"] = w.r.At(1)
	_, calls["Plan"] = w.r.Plan(1)
	_, calls["BlockTable"] = w.h.BlockTable()
	_, calls["Group.Snapshot"] = w.g.Snapshot()
	_, calls["Group.Branch"] = w.g.Branch()
	_, calls["Group.At"] = w.g.At(1)
	if len(w.kids) > 0 {
		calls["Merge"] = w.h.Merge(w.kids[0])
	} else {
		delete(calls, "Merge")
	}
	if len(w.snaps) > 0 {
		calls["Snap.Read"] = w.snaps[0].Read(0, 0, [][]byte{nil, nil})
		calls["Rollback"] = w.h.Rollback(w.snaps[0])
	}
	for op, err := range calls {
		if !errors.Is(err, ErrReleased) {
			return fmt.Errorf("worker %d: %s after Close: %v, want ErrReleased", w.id, op, err)
		}
	}
	var errs []error
	for _, s := range w.snaps {
		errs = append(errs, s.Release())
	}
	for _, c := range w.kids {
		errs = append(errs, c.Release())
	}
	for _, c := range w.cuts {
		errs = append(errs, c.Release())
	}
	if w.table != nil {
		w.table.Release()
	}
	errs = append(errs, w.h.Release(), w.r.Release(), w.g.Release())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("worker %d: releases after Close: %w", w.id, err)
	}
	return nil
}

func newCloseWorker(t *testing.T, p *Pool, id uint32, closing *atomic.Bool, seed uint64) *closeWorker {
	w := &closeWorker{t: t, id: id, p: p, rng: rand.New(rand.NewPCG(seed, uint64(id))), closing: closing}
	w.h = must[*Head](t)(p.NewHead(kv(Append, 0, Keep), Owner(fmt.Sprint("w", id))))
	w.r = must[*Head](t)(p.NewHead(recLayout(3, 2, Keep), Owner(fmt.Sprint("w", id))))
	w.g = must[*Group](t)(NewGroup(p, Owner(fmt.Sprint("w", id)), kv(Append, 0, Keep), rec(Keep)))
	st, err := p.Backend().(device.Streams).NewStream()
	check(t, err)
	w.st = st
	return w
}

// TestCloseRacesEveryCall: goroutines work on handles of their own (heads of
// many shards, snapshots, branches, merges, rollbacks, steps, At/Plan,
// groups, AppendAsync on a host stream, block tables) while Close runs.
// Every call fails only with ErrReleased, and only once Close began;
// Close names the live handles; every call after Close answers
// ErrReleased; Stats after Close reports nothing live.
func TestCloseRacesEveryCall(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  PoolOptions
	}{
		{"free", PoolOptions{BlockBytes: 256}},
		{"capped", PoolOptions{BlockBytes: 256, MaxBytes: 64 * 256}},
		{"tier", PoolOptions{BlockBytes: 256, MaxBytes: 64 * 256, HostTier: 64 * 256}},
	} {
		t.Run(c.name, func(t *testing.T) { closeRace(t, c.opt) })
	}
}

func closeRace(t *testing.T, opt PoolOptions) {
	d := 1500 * time.Millisecond
	if raceDetector {
		d = 500 * time.Millisecond // the race detector runs it many times slower
	}
	deadline := time.Now().Add(d)
	for round := 0; round == 0 || time.Now().Before(deadline); round++ {
		be := device.Host()
		p, err := NewPool(be, opt)
		check(t, err)
		var closing, closed atomic.Bool
		const W = 6
		ws := make([]*closeWorker, W)
		for i := range ws {
			ws[i] = newCloseWorker(t, p, uint32(round*W+i), &closing, uint64(round))
			ws[i].pressure = opt.MaxBytes > 0
		}
		var wg sync.WaitGroup
		errc := make(chan error, W+1)
		if opt.MaxBytes > 0 {
			// optional heads, made, used and snapshotted in a loop, for
			// eviction and the tier to take
			wg.Add(1)
			go func() {
				defer wg.Done()
				var hs []*Head
				var ss []*Snap
				defer func() {
					for _, h := range hs {
						h.Release()
					}
					for _, s := range ss {
						s.Release()
					}
				}()
				dst := [][]byte{make([]byte, 4*256)}
				for i := 0; !closed.Load(); i++ {
					h, err := p.NewHead(closeOptional(4), "churn")
					if err != nil {
						if errors.Is(err, ErrReleased) && closing.Load() {
							return
						}
						if !errors.Is(err, ErrNoMemory) {
							errc <- fmt.Errorf("churn NewHead: %w", err)
							return
						}
						continue
					}
					hs = append(hs, h)
					x := hs[i%len(hs)]
					if err := x.Write(i%4, [][]byte{make([]byte, 256)}); err != nil && !errors.Is(err, ErrEvicted) && !errors.Is(err, ErrNoMemory) && !(errors.Is(err, ErrReleased) && closing.Load()) {
						errc <- fmt.Errorf("churn Write: %w", err)
						return
					}
					if err := x.Read(0, 4, dst); err != nil && !errors.Is(err, ErrEvicted) && !errors.Is(err, ErrNoMemory) && !(errors.Is(err, ErrReleased) && closing.Load()) {
						errc <- fmt.Errorf("churn Read: %w", err)
						return
					}
					if s, err := x.Snapshot(); err == nil {
						ss = append(ss, s)
					}
					if len(hs) > 24 {
						hs[0].Release()
						hs = hs[1:]
					}
					if len(ss) > 8 {
						ss[0].Release()
						ss = ss[1:]
					}
				}
			}()
		}
		for _, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := w.step()
					if err != nil {
						errc <- err
						return
					}
					if c || closed.Load() {
						break
					}
				}
				for !closed.Load() {
					time.Sleep(100 * time.Microsecond)
				}
				if err := w.afterClose(); err != nil {
					errc <- err
				}
			}()
		}
		time.Sleep(time.Duration(1+round%20) * time.Millisecond)
		if round == 15 {
			st := p.Stats()
			t.Logf("before Close: evictions %d, tier out %d, live %d", st.Evictions, st.TierOut, st.Live)
		}
		closing.Store(true)
		cerr := p.Close()
		st := p.Stats()
		closed.Store(true)
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatalf("round %d: %v", round, err)
		}
		if cerr == nil || !strings.Contains(cerr.Error(), "live handles") {
			t.Fatalf("round %d: Close with live handles: %v", round, cerr)
		}
		if st.Live != 0 || st.LogicalBytes != 0 {
			t.Fatalf("round %d: Stats after Close: Live %d LogicalBytes %d", round, st.Live, st.LogicalBytes)
		}
		if st := p.Stats(); st.Live != 0 || st.LogicalBytes != 0 || st.PhysicalBytes != 0 {
			t.Fatalf("round %d: Stats after Close and the releases: %+v", round, st)
		}
		for _, w := range ws {
			w.st.Close()
		}
		be.Close()
	}
}

// closeOptional is an optional mutable layout of bound rows of 256 bytes,
// for eviction and the host tier to take.
func closeOptional(bound int) *Layout {
	return &Layout{Type: "Optional", Columns: []Column{{Name: "Row", ElemSize: 8, Width: 32}},
		Growth: Mutable, Bound: bound, Retention: Optional}
}
