package ignore

import "res"

// Ignored is silenced by an ignore on the line above the finding.
func ignored() int {
	s := res.Open()
	s.Release()
	//statevet:ignore streleased reason="Len of a released State is 0, which the caller expects"
	return s.Len()
}

// SameLine is silenced on the finding's own line.
func sameLine() int {
	s := res.Open()
	s.Release()
	return s.Len() //statevet:ignore streleased reason="Len of a released State is 0"
}

// NoReason is not silenced: an ignore needs a reason.
func noReason() int {
	s := res.Open()
	s.Release()
	//statevet:ignore streleased // want `//statevet:ignore streleased has no reason, so it silences nothing`
	return s.Len() // want `State s is used after Release released it`
}

// Unused has no streleased finding: its ignore silences nothing.
func unused() int {
	s := res.Open()
	defer s.Release()
	//statevet:ignore streleased reason="left over" // want `//statevet:ignore streleased silences nothing: no streleased finding on this line or the next`
	return s.Len()
}

// Other names another analyzer, which streleased neither honours nor checks.
func other() int {
	s := res.Open()
	s.Release()
	//statevet:ignore stcleanup reason="another analyzer's business"
	return s.Len() // want `State s is used after Release released it`
}
