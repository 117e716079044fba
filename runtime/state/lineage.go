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
}

type segment struct {
	parent *segment
	fork   Version // the version of parent this segment starts after
	depth  int
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

// isAncestor reports whether a is b or an ancestor of b.
func isAncestor(a, b position) bool {
	s, limit := b.seg, b.v
	for s != nil && s.depth >= a.seg.depth {
		if s == a.seg {
			return a.v <= limit
		}
		s, limit = s.parent, s.fork
	}
	return false
}

// abandoned describes the versions of a line that a rollback leaves: per
// segment, the versions in (lo, hi]; all says lo is below every version.
type abandoned map[*segment]struct {
	lo, hi Version
	all    bool
}

// abandonedBetween returns the versions on from's ancestry after to, which
// must be an ancestor of from.
func abandonedBetween(from, to position) abandoned {
	out := make(abandoned)
	s, hi := from.seg, from.v
	for s != nil {
		if s == to.seg {
			if hi > to.v {
				out[s] = struct {
					lo, hi Version
					all    bool
				}{to.v, hi, false}
			}
			break
		}
		out[s] = struct {
			lo, hi Version
			all    bool
		}{0, hi, true}
		s, hi = s.parent, s.fork
	}
	return out
}

// meets reports whether p's ancestry holds a version of a. Limits along a
// position's ancestry are always versions of their segment, so the
// smaller of two limits in one segment is a version both lines hold.
func (a abandoned) meets(p position) bool {
	s, limit := p.seg, p.v
	for s != nil {
		if r, ok := a[s]; ok && (r.all || min(r.hi, limit) > r.lo) {
			return true
		}
		s, limit = s.parent, s.fork
	}
	return false
}

// next returns a new version of the lineage. l.mu is held.
func (l *lineage) next() Version {
	l.last++
	return l.last
}
