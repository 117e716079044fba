package fix

import (
	"log"
	"res"
)

func withErr(p *res.Pool) error {
	s, err := res.NewState(p) // want `add defer s.Release\(\)`
	if err != nil {
		return err
	}
	return s.Append(1)
}

func noErr() int {
	s := res.Open() // want `add defer s.Release\(\)`
	return s.Len()
}

func escapes(p *res.Pool, keep bool) (*res.State, error) {
	s, err := res.NewState(p) // want `not released on every path`
	if err != nil {
		return nil, err
	}
	if keep {
		return s, nil
	}
	return nil, nil
}

func inLoop(n int) {
	for range n {
		s := res.Open() // want `overwritten before it is released`
		s.Append(1)
	}
}

func fatal(t interface{ Fatal(...any) }, p *res.Pool) int {
	s, err := res.NewState(p) // want `not released on every path`
	if err != nil {
		log.Fatal(err)
	}
	return s.Len()
}

func logged(p *res.Pool) int {
	s, err := res.NewState(p) // want `not released on every path`
	if err != nil {
		log.Print(err)
	}
	return s.Len()
}

// Kept in a map on the success path: a deferred release would release what
// the map keeps, so no fix is offered.
func storedOnSuccess(p *res.Pool, m map[int]*res.State) error {
	s, err := res.NewState(p) // want `it is kept on another path, so call s.Release\(\) before the return that leaks it, not in a defer`
	if err != nil {
		return err
	}
	if err := s.Append(1); err != nil {
		return err
	}
	m[0] = s
	return nil
}
