// Package advice leaks resources that are kept on the success path: the
// message asks for a release on the failing path, not a deferred one.
package advice

import "res"

// ---- leaks ----

func storedInMapOnSuccess(p *res.Pool, m map[string]*res.State, k string) error {
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path; it is kept on another path, so call s.Release\(\) before the return that leaks it, not in a defer`
	if err != nil {
		return err
	}
	if err := s.Append(1); err != nil {
		return err
	}
	m[k] = s
	return nil
}

func returnedOnSuccess(p *res.Pool) (*res.State, error) {
	s, err := res.NewState(p) // want `it is kept on another path, so call s.Release\(\) before the return that leaks it`
	if err != nil {
		return nil, err
	}
	if err := s.Append(1); err != nil {
		return nil, err
	}
	return s, nil
}

// ---- no leaks ----

func releasedOnFailure(p *res.Pool, m map[string]*res.State, k string) error {
	s, err := res.NewState(p)
	if err != nil {
		return err
	}
	if err := s.Append(1); err != nil {
		s.Release()
		return err
	}
	m[k] = s
	return nil
}
