// Package borrow hands resources to callees: one whose facts are unknown
// (an unannotated interface method, a function value) borrows the
// resource and the caller must still release it; a takes parameter,
// declared or inferred from what the callee visibly stores, and the
// standard library's keepers end the obligation.
package borrow

import (
	"runtime"
	"sync"

	"res"
)

type user interface{ Use(s *res.State) error }

// ---- leaks ----

func interfaceMethodBorrows(u user) error {
	s := res.Open() // want `State acquired by Open is not released on every path; add defer s.Release\(\)`
	return u.Use(s)
}

func funcValueBorrows(f func(*res.State)) {
	s := res.Open() // want `State acquired by Open is not released on every path; add defer s.Release\(\)`
	f(s)
}

// A method with arguments, or with a result other than an error, called
// on an interface-typed resource is no release.
func interfaceCallsOnResource() error {
	e, err := res.OpenEngine() // want `Engine acquired by OpenEngine is not released on every path; release it before each return`
	if err != nil {
		return err
	}
	_ = e.Len()
	return e.Forward(1)
}

func deferredLiteralKeeps() {
	s := res.Open() // want `State acquired by Open is not released on every path; add defer s.Release\(\)`
	defer func(s *res.State) { _ = s.Len() }(s)
}

// ---- no leaks ----

var kept = map[int]*res.State{}

// store keeps s: its takes fact is inferred.
func store(k int, s *res.State) { kept[k] = s }

func storedByCallee() {
	s := res.Open()
	store(1, s)
}

func syncMapStore(m *sync.Map) {
	s := res.Open()
	m.Store("a", s)
	t := res.Open()
	if _, loaded := m.LoadOrStore("b", t); loaded {
		t.Release()
	}
}

// A finalizer is an escape, not a release: statevet stays silent, and
// docs/analyzers/stcleanup.md says why a GPU resource should not wait for the
// garbage collector.
func finalizer() {
	s := res.Open()
	runtime.SetFinalizer(s, func(s *res.State) { s.Release() })
	t := res.Open()
	runtime.AddCleanup(t, func(int) {}, 0)
}

func literalReleases() {
	s := res.Open()
	defer func(s *res.State) { s.Release() }(s)
	t := res.Open()
	func(t *res.State) { t.Release() }(t)
}

func goroutineKeeps(f func(*res.State)) {
	s := res.Open()
	go f(s)
}

func closureKeeps(run func(func())) {
	s := res.Open()
	run(func() { s.Release() })
}

func interfaceClose() error {
	e, err := res.OpenEngine()
	if err != nil {
		return err
	}
	defer e.Close()
	return e.Forward(1)
}
