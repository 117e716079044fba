// Package wrap wraps res with plain functions: no directives.
package wrap

import "res"

var kept []*res.State

// Open acquires a state.
func Open(p *res.Pool) (*res.State, error) {
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
func OpenTwice(p *res.Pool) (*res.State, error) {
	return Open(p)
}

// Close releases s.
func Close(s *res.State) {
	s.Release()
}

// CloseAll releases every xs.
func CloseAll(xs ...*res.State) {
	for _, x := range xs {
		if x != nil {
			x.Release()
		}
	}
}

// Keep keeps s for later.
func Keep(s *res.State) {
	kept = append(kept, s)
}

// Peek only reads s.
func Peek(s *res.State) int { return s.Len() }

// Handle wraps a state.
type Handle struct{ s *res.State }

// Close releases the wrapped state.
func (h *Handle) Close() { h.s.Release() }
