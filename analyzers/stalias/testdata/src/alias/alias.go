// Package alias holds the head aliasing cases: spans go stale at a call on
// any name of the head they came from, and not at a call through a variable
// that names another head by then.
package alias

import "dev"

type server struct {
	cache *dev.KVState
	spare *dev.KVState
}

// drop releases h.
func drop(h *dev.KVState) { h.Release() }

// ---- a call through another name of the head ----

func aliasAfter(h *dev.KVState, rows dev.KV) {
	sp, err := h.AppendDevice(4)
	if err != nil {
		return
	}
	g := h
	g.Append(rows)
	dev.Scale(sp.Keys, 2) // want `write through the spans AppendDevice of KVState returned after a later call on the state \(Append\)`
}

func aliasBefore(h *dev.KVState) {
	g := h
	sp, err := g.WriteDevice(0, 4)
	if err != nil {
		return
	}
	v, err := h.Snapshot()
	if err != nil {
		return
	}
	defer v.Release()
	dev.Scale(sp.Values, 2) // want `after a later call on the state \(Snapshot\)`
}

func aliasChain(h *dev.KVState, rows dev.KV) {
	var g *dev.KVState = h
	k := g
	sp, err := h.AppendDevice(4)
	if err != nil {
		return
	}
	k.Append(rows)
	dev.Scale(sp.Keys, 2) // want `after a later call on the state \(Append\)`
}

func releasedByHelper(h *dev.KVState) {
	g := h
	sp, err := h.AppendDevice(4)
	if err != nil {
		return
	}
	drop(g)
	dev.Scale(sp.Keys, 2) // want `after a later call on the state \(drop\)`
}

func fieldCopy(s *server, rows dev.KV) {
	x := s.cache
	sp, err := s.cache.AppendDevice(4)
	if err != nil {
		return
	}
	x.Append(rows)
	dev.Scale(sp.Keys, 2) // want `after a later call on the state \(Append\)`
}

func fieldCopyBack(s *server) {
	x := s.cache
	sp, err := x.AppendDevice(4)
	if err != nil {
		return
	}
	b, err := s.cache.Branch()
	if err != nil {
		return
	}
	defer b.Release()
	dev.Scale(sp.Keys, 2) // want `after a later call on the state \(Branch\)`
}

func structCopy(srv server, rows dev.KV) {
	other := srv
	p := &other
	sp, err := srv.cache.AppendDevice(4)
	if err != nil {
		return
	}
	p.cache.Append(rows)
	dev.Scale(sp.Keys, 2) // want `after a later call on the state \(Append\)`
}

func reassignedOnOnePath(a, b *dev.KVState, rows dev.KV, other bool) {
	sp, err := a.AppendDevice(4)
	if err != nil {
		return
	}
	if other {
		a = b
	}
	a.Append(rows)        // on the head sp came from, when other is false
	dev.Scale(sp.Keys, 2) // want `after a later call on the state \(Append\)`
}

func aliasInLoop(h *dev.KVState, rows dev.KV, n int) {
	sp, err := h.AppendDevice(4)
	if err != nil {
		return
	}
	g := h
	for i := 0; i < n; i++ {
		dev.Scale(sp.Keys, 2) // want `after a later call on the state \(Append\)`
		g.Append(rows)
	}
}

func aliasInLiteral(h *dev.KVState, rows dev.KV) {
	g := h
	sp, err := h.AppendDevice(4)
	if err != nil {
		return
	}
	func() {
		g.Append(rows)
		dev.Scale(sp.Keys, 2) // want `after a later call on the state \(Append\)`
	}()
}

func swapped(a, b *dev.KVState, rows dev.KV) {
	sp, err := a.AppendDevice(4)
	if err != nil {
		return
	}
	a, b = b, a
	b.Append(rows)        // b is the head sp came from now
	dev.Scale(sp.Keys, 2) // want `after a later call on the state \(Append\)`
}

func appended(hs []*dev.KVState, extra *dev.KVState, rows dev.KV) {
	sp, err := hs[0].AppendDevice(4)
	if err != nil {
		return
	}
	hs = append(hs, extra) // the same heads, one more
	hs[0].Append(rows)
	dev.Scale(sp.Keys, 2) // want `after a later call on the state \(Append\)`
}

// ---- no findings: the variable names another head by then ----

func reassigned(a, b *dev.KVState, rows dev.KV) error {
	sp, err := a.AppendDevice(4)
	if err != nil {
		return err
	}
	a = b
	a.Append(rows) // a call on b: sp stays the caller's
	return dev.Scale(sp.Keys, 2)
}

func reassignedOnBothPaths(a, b, c *dev.KVState, rows dev.KV, first bool) error {
	sp, err := a.AppendDevice(4)
	if err != nil {
		return err
	}
	if first {
		a = b
	} else {
		a = c
	}
	a.Append(rows)
	return dev.Scale(sp.Keys, 2)
}

func reassignedFromCall(a, b *dev.KVState, rows dev.KV) error {
	sp, err := a.AppendDevice(4)
	if err != nil {
		return err
	}
	a, err = b.Branch()
	if err != nil {
		return err
	}
	defer a.Release()
	a.Append(rows) // a call on the branch of b
	return dev.Scale(sp.Keys, 2)
}

func reassignedInLoop(a, b *dev.KVState, rows dev.KV, n int) {
	sp, err := a.AppendDevice(4)
	if err != nil {
		return
	}
	for i := 0; i < n; i++ {
		dev.Scale(sp.Keys, 2)
		a = b
		a.Append(rows)
	}
}

func swappedBack(a, b *dev.KVState, rows dev.KV) error {
	sp, err := a.AppendDevice(4)
	if err != nil {
		return err
	}
	a, b = b, a
	a.Append(rows) // a call on what b held
	return dev.Scale(sp.Keys, 2)
}

func aliasDetached(h, other *dev.KVState, rows dev.KV) error {
	g := h
	g = other
	sp, err := h.AppendDevice(4)
	if err != nil {
		return err
	}
	g.Append(rows)
	return dev.Scale(sp.Keys, 2)
}

func fieldCopyDetached(s *server, rows dev.KV) error {
	x := s.cache
	sp, err := x.AppendDevice(4)
	if err != nil {
		return err
	}
	x = s.spare
	x.Append(rows) // a call on the spare head
	return dev.Scale(sp.Keys, 2)
}

func rootReassigned(s, t *server, rows dev.KV) error {
	sp, err := s.cache.AppendDevice(4)
	if err != nil {
		return err
	}
	s = t
	s.cache.Append(rows) // the cache of t
	return dev.Scale(sp.Keys, 2)
}

func otherField(s *server, rows dev.KV) error {
	sp, err := s.cache.AppendDevice(4)
	if err != nil {
		return err
	}
	x := s.spare
	x.Append(rows)
	return dev.Scale(sp.Keys, 2)
}

func replacedSlice(hs, next []*dev.KVState, rows dev.KV) error {
	sp, err := hs[0].AppendDevice(4)
	if err != nil {
		return err
	}
	hs = next
	hs[0].Append(rows) // the first of next
	return dev.Scale(sp.Keys, 2)
}

func rangeHeads(hs []*dev.KVState, rows dev.KV) error {
	for _, h := range hs {
		sp, err := h.AppendDevice(4)
		if err != nil {
			return err
		}
		if err := dev.Scale(sp.Keys, 2); err != nil {
			return err
		}
		h.Append(rows) // sp is not written after this
	}
	return nil
}

// ---- blind spots: a head stored in a field or through a call ----

func storedInField(s *server, h *dev.KVState, rows dev.KV) error {
	sp, err := h.AppendDevice(4)
	if err != nil {
		return err
	}
	s.spare = h
	s.spare.Append(rows) // the same head, not followed into the field
	return dev.Scale(sp.Keys, 2)
}

func same(h *dev.KVState) *dev.KVState { return h }

func throughCall(h *dev.KVState, rows dev.KV) error {
	sp, err := h.AppendDevice(4)
	if err != nil {
		return err
	}
	g := same(h)
	g.Append(rows) // the same head, not followed through the call
	return dev.Scale(sp.Keys, 2)
}

// ---- spans taken only inside a literal ----

func spansInLiteral(v *dev.KVSnapshot, s *dev.KVState, rows dev.KV) {
	vs, err := v.Spans(0, v.Len())
	if err != nil {
		return
	}
	dev.Gather(nil, vs.Keys)
	func() {
		g := s
		sp, err := g.AppendDevice(4)
		if err != nil {
			return
		}
		s.Append(rows)
		dev.Scale(sp.Keys, 2) // want `after a later call on the state \(Append\)`
	}()
}
