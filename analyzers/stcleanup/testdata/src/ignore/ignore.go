package ignore

import "res"

// Ignored is silenced by an ignore on the line above the finding.
func ignored(p *res.Pool) error {
	//statevet:ignore stcleanup reason="the pool releases its states when it closes"
	s, err := res.NewState(p)
	if err != nil {
		return err
	}
	s.Append(1)
	return nil
}

// SameLine is silenced on the finding's own line.
func sameLine(p *res.Pool) error {
	s, err := res.NewState(p) //statevet:ignore stcleanup reason="the pool releases it"
	if err != nil {
		return err
	}
	s.Append(1)
	return nil
}

// NoReason is not silenced: an ignore needs a reason.
func noReason(p *res.Pool) error {
	//statevet:ignore stcleanup // want `//statevet:ignore stcleanup has no reason, so it silences nothing`
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path`
	if err != nil {
		return err
	}
	s.Append(1)
	return nil
}

// Unused has no stcleanup finding: its ignore silences nothing.
func unused(p *res.Pool) error {
	//statevet:ignore stcleanup reason="left over" // want `//statevet:ignore stcleanup silences nothing: no stcleanup finding on this line or the next`
	s, err := res.NewState(p)
	if err != nil {
		return err
	}
	defer s.Release()
	s.Append(1)
	return nil
}

// Other names another analyzer, which stcleanup neither honours nor checks.
func other(p *res.Pool) error {
	//statevet:ignore streleased reason="another analyzer's business"
	s, err := res.NewState(p) // want `State acquired by NewState is not released on every path`
	if err != nil {
		return err
	}
	s.Append(1)
	return nil
}
