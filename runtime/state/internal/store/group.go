package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// GroupSnap is a consistent cut of a group: one snapshot per member, taken
// while no member could be written.
//
//state:snapshot
type GroupSnap struct {
	group *Group // the group it was taken from (its lineages' identity)
	snapCut
	// inline holds snaps for a group of up to two members, and mem the
	// snapshots Snapshot takes of them, so that a cut is one allocation.
	inline [2]*Snap
	mem    [2]Snap
}

// newGroupSnap returns a cut of g with room for a snapshot of each
// member, none taken yet.
func newGroupSnap(g *Group) *GroupSnap {
	v := new(GroupSnap)
	v.init(g)
	return v
}

// init makes v, a zero GroupSnap, a cut of g with room for a snapshot of
// each member, none taken yet.
func (v *GroupSnap) init(g *Group) {
	v.group, v.owner, v.typ = g, g.owner, g.victimType
	if len(g.heads) <= len(v.inline) {
		v.snaps = v.inline[:0:len(g.heads)]
	} else {
		v.snaps = make([]*Snap, 0, len(g.heads))
	}
}

var groupIDs atomic.Uint64

// NewGroup returns a group of new heads of owner, one per layout, in that
// order: every member, or none. Members share no prefix: a layout with a
// ShareKey gets a head made by NewHead, whose AdoptPrefix adopts nothing
// (a member that adopted its rows alone would leave the others behind).
//
//state:acquire
func NewGroup(p *Pool, owner Owner, layouts ...*Layout) (*Group, error) {
	if p == nil {
		return nil, fmt.Errorf("state: NewGroup: nil pool: %w", ErrReleased)
	}
	if len(layouts) < 2 {
		return nil, fmt.Errorf("state: NewGroup: %d layouts; a group has at least two members: %w", len(layouts), ErrShape)
	}
	// Each member made is locked until the group holds them all: the
	// pool lists it as a head of its own until then, and an eviction for
	// a later member's blocks, which tries its lock, would otherwise take
	// it alone. Under the locks the members' first versions are one cut
	// too (oneCut), as eviction reads their histories.
	heads := make([]*Head, 0, len(layouts))
	unlock := func() {
		for _, h := range heads {
			h.mu.Unlock()
		}
	}
	for _, l := range layouts {
		h, err := p.NewHead(l, owner)
		if err != nil {
			unlock()
			for _, x := range heads {
				x.release()
			}
			return nil, fmt.Errorf("state: NewGroup: member %d: %w", len(heads), err)
		}
		h.mu.Lock()
		heads = append(heads, h)
	}
	oneCut(heads)
	g := couple(p, owner, heads)
	unlock()
	return g, nil
}

// oneCut gives the members' last history entries, versions a group call
// made of every member at once (their first, an adoption), one commit
// order: At takes each other member's last entry that is no later than
// the first member's, and entries numbered one by one, as the members
// committed in turn, would put the first member's before the others'.
// The members' locks are held.
func oneCut(heads []*Head) {
	seq := commitSeqs.Add(1)
	for _, h := range heads {
		if h.hist != nil && len(h.hist.entries) > 0 {
			h.hist.entries[len(h.hist.entries)-1].seq = seq
		}
	}
}

// NewSharedGroup is NewGroup in a sharing domain: it registers the
// members' states at the shared member's block boundaries and adopts
// registered ones (Group.AdoptPrefix). A group of the empty domain, or
// without a member whose layout has a ShareKey, shares nothing.
//
//state:acquire
func NewSharedGroup(p *Pool, owner Owner, domain Domain, layouts ...*Layout) (*Group, error) {
	g, err := NewGroup(p, owner, layouts...)
	if err != nil {
		return nil, err
	}
	if domain != "" && g.shared >= 0 {
		g.domain = domain
		g.key = groupKeyOf(g.heads, layouts, domain)
		g.heads[g.shared].gshare = &groupShare{} // registrations of kernel-written rows
		g.heads[g.shared].parts.set(g.heads[g.shared])
	}
	return g, nil
}

// couple makes a group of heads no group holds.
func couple(p *Pool, owner Owner, heads []*Head) *Group {
	g := &Group{id: groupIDs.Add(1), pool: p, owner: owner, heads: heads, order: byID(heads), shared: -1}
	g.gate = gateOf(g.id)
	types := make([]string, len(heads))
	for i, h := range heads {
		types[i] = h.l.Type
	}
	g.victimType = "group of " + strings.Join(types, ", ")
	for i, h := range heads {
		if h.l.ShareKey != "" {
			g.shared = i
			break
		}
	}
	for _, h := range heads {
		h.group.Store(g)
	}
	return g
}

// Head returns member i, in the order the group was made with: the head
// itself, coupled (its Rollback, Merge and Release answer ErrCoupled).
// It returns nil for an i out of range.
func (g *Group) Head(i int) *Head {
	if g == nil || i < 0 || i >= len(g.heads) {
		return nil
	}
	return g.heads[i]
}

// Owner returns the members' owner; "" for a nil group.
func (g *Group) Owner() Owner {
	if g == nil {
		return ""
	}
	return g.owner
}

// live answers ErrReleased for a nil or released group: a call checks it
// before its arguments, so that a released group answers ErrReleased
// whatever it is passed. begin checks it again, under the locks.
func (g *Group) live(op string) error {
	if g == nil {
		return fmt.Errorf("state: group.%s: nil group: %w", op, ErrReleased)
	}
	g.mu.Lock()
	released := g.released
	g.mu.Unlock()
	if released {
		return groupErrorf(op, "%w", ErrReleased)
	}
	return nil
}

// begin starts a group call: the mu of g and of child, if any, held (in
// id order), the pool open, every head of heads (sorted by id, each once:
// g.byID, or byID of several groups' heads) locked in that order and
// prepared as a call of its own would be. A nil error is followed by end
// with the same arguments.
func (g *Group) begin(op string, heads []*Head, child *Group) error {
	if g == nil {
		return fmt.Errorf("state: group.%s: nil group: %w", op, ErrReleased)
	}
	first, second := g, child
	if child != nil && child.id < g.id {
		first, second = child, g
	}
	first.mu.Lock()
	if second != nil && second != first {
		second.mu.Lock()
	}
	if g.released || child != nil && child.released {
		g.unlockGroups(child)
		return groupErrorf(op, "%w", ErrReleased)
	}
	if err := g.pool.enterAt(g.gate); err != nil {
		g.unlockGroups(child)
		return groupErrorf(op, "%w", err)
	}
	locked := 0
	defer func() {
		// Unless every member is prepared, the call ends here: a
		// preparation failed, or a step function that a member's
		// rebuild replayed ended the goroutine (runtime.Goexit).
		if locked >= 0 {
			g.end(heads[:locked], child)
		}
	}()
	for _, h := range heads {
		h.mu.Lock()
		locked++
		if err := h.prepareLocked(call{op: op, land: true, share: true}); err != nil {
			return err
		}
	}
	locked = -1 // the call's: end releases it all
	return nil
}

// end ends a call begun by begin.
func (g *Group) end(heads []*Head, child *Group) {
	for i := len(heads) - 1; i >= 0; i-- {
		heads[i].mu.Unlock()
	}
	g.pool.leaveAt(g.gate)
	g.unlockGroups(child)
}

func (g *Group) unlockGroups(child *Group) {
	if child != nil && child != g {
		child.mu.Unlock()
	}
	g.mu.Unlock()
}

// byID returns heads sorted by id, each once: the order their locks are
// taken in.
func byID(heads []*Head) []*Head { return sortByID(slices.Clone(heads)) }

// sortByID is byID in heads' own memory.
func sortByID(heads []*Head) []*Head {
	slices.SortFunc(heads, func(a, b *Head) int { return cmpID(a.id, b.id) })
	return slices.Compact(heads)
}

// SnapshotInto makes in cut a consistent cut of the members: one snapshot
// each, taken while every member's lock is held, so that no member write
// falls between them. A member that cannot be snapshotted (invalidated,
// evicted for good) fails the call, and the snapshots already taken are
// released. cut is memory the caller holds (a generated cut handle holds
// its store cut, so that the two are one allocation): a zero GroupSnap
// that no call used before.
func (g *Group) SnapshotInto(cut *GroupSnap) error {
	if g == nil {
		return g.begin("Snapshot", nil, nil)
	}
	if err := g.begin("Snapshot", g.order, nil); err != nil {
		return err
	}
	cut.init(g)
	for _, h := range g.heads {
		var s *Snap
		if i := len(cut.snaps); i < len(cut.mem) {
			s = &cut.mem[i]
		} else {
			s = new(Snap)
		}
		s.cut = &cut.snapCut
		if err := h.snapshotLocked(s); err != nil {
			g.end(g.order, nil) // the snapshots taken are released outside the call
			for _, s := range cut.snaps {
				s.Release()
			}
			cut.snaps = nil
			return groupErrorf("Snapshot", "member %s: %w", h.l.Type, err)
		}
		cut.snaps = append(cut.snaps, s)
	}
	cut.whole.Store(true)
	g.end(g.order, nil)
	return nil
}

// Branch returns a new group whose members are branches of g's members,
// taken as one consistent cut; the branches are coupled in the new group.
// A failure part-way releases the branches already taken.
//
//state:acquire
func (g *Group) Branch() (*Group, error) {
	if g == nil {
		return nil, g.begin("Branch", nil, nil)
	}
	if err := g.begin("Branch", g.order, nil); err != nil {
		return nil, err
	}
	heads := make([]*Head, 0, len(g.heads))
	for _, h := range g.heads {
		c := new(Head)
		if err := h.branchLocked(c); err != nil {
			g.end(g.order, nil) // the branches taken are released outside the call
			for _, x := range heads {
				x.release()
			}
			return nil, groupErrorf("Branch", "member %s: %w", h.l.Type, err)
		}
		heads = append(heads, c)
	}
	tip := g.tip
	g.end(g.order, nil)
	b := couple(g.pool, g.owner, heads)
	b.domain, b.key, b.tip = g.domain, g.key, tip // a branch registers in its parent's table
	if b.domain != "" {
		b.heads[b.shared].gshare = &groupShare{}
		b.heads[b.shared].parts.set(b.heads[b.shared])
	}
	return b, nil
}

// Stats returns the members' logical and physical bytes, history bytes
// and checkpoints, summed; Version and Rows, which do not add up across
// members, are left zero (each member's Stats has its own).
func (g *Group) Stats() Stats {
	var st Stats
	if g == nil {
		return st
	}
	for _, h := range g.heads {
		m := h.Stats()
		st.LogicalBytes += m.LogicalBytes
		st.PhysicalBytes += m.PhysicalBytes
		st.HistoryBytes += m.HistoryBytes
		st.Checkpoints += m.Checkpoints
	}
	return st
}

// Release releases every member. Releasing twice does nothing; every other
// call on a released group returns ErrReleased. Snapshots taken from the
// group or its members stay readable.
//
//state:release
func (g *Group) Release() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return nil
	}
	g.released = true
	var errs []error
	for _, h := range g.heads {
		h.group.Store(nil)
		errs = append(errs, h.release())
	}
	return errors.Join(errs...)
}

// Rollback moves every member back to its snapshot in to, a cut of this
// group (or of a group it descends from by Branch, sharing its
// lineages), or none of them: every member is checked first (the
// snapshot's owner, ancestry, release, invalidation and eviction, as
// Head.Rollback checks them), with every member's lock and every
// lineage's lock held, and only then are all moved. A target that any
// member has invalidated answers ErrInvalidated, and no member moves. Each
// member applies its own descendants rule.
//
//state:mutates
func (g *Group) Rollback(to *GroupSnap) error {
	if err := g.live("Rollback"); err != nil {
		return err
	}
	if to == nil || len(to.snaps) != len(g.heads) {
		return groupErrorf("Rollback", "the snapshot is no cut of this group's members: %w", ErrNotAncestor)
	}
	m := move{heads: g.heads, to: to.snaps, group: true}
	if err := m.args(); err != nil {
		return err
	}
	if err := g.begin("Rollback", g.order, nil); err != nil {
		return err
	}
	defer g.end(g.order, nil)
	return m.run()
}

// Merge fast-forwards every member to the matching member of child, a
// group branched from g (or from a group of the same lineages), or none of
// them: every pair is checked first (owner, lineage, release,
// invalidation, eviction, divergence, as Head.Merge checks them), with
// every member's lock and every lineage's lock held, and only then are
// all moved. The child stays live and unchanged.
//
//state:mutates
func (g *Group) Merge(child *Group) error {
	if err := g.live("Merge"); err != nil {
		return err
	}
	if child == nil || len(child.heads) != len(g.heads) {
		return groupErrorf("Merge", "the child is no branch of this group: %w", ErrDiverged)
	}
	m := move{heads: g.heads, child: child.heads, group: true}
	if err := m.args(); err != nil {
		return err
	}
	if child == g {
		err := g.begin("Merge", g.order, nil)
		if err == nil {
			g.end(g.order, nil)
		}
		return err
	}
	var buf [8]*Head // a group of up to four members, on the stack
	heads := sortByID(append(append(buf[:0], g.heads...), child.heads...))
	if err := g.begin("Merge", heads, child); err != nil {
		return err
	}
	defer g.end(heads, child)
	return m.run()
}

// Snap returns member i's snapshot; nil for an i out of range. It belongs
// to the cut: release the cut, not the member's snapshot.
func (v *GroupSnap) Snap(i int) *Snap {
	if v == nil || i < 0 || i >= len(v.snaps) {
		return nil
	}
	return v.snaps[i]
}

// Release releases every member's snapshot. Releasing twice does nothing.
//
//state:release
func (v *GroupSnap) Release() error {
	if v == nil {
		return nil
	}
	var first error
	for _, s := range v.snaps {
		if err := s.Release(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
