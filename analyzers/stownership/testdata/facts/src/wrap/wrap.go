// Package wrap wraps res with plain functions: no directives.
package wrap

import "res"

var kept []*res.State

// Open acquires a state.
func Open(p *res.Pool) (*res.State, error) { // want Open:"acquirer"
	s, err := res.NewState(p)
	if err != nil {
		return nil, err
	}
	if err := s.Append(0); err != nil {
		s.Release()
		return nil, err
	}
	return s, nil
}

// OpenTwice wraps a wrapper.
func OpenTwice(p *res.Pool) (*res.State, error) { // want OpenTwice:"acquirer"
	return Open(p)
}

// Cached does not hand out a new resource: it keeps it.
func Cached(c *Cache) *res.State {
	if c.s == nil {
		c.s = res.Open()
	}
	return c.s
}

// Cache keeps a state.
type Cache struct{ s *res.State }

// Close releases s.
func Close(s *res.State) { // want Close:"takes\\(0\\) releases\\(0\\)"
	s.Release()
}

// CloseAll releases every xs.
func CloseAll(xs ...*res.State) { // want CloseAll:"takes\\(0\\) releases\\(0\\)"
	for _, x := range xs {
		if x != nil {
			x.Release()
		}
	}
}

// Keep keeps s for later.
func Keep(s *res.State) { // want Keep:"takes\\(0\\)"
	kept = append(kept, s)
}

// MaybeClose releases s on one path only.
func MaybeClose(s *res.State, b bool) {
	if b {
		s.Release()
	}
}

// Peek only reads s.
func Peek(s *res.State) int { return s.Len() }

// Handle wraps a state.
type Handle struct{ s *res.State }

// Close releases the wrapped state.
func (h *Handle) Close() { h.s.Release() } // want Close:"takes\\(-1\\) releases\\(-1\\)"

// Len reads through the handle.
func (h *Handle) Len() int { return h.s.Len() }

// Stats is computed from a state.
type Stats struct {
	N    int
	Tags []string
}

func count(s *res.State) Stats { return Stats{N: s.Len()} }

// Stats returns a value built from a part of the handle (its state):
// returning it does not keep the handle, so Stats takes nothing.
func (h *Handle) Stats() Stats {
	st := count(h.s)
	return st
}
