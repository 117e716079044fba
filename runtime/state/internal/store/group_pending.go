package store

import "slices"

// Registrations of rows a kernel writes. A group registers its members'
// states when an append of its shared member ends at a block boundary
// (group_share.go); rows an AppendDevice or AppendAsync appends are
// written after the call, so the group takes the cut then (cut: every
// member's root, one reference each) and registers it once the rows are
// written: the shared member's groupShare keeps it pending. A pending
// registration is armed when the kernels writing its rows are queued: at
// once for AppendAsync, whose copies the call queued; for AppendDevice at
// the next call on the shared member, or at its RecordStream, as a single
// head's blocks are (docs/INTERNALS.md, "Stream order"). Armed, it waits
// for events recorded then on the member's recorded streams (none: the
// caller wrote the rows before its next call), polled at every call on
// the member and by every AdoptPrefix of a group of the same key, so that
// a writer that goes idle after its prefill is adopted from all the same.

// AdoptPrefix gives the members of a group whose shared member is empty
// the states registered at the longest prefix of keys (the key column's
// values of the shared member, as bytes) that a group of the same layouts
// and domain registered, each as a new version, and returns the rows of
// the shared member adopted: a multiple of its block's rows. The caller
// computes only the rest. A group whose shared member has rows answers
// ErrRange; one of the empty domain, or made by NewGroup, adopts nothing.
// Every member moves, or none.
//
//state:appends
func (g *Group) AdoptPrefix(keys []byte) (int, error) {
	if g == nil {
		return 0, g.begin("AdoptPrefix", nil, nil)
	}
	if err := g.begin("AdoptPrefix", g.order, nil); err != nil {
		return 0, err
	}
	defer g.end(g.order, nil)
	if g.shared < 0 {
		return 0, groupErrorf("AdoptPrefix", "no member's layout has a ShareKey: %w", ErrShape)
	}
	h := g.heads[g.shared]
	ks := h.l.Columns[h.l.shareColumn()].ElemSize
	if len(keys)%ks != 0 {
		return 0, groupErrorf("AdoptPrefix", "%d bytes of keys, not a multiple of the key's %d bytes: %w", len(keys), ks, ErrShape)
	}
	if h.r.rows != 0 {
		return 0, groupErrorf("AdoptPrefix", "member %s has %d rows; a prefix is adopted by an empty group: %w", h.l.Type, h.r.rows, ErrRange)
	}
	if g.domain == "" {
		return 0, nil
	}
	g.pool.groups.pollWaiting(g)
	e, roots := g.pool.groups.lookup(g, keys, h.perBlock[0]*ks)
	if e == nil {
		g.pool.adopted(0)
		return 0, nil
	}
	g.pool.adopted(e.rows)
	for i, m := range g.heads {
		var freed []*block
		m.r.release(&freed)
		m.r = roots[i] // lookup took a reference for each member
		m.commitVersion()
		m.pool.free(freed)
		m.committed(written{to: m.r.rows})
	}
	oneCut(g.heads)
	g.tip = e
	return e.rows, nil
}

// committed registers the group's states when an append of the shared
// member (h) ends at a block boundary: at once for rows from the host
// (appended), and for rows a kernel writes (a device append) by the cut
// taken now, pending until they are written.
func (gs *groupShare) committed(h *Head, w written) {
	g := h.group.Load()
	if g == nil {
		return
	}
	if !w.device {
		if w.host {
			g.appended(h)
		}
		return
	}
	roots, streams := g.cut(h)
	if roots == nil {
		return
	}
	if w.async != nil && !slices.Contains(streams, w.async) {
		// The copies are queued, on a stream the head may not have
		// recorded: events after them, and after the members' work.
		streams = append(streams, w.async)
	}
	gs.hold(h, g, groupPending{roots: roots, streams: streams}, w.async != nil)
}

// hold keeps p pending until its rows are written, armed now when the
// work writing them is queued already.
func (gs *groupShare) hold(h *Head, g *Group, p groupPending, queued bool) {
	if queued {
		gs.arm(h, &p)
	}
	gs.pending = append(gs.pending, p)
	g.pool.groups.wait(g)
}

// prepare arms the pending registrations and registers those whose rows
// are written, as a call on the shared member starts.
func (gs *groupShare) prepare(h *Head, c call) error {
	if c.share && len(gs.pending) > 0 {
		gs.settle(h, true)
	}
	return nil
}

func (gs *groupShare) changed(*Head)       {}
func (gs *groupShare) moved(*Head)         {}
func (gs *groupShare) branched(_, _ *Head) {} // a branch's group has a groupShare of its own

// release drops the pending registrations.
func (gs *groupShare) release(h *Head, freed []*block) []*block {
	for _, p := range gs.pending {
		closeEvents(p.evs)
		for _, r := range p.roots {
			r.release(&freed)
		}
	}
	gs.pending = nil
	if g := h.group.Load(); g != nil {
		g.pool.groups.unwait(g)
	}
	return freed
}

// arm records on h's recorded streams, and on those the cut found, the
// events after which p's rows are written: the kernels writing them are
// queued. With no stream the caller wrote them already. A failed record
// leaves p unarmed.
func (gs *groupShare) arm(h *Head, p *groupPending) {
	streams := slices.Clone(p.streams)
	for _, st := range h.async.streams.get() {
		if !slices.Contains(streams, st) {
			streams = append(streams, st)
		}
	}
	if len(streams) > 0 {
		evs, ok := recordAll(h.pool.b, streams)
		if !ok {
			return
		}
		p.evs = evs
	}
	p.armed = true
}

// settle registers the pending registrations whose rows are written,
// arming the others first when arm says the kernels are queued by now;
// a registration whose stream failed is dropped. h, the shared member, is
// locked.
func (gs *groupShare) settle(h *Head, arm bool) {
	g := h.group.Load()
	keep := gs.pending[:0]
	for _, p := range gs.pending {
		if !p.armed && arm {
			gs.arm(h, &p)
		}
		done, failed := p.armed, false
		for _, ev := range p.evs {
			d, err := ev.Done()
			done, failed = done && d, failed || err != nil
		}
		switch {
		case failed || g == nil:
			closeEvents(p.evs)
			var freed []*block
			for _, r := range p.roots {
				r.release(&freed)
			}
			h.pool.free(freed)
		case done:
			closeEvents(p.evs)
			g.register(h, p.roots)
		default:
			keep = append(keep, p)
		}
	}
	clear(gs.pending[len(keep):])
	gs.pending = keep
	if len(keep) == 0 && g != nil {
		g.pool.groups.unwait(g)
	}
}

// appended follows an Append of h, the group's shared member: when its
// rows end at a block boundary, the group registers every member's state,
// at once, or once the work queued on the members' recorded streams has
// run. h.mu is held.
func (g *Group) appended(h *Head) {
	roots, streams := g.cut(h)
	switch {
	case roots == nil:
	case len(streams) > 0:
		// Work queued on a member's recorded streams may still write
		// its rows: register once it has run.
		h.gshare.hold(h, g, groupPending{roots: roots, streams: streams}, true)
	default:
		g.register(h, roots)
	}
}

// wait lists g among the groups of its key with pending registrations.
func (c *groupCache) wait(g *Group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting == nil {
		c.waiting = make(map[groupKey][]poller)
	}
	if !slices.Contains(c.waiting[g.key], poller(g)) {
		c.waiting[g.key] = append(c.waiting[g.key], g)
	}
}

// unwait is wait's undoing.
func (c *groupCache) unwait(g *Group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := slices.DeleteFunc(c.waiting[g.key], func(x poller) bool { return x == poller(g) })
	if len(l) == 0 {
		delete(c.waiting, g.key)
	} else {
		c.waiting[g.key] = l
	}
}

// pollWaiting registers, for an adoption by g, the armed registrations of
// the other groups of g's key whose rows are written: their shared
// members are taken by try-lock (a busy one registers at its own call).
func (c *groupCache) pollWaiting(g *Group) {
	c.mu.Lock()
	others := slices.Clone(c.waiting[g.key])
	c.mu.Unlock()
	for _, o := range others {
		if o != poller(g) {
			o.poll()
		}
	}
}

// poll registers g's armed registrations whose rows are written, when its
// shared member is free (try-lock: a busy one registers at its own call).
func (g *Group) poll() {
	m := g.heads[g.shared]
	if !m.mu.TryLock() {
		return
	}
	defer m.mu.Unlock()
	if !m.released && m.gshare != nil {
		m.gshare.settle(m, false)
	}
}
