package state

import (
	"sync"
	"sync/atomic"
)

// A lineage is a head created by Pool.NewHead together with every branch,
// snapshot and merge that descends from it. Its versions form a tree; the
// lineage numbers them, so that every new version is larger than every
// version the lineage has seen.
//
// The version tree is kept in segments: a segment is a line of versions
// written one after another by one head. A new segment starts where a head
// writes after a branch, a merge or a rollback; it records its parent
// segment and the version it forked from. A position (segment, version)
// names a version, and the ancestry of a position is its own segment up to
// its version, then the parent segment up to the fork version, and so on.
// Memory therefore grows with the branches, merges and rollbacks on a line,
// not with its writes.
type lineage struct {
	id    uint64 // orders the locks of lineages a group call holds at once (group.go)
	mu    sync.Mutex
	owner Owner
	last  Version
	heads map[*Head]struct{}
	snaps map[*Snap]struct{}
	// steps counts the segments invalidate passed, for tests that count
	// work.
	steps int
}

type segment struct {
	parent *segment
	fork   Version // the version of parent this segment starts after
	depth  int
	// jump is an ancestor (skew-binary jump pointers, as in Myers'
	// random-access lists): following jump or parent, whichever does not
	// pass the depth sought, finds any ancestor in O(log depth) steps;
	// nil at the root.
	jump *segment
}

type position struct {
	seg *segment
	v   Version
}

var lineageIDs atomic.Uint64

func newLineage(owner Owner) *lineage {
	return &lineage{
		id:    lineageIDs.Add(1),
		owner: owner,
		heads: make(map[*Head]struct{}),
		snaps: make(map[*Snap]struct{}),
	}
}

// newSegment returns a segment that starts after version fork of parent.
func newSegment(parent *segment, fork Version) *segment {
	s := &segment{parent: parent, fork: fork, depth: parent.depth + 1, jump: parent}
	if j := parent.up(); j != parent {
		if jj := j.up(); parent.depth-j.depth == j.depth-jj.depth {
			s.jump = jj
		}
	}
	return s
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
func (l *lineage) invalidate(h *Head, to position) {
	first, ok := firstAbandoned(h.pos, to)
	if !ok {
		return
	}
	for x := range l.heads {
		if x != h && isAncestorCounted(first, x.pos, &l.steps) {
			x.invalid.Store(true)
		}
	}
	for s := range l.snaps {
		if isAncestorCounted(first, s.pos, &l.steps) {
			s.invalid.Store(true)
		}
	}
}

// next returns a new version of the lineage. l.mu is held.
func (l *lineage) next() Version {
	l.last++
	return l.last
}
