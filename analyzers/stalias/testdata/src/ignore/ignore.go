package ignore

import "res"

func snap(s *res.State) (*res.Snap, bool) {
	v, err := s.Snapshot()
	return v, err == nil
}

// Ignored writes are silenced by an ignore on the line above or on the
// finding's own line.
func ignored(s *res.State) {
	v, ok := snap(s)
	if !ok {
		return
	}
	defer v.Release()
	rows := v.Rows()
	//statevet:ignore stalias reason="the rows are scratch this test owns"
	rows[0] = 1
	rows[1] = 2 //statevet:ignore stalias reason="same scratch"
}

// NoReason is not silenced: an ignore needs a reason.
func noReason(s *res.State) {
	v, ok := snap(s)
	if !ok {
		return
	}
	defer v.Release()
	rows := v.Rows()
	//statevet:ignore stalias // want `//statevet:ignore stalias has no reason, so it silences nothing`
	rows[0] = 1 // want `write through a view of snapshot Snap`
}

// Unused has no stalias finding: its ignore silences nothing.
func unused(s *res.State) int {
	v, ok := snap(s)
	if !ok {
		return 0
	}
	defer v.Release()
	rows := v.Rows()
	//statevet:ignore stalias reason="left over" // want `//statevet:ignore stalias silences nothing: no stalias finding on this line or the next`
	return rows[0]
}

// Other names another analyzer, which stalias neither honours nor checks.
func other(s *res.State) {
	v, ok := snap(s)
	if !ok {
		return
	}
	defer v.Release()
	rows := v.Rows()
	//statevet:ignore streleased reason="another analyzer's business"
	rows[0] = 1 // want `write through a view of snapshot Snap`
}
