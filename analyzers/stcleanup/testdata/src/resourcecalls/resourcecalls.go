// Package resourcecalls calls methods on its resources: no call on the
// resource itself ends the obligation, so the error of such a call
// returned before the release leaks it.
package resourcecalls

import (
	"errors"
	"kv"

	"res"

	"github.com/gpustate/gpustate/runtime/state"
)

// ---- leaks ----

func readErrorReturned(p *res.Pool) error {
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return err
	}
	rows, err := s.Read(0, 1)
	if err != nil {
		return err
	}
	_ = rows
	return s.Release()
}

// kv.PromptState.Read reads through a helper that calls Len on the head:
// Read does not take its receiver.
func generatedReadErrorReturned(p *state.Pool) error {
	s, err := kv.NewPromptState(p, "req") // want `PromptState acquired by NewPromptState is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return err
	}
	rows, err := s.Read(0, 1)
	if err != nil {
		return err
	}
	_ = rows
	return s.Release()
}

func readIntoErrorReturned(p *res.Pool, dst []int) error {
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return err
	}
	if err := s.ReadInto(dst); err != nil {
		return err
	}
	return s.Release()
}

func lenThenReturn(p *res.Pool) (int, error) {
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return 0, err
	}
	n := s.Len()
	if n == 0 {
		return 0, errors.New("empty")
	}
	return n, s.Release()
}

func snapshotReadErrorReturned(s *res.State) error {
	v, err := s.Snapshot() // want `Snap acquired by Snapshot is not released on every path; add defer v.Release\(\)`
	if err != nil {
		return err
	}
	if v.Len() == 0 {
		return errors.New("empty")
	}
	_ = v.Spans()
	return v.Release()
}

func errorSent(p *res.Pool, errs chan error) {
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return
	}
	if err := s.Append(1); err != nil {
		errs <- err
		return
	}
	s.Release()
}

func errorReassigned(p *res.Pool) error {
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return err
	}
	err = s.Append(1)
	if err != nil {
		return err
	}
	return s.Release()
}

func deferredConditionalRelease(p *res.Pool, keep bool) error {
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return err
	}
	defer func() {
		if !keep {
			s.Release()
		}
	}()
	return s.Append(1)
}

func loopOverwritesSecondVariable(s *res.State, n int) {
	var last *res.Snap
	for i := 0; i < n; i++ {
		v, err := s.Snapshot() // want `Snap acquired by Snapshot is overwritten before it is released; release it first`
		if err != nil {
			return
		}
		last = v
	}
	if last != nil {
		last.Release()
	}
}

func selectDefaultReturns(ch chan *res.State) error {
	s := res.Open() // want `State acquired by Open is not released on every path; it is kept on another path, so call s.Release\(\) before the return that leaks it, not in a defer`
	select {
	case ch <- s:
		return nil
	default:
		return errors.New("full")
	}
}

// conn wraps a state: newConn, which returns it, acquires a conn, and
// Close, which releases the field, releases a conn.
type conn struct{ s *res.State }

func newConn(p *res.Pool) (*conn, error) {
	s, err := res.NewState(p)
	if err != nil {
		return nil, err
	}
	return &conn{s: s}, nil
}

func (c *conn) Close() error { return c.s.Release() }

func wrapperNotClosed(p *res.Pool) error {
	c, err := newConn(p) // want `conn acquired by newConn is not released on every path; add defer c.Close\(\)`
	if err != nil {
		return err
	}
	return c.s.Append(1)
}

type pair struct {
	s *res.State
	n int
}

func namedResultFieldCleared(p *res.Pool) (out pair, err error) {
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path`
	if err != nil {
		return out, err
	}
	out.s = s
	out.n = 1
	if err := s.Append(1); err != nil {
		out.s = nil
		return out, err
	}
	return out, nil
}

// ---- no leaks ----

func readThenRelease(p *res.Pool) error {
	s, err := res.NewState(p)
	if err != nil {
		return err
	}
	defer s.Release()
	rows, err := s.Read(0, 1)
	if err != nil {
		return err
	}
	_ = rows
	return nil
}

// The error-path cleanup: released in a deferred closure when the named
// error is set, kept on the other path.
func deferredErrorCleanup(p *res.Pool) (s *res.State, err error) {
	s, err = res.NewState(p)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Release()
		}
	}()
	err = s.Append(1)
	return s, err
}

func loopReleasesPrevious(s *res.State, n int) {
	var prev *res.Snap
	for i := 0; i < n; i++ {
		v, err := s.Snapshot()
		if err != nil {
			break
		}
		if prev != nil {
			prev.Release()
		}
		prev = v
	}
	if prev != nil {
		prev.Release()
	}
}

func selectEveryPath(ch chan *res.State) error {
	s := res.Open()
	select {
	case ch <- s:
		return nil
	default:
		s.Release()
		return errors.New("full")
	}
}

func wrapperClosed(p *res.Pool) error {
	c, err := newConn(p)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.s.Append(1)
}

func namedResultFieldKept(p *res.Pool) (out pair, err error) {
	s, err := res.NewState(p)
	if err != nil {
		return out, err
	}
	out.s = s
	out.n = 1
	if err := s.Append(1); err != nil {
		s.Release()
		return pair{}, err
	}
	return out, nil
}

type beam struct{ s *res.State }

// A deferred closure that releases every element it ranges over
// (examples/kvcache's beam search).
func deferredRangeRelease(s *res.State) error {
	root, err := s.Branch()
	if err != nil {
		return err
	}
	beams := []beam{{s: root}}
	defer func() {
		for _, b := range beams {
			b.s.Release()
		}
	}()
	return root.Append(1)
}

// ---- resources kept in a local slice ----

func loopErrorLeaksKept(s *res.State, n int) error {
	var snaps []*res.Snap
	for i := 0; i < n; i++ {
		v, err := s.Snapshot() // want `Snap acquired by Snapshot is not released on every path; release it before each return`
		if err != nil {
			return err
		}
		snaps = append(snaps, v)
	}
	for _, v := range snaps {
		v.Release()
	}
	return nil
}

func loopKeptReleased(s *res.State, n int) error {
	var snaps []*res.Snap
	defer func() {
		for _, v := range snaps {
			v.Release()
		}
	}()
	for i := 0; i < n; i++ {
		v, err := s.Snapshot()
		if err != nil {
			return err
		}
		snaps = append(snaps, v)
	}
	return nil
}

var registry [][]*res.Snap

// keepAll keeps the list: its takes fact is inferred.
func keepAll(vs []*res.Snap) { registry = append(registry, vs) }

// releaseList releases each of vs.
func releaseList(vs []*res.Snap) {
	for _, v := range vs {
		v.Release()
	}
}

func loopKeptHandedOn(s *res.State, n int) {
	var snaps []*res.Snap
	for i := 0; i < n; i++ {
		v, err := s.Snapshot()
		if err != nil {
			break
		}
		snaps = append(snaps, v)
	}
	keepAll(snaps)
	var more []*res.Snap
	for i := 0; i < n; i++ {
		v, err := s.Snapshot()
		if err != nil {
			break
		}
		more = append(more, v)
	}
	releaseList(more)
}

func loopKeptReturned(s *res.State, n int) ([]*res.Snap, error) {
	var snaps []*res.Snap
	for i := 0; i < n; i++ {
		v, err := s.Snapshot()
		if err != nil {
			releaseList(snaps)
			return nil, err
		}
		snaps = append(snaps, v)
	}
	return snaps, nil
}

// A list emptied from its end, each element released as it is taken
// (examples/kvcache's shared prefixes).
func popRelease(s *res.State, n int) error {
	var live []*res.Snap
	for i := 0; i < n; i++ {
		v, err := s.Snapshot()
		if err != nil {
			break
		}
		live = append(live, v)
	}
	for len(live) > 0 {
		v := live[len(live)-1]
		live = live[:len(live)-1]
		if err := v.Release(); err != nil {
			return err
		}
	}
	return nil
}

// ---- a view of a resource is the resource ----

type model struct{ layers map[int]*res.State }

func viewOfAcquireStored(m *model) {
	m.layers[0] = res.Open().Layer(0)
}

func viewReturned(i int) *res.State {
	s := res.Open()
	return s.Layer(i)
}

func viewReleased() {
	l := res.Open().Layer(0)
	l.Release()
}

func viewDiscarded() {
	res.Open().Layer(0) // want `State acquired by Open is discarded`
}

func viewNotReleased(i int) error {
	l := res.Open().Layer(i) // want `State acquired by Open is not released on every path; add defer l.Release\(\)`
	return l.Append(1)
}

// A release done once, guarded by a flag that the explicit release sets
// too (internal/coverage/cfile's output file).
func closeOnce(p *res.Pool, early bool) error {
	s, err := res.NewState(p)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			closed = true
			s.Release()
		}
	}()
	if early {
		return nil
	}
	closed = true
	return s.Release()
}
