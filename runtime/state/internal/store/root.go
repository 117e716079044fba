package store

import (
	"slices"
	"sync"

	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// A root is a version: its rows and, per column, its tree (tree.go). Roots
// are counted references, released and kept for reuse as the nodes are.

// newRoot returns a root of ncols empty columns, held once: one a release
// kept (roots) where there is one, else a new one.
func newRoot(ncols int) *root {
	r, _ := roots.Get().(*root)
	if r == nil {
		r = &root{}
	}
	switch {
	case ncols <= rootInline:
		r.cols = r.inline[:ncols:ncols]
	case cap(r.cols) >= ncols && &r.cols[:1][0] != &r.inline[0]:
		r.cols = r.cols[:ncols]
	default:
		r.cols = make([]tree, ncols)
	}
	r.rc.Store(1)
	return r
}

// roots keeps the roots whose last reference went (root.release), for
// newRoot: a write after a snapshot makes a root, and the snapshot's
// release gives one back, so a decode loop that snapshots its drafts makes
// none in steady state. Nothing reaches a root but through a counted
// reference (a handle's r is nil once it released its own), the rule that
// makes the nodes' reuse safe too.
var roots sync.Pool

// keep empties r, whose last reference went, and keeps it for newRoot,
// with its columns' own allocation when they have one.
func (r *root) keep() {
	clear(r.cols)
	if len(r.cols) > 0 && &r.cols[0] == &r.inline[0] {
		r.cols = nil
	} else {
		r.cols = r.cols[:0]
	}
	r.rows = 0
	roots.Put(r)
}

// release drops one reference to r; the last one releases its trees and
// appends the blocks left without references to freed.
//
// Free lists give blocks back in the order they were freed, so the order
// of the freed list is the layout of the next state made in their place.
// A state written a row at a time has the blocks of a row side by side;
// its blocks are appended row by row (the first block of each column, then
// the second of each, ...), so that the next one gets each row's blocks of
// every column from where one row's were, rather than from as many slabs as
// it has columns. A state written in bulk, whose columns lie in runs, keeps
// column order, which gives the runs back.
func (r *root) release(freed *[]*block) {
	if r.rc.Add(-1) != 0 {
		return
	}
	// Room for every block up front: a large state's list would otherwise
	// grow by doubling, copying itself over again (a tenth of a bulk
	// append loop's time, which releases 200,000 blocks every 64 rounds).
	// Not for a root whose subtrees others share (a snapshot or checkpoint
	// of a head that wrote since frees a path's worth): room for all its
	// blocks made each such release cost the state's length.
	total := 0
	for _, t := range r.cols {
		if t.root != nil && unshared(t.root, t.height) {
			total += t.n - t.lo
		}
	}
	*freed = slices.Grow(*freed, total)
	var cuts [maxRowCols + 1]int
	cuts[0] = len(*freed)
	for c, t := range r.cols {
		if t.root != nil {
			releaseNode(t.root, freed)
		}
		if c+1 < len(cuts) {
			cuts[c+1] = len(*freed)
		}
	}
	if n := len(r.cols); n > 1 && n <= maxRowCols && classShared(*freed, cuts[:n+1]) && !inRuns(*freed, cuts[0]) {
		byRow(freed, cuts[:n+1])
	}
	r.keep()
}

// own returns r itself when its holder holds it alone, else a copy (taking
// references to the trees' roots) that the holder holds alone, giving up
// the holder's reference to r.
func (r *root) own(freed *[]*block) *root {
	if r.unique() {
		return r
	}
	c := newRoot(len(r.cols))
	c.rows = r.rows
	copy(c.cols, r.cols)
	for _, t := range c.cols {
		if t.root != nil {
			t.root.rc.Add(1)
		}
	}
	r.release(freed)
	return c
}

// inRuns reports whether the first column's first two freed blocks (from
// list[from] on) follow one another: a state written in bulk, whose blocks
// of each column lie in runs that column order gives back as runs. A state
// written a row at a time has a row's blocks of every column side by side
// instead, which row order gives back.
func inRuns(list []*block, from int) bool {
	return len(list) > from+1 && list[from+1].Follows(list[from])
}

// classShared reports whether two of the columns whose freed blocks lie
// between cuts (as byRow takes them) have blocks of one size class, by
// their first: only then do their blocks go back to one free list, where
// the order matters.
func classShared(list []*block, cuts []int) bool {
	var seen [maxRowCols]*blocks.Class
	n := 0
	for c := range len(cuts) - 1 {
		if cuts[c] == cuts[c+1] {
			continue
		}
		cl := list[cuts[c]].Class()
		for _, s := range seen[:n] {
			if s == cl {
				return true
			}
		}
		seen[n] = cl
		n++
	}
	return false
}
