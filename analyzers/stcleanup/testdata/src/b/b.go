package b

import (
	"res"
	"wrap"
)

func leak(p *res.Pool) error {
	s, err := wrap.Open(p) // want `State acquired by Open is not released on every path; add defer s.Release\(\)`
	if err != nil {
		return err
	}
	return s.Append(1)
}

func leakTwice(p *res.Pool) int {
	s, _ := wrap.OpenTwice(p) // want `State acquired by OpenTwice is not released on every path`
	return wrap.Peek(s)
}

func closed(p *res.Pool) error {
	s, err := wrap.Open(p)
	if err != nil {
		return err
	}
	defer wrap.Close(s)
	return nil
}

func closedAll(p *res.Pool) error {
	s, err := wrap.Open(p)
	if err != nil {
		return err
	}
	t, err := wrap.Open(p)
	if err != nil {
		wrap.Close(s)
		return err
	}
	defer wrap.CloseAll(s, t)
	return nil
}

func kept(p *res.Pool) {
	s, err := wrap.Open(p)
	if err == nil {
		wrap.Keep(s)
	}
}
