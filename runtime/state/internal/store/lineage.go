package store

import (
	"sync/atomic"
)

var lineageIDs atomic.Uint64

// newLineage returns a lineage for owner, whose first segment is its own
// root.
func newLineage(owner Owner) *lineage {
	l := &lineage{id: lineageIDs.Add(1), owner: owner}
	l.heads.link, l.snaps.link = headLink, snapLink
	return l
}

// Segment chunks: a lineage carves its segments from chunks of its own,
// each twice the last, from minSegments to maxSegments, so that a beam
// search's branches allocate once every few dozen first writes. A chunk
// holds one lineage's segments alone: a dead segment in it keeps only its
// own lineage's ancestry from the garbage collector, never another's.
const (
	minSegments = 4
	maxSegments = 64
)

// newSegment returns a segment of l that starts after version fork of
// parent. l.mu is held.
func (l *lineage) newSegment(parent *segment, fork Version) *segment {
	if len(l.spare) == 0 {
		l.chunk = min(max(2*l.chunk, minSegments), maxSegments)
		l.spare = make([]segment, l.chunk)
	}
	s := &l.spare[0]
	l.spare = l.spare[1:]
	*s = segment{parent: parent, fork: fork, depth: parent.depth + 1, jump: parent}
	if j := parent.up(); j != parent {
		if jj := j.up(); parent.depth-j.depth == j.depth-jj.depth {
			s.jump = jj
		}
	}
	return s
}

// capture returns p for a new holder of it (a snapshot, a branch, a
// snapshot At makes, a head merged to it), raising its segment's held to
// p.v: the one place a position is copied to a holder other than the
// head that writes it. A holder's ancestry on the segments above its own
// lies at or before their forks, and a segment forks at a version some
// holder took (a head writes off its own segment at a captured position,
// or before its held). The lineage's lock is held.
func capture(p position) position {
	if p.seg.held < p.v {
		p.seg.held = p.v
	}
	return p
}

// pin is capture for a holder that no rollback invalidates (a shared
// group's registered state): it raises p's segment's pinned as well.
// The lineage's lock is held.
func pin(p position) position {
	if p.seg.pinned < p.v {
		p.seg.pinned = p.v
	}
	return capture(p)
}

// writable reports whether a head at p whose own segment is mine may
// write its next version on p's segment: it is mine, and no holder took a
// version of it past p.v, so that the versions after p.v there, which a
// rollback abandoned, are no one's ancestry, and the next version, larger
// than every one, follows p.v on the line. At the tip of its own segment
// a head always may. The lineage's lock is held.
func writable(p position, mine *segment) bool {
	return p.seg == mine && p.seg.held <= p.v
}

// up returns s's jump, s itself at the root.
func (s *segment) up() *segment {
	if s.jump == nil {
		return s
	}
	return s.jump
}

// ancestorAt returns the ancestor of s at depth d <= s.depth, and adds the
// segments it passed to *steps.
func (s *segment) ancestorAt(d int, steps *int) *segment {
	for s.depth > d {
		if j := s.up(); j.depth >= d {
			s = j
		} else {
			s = s.parent
		}
		*steps++
	}
	return s
}

// isAncestor reports whether a is b or an ancestor of b, in O(log depth).
func isAncestor(a, b position) bool {
	var steps int
	return isAncestorCounted(a, b, &steps)
}

func isAncestorCounted(a, b position, steps *int) bool {
	switch {
	case b.seg.depth < a.seg.depth:
		return false
	case b.seg == a.seg:
		return a.v <= b.v
	case b.seg.depth == a.seg.depth:
		return false
	}
	c := b.seg.ancestorAt(a.seg.depth+1, steps)
	return c.parent == a.seg && a.v <= c.fork
}

// firstAbandoned returns the first version on from's ancestry after to,
// which must be an ancestor of from, as a position every abandoned
// version descends from; false when from is to. It walks the abandoned
// segments only.
//
// The versions a rollback from from to to abandons form a line, so a
// handle meets them exactly when its ancestry holds the first of them: it
// is a descendant of that position (isAncestor). In to's own segment the
// first is to.v+1 (a number between two of its versions is as good as the
// next one for isAncestor); in a later segment, that segment's start.
func firstAbandoned(from, to position) (position, bool) {
	s, hi := from.seg, from.v
	for s != to.seg {
		if s.parent == to.seg && s.fork == to.v {
			return position{seg: s, v: 0}, true
		}
		s, hi = s.parent, s.fork
	}
	if hi > to.v {
		return position{seg: s, v: to.v + 1}, true
	}
	return position{}, false
}

// invalidate marks every handle of the lineage but h whose ancestry holds
// a version after to on h's line (h's position). Its cost is the abandoned
// segments plus O(log depth) per live handle, however many rollbacks the
// line has seen. l.mu is held.
//
// When to lies on h's own segment, no handle left valid holds a version
// of it after to (those on h's line are marked; h wrote every other
// version there, and h's earlier rollbacks marked those it left), so the
// segment's held comes back down to to.v and h's next write goes on in
// it (writable): the versions it skips are ancestry of marked handles
// alone, which no call asks about.
//
// It adds the snapshots it marks to w and returns how many other heads it
// marked: a rollback that writes over their rows next (lowerTails) waits
// out the snapshots' readers first (snapWaits), and writes over no head's.
func (l *lineage) invalidate(h *Head, to position, w *snapWaits) (heads int) {
	if to.seg == h.mine {
		to.seg.held = to.v
	}
	first, ok := firstAbandoned(h.pos, to)
	if !ok {
		return 0
	}
	for x := l.heads.first; x != nil; x = x.inLine.next {
		if x != h && isAncestorCounted(first, x.pos, &l.steps) {
			x.invalid.Store(true)
			heads++
		}
	}
	for s := l.snaps.first; s != nil; s = s.inLine.next {
		if isAncestorCounted(first, s.pos, &l.steps) {
			s.invalid.Store(true)
			w.add(s)
		}
	}
	return heads
}

// next returns a new version of the lineage. l.mu is held.
func (l *lineage) next() Version {
	l.last++
	return l.last
}

// snapWaits are snapshots a rollback invalidated whose rows in a tail
// block a head writes over next, in place (lowerTails), and the heads
// whose tails wait for them. A read of one that began before the rollback
// marked it holds the snapshot's read lock (Snap.begin), and may record
// its stream on the blocks (ReadAsync, RecordStream) for work that runs
// later: so run takes each snapshot's lock once, after the lineages'
// locks (the order Snap.Release takes them in), and only then lowers those
// heads' tails, where no stream was recorded meanwhile; the heads' locks
// keep them from writing until the rollback returns. They are few (a
// decoder's drafts): a rollback that would wait for more than
// maxSnapWaits snapshots lowers nothing, and the head copies its tail
// block on its next append as before.
type snapWaits struct {
	n    int
	over bool
	s    [maxSnapWaits]*Snap
	// heads are the heads whose tails wait, each with its root before the
	// move (one reference, which run gives up); nh counts them.
	nh    int
	heads [maxSnapWaits]lateTail
}

// lateTail is a head whose tail run lowers after the waits, and its root
// before the move.
type lateTail struct {
	h   *Head
	old *root
}

const maxSnapWaits = 8

// add adds s, or marks w over when it is full.
func (w *snapWaits) add(s *Snap) {
	if w.n == len(w.s) {
		w.over = true
		return
	}
	w.s[w.n] = s
	w.n++
}
