package a

import (
	"errors"
	"log"
	"os"
	"res"
	"testing"
)

var global *res.State

type holder struct{ s *res.State }

// ---- leaks ----

func leakAtReturn(p *res.Pool) error {
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return err
	}
	s.Append(1)
	return nil
}

func leakOnOneBranch(p *res.Pool, early bool) error {
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path`
	if err != nil {
		return err
	}
	if early {
		return errors.New("early")
	}
	return s.Release()
}

func discarded(p *res.Pool) {
	res.Open() // want `State acquired by Open is discarded; assign it and call its Release method when done`
}

func discardedBlank(p *res.Pool) {
	_, _ = res.NewState(p) // want `State acquired by NewState is discarded`
}

func discardedDeferGo(s *res.State) {
	defer res.Open() // want `State acquired by Open is discarded`
	go res.Open()    // want `State acquired by Open is discarded`
}

// Keeping only the error: on success the resource is held by nobody, in
// every form of the assignment.
func discardedKeepErr(t *testing.T, s *res.State) error {
	if _, err := res.NewState(nil); err == nil { // want `State acquired by NewState is discarded: _ drops it when the call succeeds; assign it to a variable and call its Release method after the error check`
		t.Error("NewState with a nil pool")
	}
	_, err := s.Snapshot() // want `Snap acquired by Snapshot is discarded: _ drops it`
	if err != nil {
		return err
	}
	if _, err := s.Branch(); err != nil { // want `State acquired by Branch is discarded: _ drops it`
		return err
	}
	var _, err2 = s.Branch() // want `State acquired by Branch is discarded: _ drops it`
	_, err = s.Snapshot()    // want `Snap acquired by Snapshot is discarded: _ drops it`
	return errors.Join(err, err2)
}

// The correct twin of discardedKeepErr: the result is kept and released.
func keptWithErr(t *testing.T, s *res.State) error {
	if v, err := res.NewState(nil); err == nil {
		t.Error("NewState with a nil pool")
		v.Release()
	}
	v, err := s.Snapshot()
	if err != nil {
		return err
	}
	defer v.Release()
	if b, err := s.Branch(); err != nil {
		return err
	} else {
		b.Release()
	}
	return nil
}

// Handing both results on: the callee decides.
func handedOn(t *testing.T) {
	if err := second(res.NewState(nil)); err == nil {
		t.Error("NewState with a nil pool")
	}
}

func second[T any](_ T, err error) error { return err }

// Correlated conditions: released under the same condition it was
// acquired under (runtime/state's benchmarks).
func correlated(shared bool, n int) {
	for i := 0; i < n; i++ {
		var s *res.State
		if shared {
			s = res.Open()
		}
		s.Len()
		if shared {
			s.Release()
		}
	}
}

func correlatedLeak(shared, other bool) {
	var s *res.State
	if shared {
		s = res.Open() // want `not released on every path`
	}
	if other {
		s.Release()
	}
}

func discardedArg() int {
	return use(res.Open()) // want `State acquired by Open is discarded`
}

func use(s *res.State) int { return s.Len() }

func overwrittenInLoop(n int) {
	for i := 0; i < n; i++ {
		s := res.Open() // want `State acquired by Open is overwritten before it is released`
		s.Append(i)
	}
}

func overwrittenByNil() {
	s := res.Open() // want `State acquired by Open is overwritten before it is released`
	s.Append(1)
	s = nil
	_ = s
}

func leakInClosure() func() {
	return func() {
		s := res.Open() // want `State acquired by Open is not released on every path`
		s.Append(1)
	}
}

func leakInSwitch(k int) {
	s := res.Open() // want `State acquired by Open is not released on every path`
	switch k {
	case 0:
		s.Release()
	case 1:
		defer s.Release()
	}
}

func leakSnapshot(s *res.State) error {
	v, err := s.Snapshot() // want `Snap acquired by Snapshot is not released on every path; add defer v.Release\(\)`
	if err != nil {
		return err
	}
	_ = v.Spans()
	return nil
}

func leakGeneric[T any](x T) T {
	s := res.Open() // want `State acquired by Open is not released on every path`
	s.Append(1)
	return x
}

// ---- no leaks ----

func deferRelease(p *res.Pool) error {
	s, err := res.NewState(p)
	if err != nil {
		return err
	}
	defer s.Release()
	return s.Append(1)
}

func deferClosure(p *res.Pool) error {
	s, err := res.NewState(p)
	if err != nil {
		return err
	}
	defer func() { s.Release() }()
	return s.Append(1)
}

func closeAll(xs ...*res.State) {
	for _, x := range xs {
		x.Release()
	}
}

func release(s *res.State) {
	if s != nil {
		s.Release()
	}
}

func deferHelper(p *res.Pool) error {
	s, err := res.NewState(p)
	if err != nil {
		return err
	}
	t, err := s.Branch()
	if err != nil {
		s.Release()
		return err
	}
	defer closeAll(s, t)
	return nil
}

func helper(p *res.Pool) {
	s, err := res.NewState(p)
	if err != nil {
		return
	}
	s.Append(1)
	release(s)
}

func returned(p *res.Pool) (*res.State, error) {
	s, err := res.NewState(p)
	if err != nil {
		return nil, err
	}
	if err := s.Append(1); err != nil {
		s.Release()
		return nil, err
	}
	return s, nil
}

func returnedInStruct(p *res.Pool) (*holder, error) {
	s, err := res.NewState(p)
	if err != nil {
		return nil, err
	}
	return &holder{s: s}, nil
}

func returnedStructValue() holder {
	s := res.Open()
	h := holder{s: s}
	return h
}

func storedInField(h *holder) {
	h.s = res.Open()
	s := res.Open()
	h.s = s
}

func storedInGlobal() {
	s := res.Open()
	global = s
}

func storedInMapSliceChan(m map[string]*res.State, ch chan *res.State) []*res.State {
	a := res.Open()
	m["a"] = a
	b := res.Open()
	ch <- b
	var list []*res.State
	c := res.Open()
	list = append(list, c)
	return list
}

func goroutine() {
	s := res.Open()
	go func() {
		defer s.Release()
		s.Append(1)
	}()
}

func takes(p *res.Pool) error {
	s, err := res.NewState(p)
	if err != nil {
		return err
	}
	res.Adopt(s)
	return nil
}

func errorPathElse(p *res.Pool) {
	s, err := res.NewState(p)
	if err == nil {
		defer s.Release()
	}
}

func errorCompound(p *res.Pool, strict bool) error {
	s, err := res.NewState(p)
	if err != nil || strict {
		if s != nil {
			s.Release()
		}
		return err
	}
	return s.Release()
}

func panics(p *res.Pool, bad bool) {
	s, err := res.NewState(p)
	if err != nil {
		panic(err)
	}
	if bad {
		panic("bad")
	}
	defer s.Release()
}

func fatal(p *res.Pool) {
	s, err := res.NewState(p)
	if err != nil {
		log.Fatal(err)
	}
	if s.Len() > 10 {
		os.Exit(1)
	}
	s.Release()
}

func testFatal(t *testing.T, p *res.Pool) {
	s, err := res.NewState(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Release() })
	v, err := s.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	t.Cleanup(func() { v.Release() })
}

func methodValue(t *testing.T) {
	s := res.Open()
	t.Cleanup(func() { _ = s.Release() })
	u := res.Open()
	defer t.Cleanup(func() { u.Release() })
}

func phi(p *res.Pool, branch bool) error {
	var s *res.State
	var err error
	if branch {
		s, err = res.NewState(p)
	} else {
		s = res.Open()
	}
	if err != nil {
		return err
	}
	defer s.Release()
	return nil
}

func named(p *res.Pool) (s *res.State, err error) {
	s, err = res.NewState(p)
	if err != nil {
		return
	}
	return
}

func loops(p *res.Pool, n int) error {
outer:
	for i := 0; i < n; i++ {
		for j := range n {
			s, err := res.NewState(p)
			if err != nil {
				continue outer
			}
			if j == i {
				s.Release()
				break outer
			}
			s.Release()
		}
	}
	for range n {
		s := res.Open()
		defer s.Release()
	}
	return nil
}

func gotos(n int) {
	s := res.Open()
	i := 0
again:
	if i < n {
		i++
		goto again
	}
	s.Release()
}

func selects(ch chan int) {
	s := res.Open()
	select {
	case <-ch:
		s.Release()
	default:
		s.Release()
	}
}

func nilCheck() {
	s := res.Open()
	if s == nil {
		return
	}
	s.Release()
}

func generic[T any](x T) T {
	s := res.Open()
	defer s.Release()
	return x
}

func alias() {
	s := res.Open()
	t := s
	t.Release()
}

func pool() error {
	p, err := res.NewPool()
	if err != nil {
		return err
	}
	defer p.Close()
	return nil
}

// A deferred closure declared before the acquire sees the variable at exit
// (mime/multipart.readForm).
func deferredBeforeAcquire(n int) (err error) {
	var s *res.State
	defer func() {
		if s != nil {
			s.Release()
		}
	}()
	for i := 0; i < n; i++ {
		if s == nil {
			s = res.Open()
		}
		if err = s.Append(i); err != nil {
			return err
		}
	}
	return nil
}

type releaser interface{ Release() error }

func closeGeneric[T releaser](x T) { x.Release() }

func closeIface(r releaser) { r.Release() }

func genericHelper() {
	s := res.Open()
	closeGeneric(s)
	t := res.Open()
	closeIface(t)
}

func cleanupVar() {
	s := res.Open()
	cleanup := func() { s.Release() }
	defer cleanup()
}

func ifInit(p *res.Pool) {
	if s, err := res.NewState(p); err == nil {
		defer s.Release()
	}
}

func leakIfInit(p *res.Pool) {
	if s, err := res.NewState(p); err == nil { // want `not released on every path`
		s.Append(1)
	}
}

var errBusy = errors.New("busy")

func switchErr(p *res.Pool) error {
	s, err := res.NewState(p)
	switch {
	case err != nil:
		return err
	case s.Len() > 3:
		s.Release()
		return errBusy
	}
	return s.Release()
}

func errorsIs(p *res.Pool) error {
	s, err := res.NewState(p)
	if errors.Is(err, errBusy) {
		return nil
	}
	if err != nil {
		return err
	}
	defer s.Release()
	return nil
}

func selectSend(ch chan *res.State, done chan struct{}) {
	s := res.Open()
	select {
	case ch <- s:
	case <-done:
		s.Release()
	}
}

type assertions struct{}

// NoError reports whether err is nil, as testify's assert.NoError does.
func (assertions) NoError(t *testing.T, err error) bool { return err == nil }

var assert assertions

func testifyStyle(t *testing.T, p *res.Pool) {
	s, err := res.NewState(p)
	if !assert.NoError(t, err) {
		return
	}
	defer s.Release()
}

type lener interface{ Len() int }

type counter struct{ l lener }

func count(l lener) *counter {
	c := &counter{}
	c.l = l
	return c
}

// The result of a call may hold its arguments (bufio.NewReader(f)).
func wrapped() *counter {
	s := res.Open()
	return count(s)
}

func wrappedLocal() *counter {
	s := res.Open()
	c := count(s)
	return c
}
