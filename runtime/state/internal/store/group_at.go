package store

// A group's past cuts (docs/INTERNALS.md, "Groups"): every member keeps
// its history (a checkpoint line), and every history entry carries the
// order of its commit among all commits (entry.seq). The cut of the
// group at version v of its first member is, for every other member, the
// last version it committed before the first member committed v: the
// group as it was the moment v was made. At rebuilds each member's
// version (a replayed member by running its steps again) and returns the
// cut as a group snapshot, which Rollback takes like any other.

// At returns the group as it was when its first member (member 0, the
// first field of a generated group) made version v: a snapshot of every
// member, each rebuilt by its own At from its checkpoints, deltas or
// replayed steps, taken while every member's lock is held. It needs every
// member to keep a history; a member that does not, or whose history no
// longer holds its version of the cut, answers ErrNotRetained, and no
// snapshot is left taken. Rollback takes the cut.
//
//state:acquire
func (g *Group) At(v Version) (*GroupSnap, error) {
	if err := g.live("At"); err != nil {
		return nil, err
	}
	if err := g.begin("At", g.order, nil); err != nil {
		return nil, err
	}
	cut := newGroupSnap(g)
	ok := false
	defer func() {
		// Deferred, as a step function that a member's replay runs may
		// end the goroutine (runtime.Goexit): the call ends, and a cut
		// not returned gives up the snapshots it took, once the call's
		// locks are released.
		g.end(g.order, nil)
		if !ok {
			for _, s := range cut.snaps {
				s.Release()
			}
		}
	}()
	vs, err := g.cutAt("At", v)
	if err != nil {
		return nil, err
	}
	for i, h := range g.heads {
		s, err := newEstimator(h).at(vs[i], &cut.snapCut)
		if err != nil {
			return nil, groupErrorf("At", "member %s, version %d: %w", h.l.Type, vs[i], err)
		}
		cut.snaps = append(cut.snaps, s)
	}
	ok = true
	cut.whole.Store(true)
	return cut, nil
}

// Plan explains how At(v) would rebuild the group's cut: the members'
// plans summed (deltas, replayed steps, bytes, copies, blocks and the
// estimate; the checkpoint is the first member's). It rebuilds nothing.
func (g *Group) Plan(v Version) (Plan, error) {
	if err := g.live("Plan"); err != nil {
		return Plan{}, err
	}
	if err := g.begin("Plan", g.order, nil); err != nil {
		return Plan{}, err
	}
	defer g.end(g.order, nil)
	vs, err := g.cutAt("Plan", v)
	if err != nil {
		return Plan{}, err
	}
	sum := Plan{Target: v}
	for i, h := range g.heads {
		p, _, err := newEstimator(h).plan("Plan", vs[i])
		if err != nil {
			return Plan{}, groupErrorf("Plan", "member %s, version %d: %w", h.l.Type, vs[i], err)
		}
		if i == 0 {
			sum.Checkpoint = p.Checkpoint
		}
		c := &sum.Candidate
		c.Deltas += p.Deltas
		c.SeedBytes += p.SeedBytes
		c.DeltaBytes += p.DeltaBytes
		c.Copies += p.Copies
		c.Blocks += p.Blocks
		c.NewBytes += p.NewBytes
		c.Steps += p.Steps
		c.Replayed += p.Replayed
		c.Estimate += p.Estimate
		sum.Low += p.Low
		sum.High += p.High
		sum.Unmeasured = sum.Unmeasured || p.Unmeasured
	}
	return sum, nil
}

// cutAt returns every member's version of the cut at version v of member
// 0: v, then for each other member the version of the last entry of its
// history committed before v was (or with it: NewGroup makes the members'
// first versions at once). The members' calls are begun.
func (g *Group) cutAt(op string, v Version) ([]Version, error) {
	for _, h := range g.heads {
		if h.hist == nil {
			return nil, groupErrorf(op, "member %s keeps no checkpoints: %w", h.l.Type, ErrNotRetained)
		}
	}
	first := g.heads[0]
	t := first.hist.find(v)
	if t < 0 || first.hist.entries[t].seq == 0 {
		return nil, groupErrorf(op, "version %d is not in the retained history of member %s: %w", v, first.l.Type, ErrNotRetained)
	}
	seq := first.hist.entries[t].seq
	vs := []Version{v}
	for _, h := range g.heads[1:] {
		es := h.hist.entries
		k := len(es) - 1
		for k >= 0 && es[k].seq > seq { // equal: the group's first cut, made at once
			k--
		}
		if k < 0 || es[k].seq == 0 {
			return nil, groupErrorf(op, "member %s no longer holds its version at member %s's version %d: %w", h.l.Type, first.l.Type, v, ErrNotRetained)
		}
		vs = append(vs, es[k].pos.v)
	}
	return vs, nil
}
