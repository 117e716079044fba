package store

import (
	"bytes"
	"slices"
)

// The reference model of the store: what a head, a snapshot, a branch and
// a version's rows are, kept as plain copies, with no blocks, sharing or
// memory. Every randomized model test runs its calls on the store and on
// this reference, and compares the two.
//
// The reference records, per lineage (RefLineage: a head made by NewHead
// or NewSharedHead, and every branch and snapshot that came of it):
//
//   - its owner and layout;
//   - its versions, numbered as the store numbers them (each write, by
//     any head of the lineage, takes the next), and each version's parent;
//   - when asked (KeepVersions), every version's rows, which At rebuilds;
//   - its live handles, which a rollback may invalidate.
//
// Per handle (RefHandle: a head or a snapshot), its version, its rows (all
// of them ever appended: a window's expired rows too, below Floor), and
// whether it was released, invalidated by a rollback, or evicted. Writes,
// appends and adoption make a new version of a head; a snapshot and a
// branch copy the rows at the head's version; a merge takes the branch's
// version when the head's is its ancestor; a rollback takes the
// snapshot's when the snapshot's is the head's ancestor, and, under
// Invalidate, invalidates every handle whose ancestry held a version the
// rollback dropped.
//
// The models are this reference and what their feature adds:
//
//   - model_test.go (TestModel): the reference itself, on random layouts,
//     with backend faults and pool pressure; each call's error is
//     predicted from the handles' states (StateErr) and the reference's
//     ancestry (CanMerge, CanRollback).
//   - window_model_test.go: windows, the floor below which rows have
//     expired (Floor), and gather reads (ReadRows).
//   - group_model_test.go (TestGroupModel): a group is one reference head
//     per member; its cut is the reference's snapshots of every member
//     taken together, and a cut At rebuilds is each member at its last
//     version made before (a group-wide order of commits).
//   - share_model_test.go (TestShareModel): a session is a reference head
//     whose rows its tokens key; a new session's head adopts the rows of a
//     registered prefix, and the same head without sharing reads the same.
//   - group_share_model_test.go (TestSharedGroupModel): shared groups,
//     whose KV member appends its tokens' rows and whose recurrent member
//     steps; it adds the prefixes registered per table, the words each
//     owner has held (isolation), and eviction of a group as a whole.
//   - append_shared_model_test.go and append_shared_branches_model_test.go
//     (TestAppendInPlaceModel, TestAppendInPlaceEvict,
//     TestConcurrentBranchModels): heads that append in place past a tail
//     they share; they add the versions each head was at, which At picks
//     from. The concurrent one keeps a lineage per goroutine.
//   - replay_test.go (TestReplayModel): a replayed state is a reference
//     head that keeps every version; a step is a commit of the rows before,
//     stepped with an input.
//   - interaction_*_test.go (TestInteractionModel, package store_test):
//     every feature in one sequence; its handles wrap a RefHandle, its
//     lineages a RefLineage, and add a family, block tables, tokens and
//     the kernels queued on recorded streams.
//
// TestModelAt (checkpoint_test.go) is not built on it: the rows it checks
// At against are those the head read at each version (rows a device
// append leaves unwritten are the store's to choose), and what it models
// is which versions each line retains.
//
// An extension holds *RefHandle values (or wraps them), calls the store,
// and then the matching RefHandle method when the call succeeded; it keeps
// beside them only what its feature adds.

// RefLineage is the reference of one lineage.
type RefLineage struct {
	Owner  Owner
	Layout *Layout
	Last   Version             // the last version any head of the lineage made
	Parent map[Version]Version // every version but 0
	// Vers holds every version's rows once KeepVersions was called.
	Vers    map[Version][][]byte
	handles []*RefHandle // the live handles, for rollback's invalidation
}

// NewRefLineage returns a lineage of owner and l with no handle yet.
func NewRefLineage(owner Owner, l *Layout) *RefLineage {
	return &RefLineage{Owner: owner, Layout: l, Parent: map[Version]Version{}}
}

// KeepVersions makes l keep every version's rows from now on: version 0,
// the new head's, and every later one.
func (l *RefLineage) KeepVersions() {
	l.Vers = map[Version][][]byte{0: l.zeroRows()}
}

// zeroRows returns the rows of a new head: Bound zeroed rows of a mutable
// layout, none of an append one.
func (l *RefLineage) zeroRows() [][]byte {
	cols := make([][]byte, len(l.Layout.Columns))
	for i, c := range l.Layout.Columns {
		cols[i] = []byte{}
		if l.Layout.Growth == Mutable {
			cols[i] = make([]byte, l.Layout.Bound*c.RowBytes())
		}
	}
	return cols
}

// NewHead returns the lineage's first head, at version 0, for h.
func (l *RefLineage) NewHead(h *Head) *RefHandle {
	return l.add(&RefHandle{Lin: l, Head: h, Cols: l.zeroRows()})
}

// Snap returns a handle of s at version v with rows cols, which the
// lineage takes: a snapshot the model made another way (a foreign one).
func (l *RefLineage) Snap(s *Snap, v Version, cols [][]byte) *RefHandle {
	return l.add(&RefHandle{Lin: l, Snap: s, Cols: cols, V: v})
}

func (l *RefLineage) add(x *RefHandle) *RefHandle {
	l.handles = append(l.handles, x)
	return x
}

// IsAncestor reports whether version a is b or an ancestor of b.
func (l *RefLineage) IsAncestor(a, b Version) bool {
	for {
		if a == b {
			return true
		}
		if b == 0 {
			return false
		}
		b = l.Parent[b]
	}
}

// Path returns b and its ancestors.
func (l *RefLineage) Path(b Version) map[Version]bool {
	out := map[Version]bool{b: true}
	for b != 0 {
		b = l.Parent[b]
		out[b] = true
	}
	return out
}

// Ancestry returns b and its ancestors, oldest first.
func (l *RefLineage) Ancestry(b Version) []Version {
	var out []Version
	for v := range l.Path(b) {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// RefHandle is the reference of one head or snapshot: Head or Snap is the
// store's handle it stands for (either may be nil in a model that keeps
// its handles elsewhere).
type RefHandle struct {
	Lin  *RefLineage
	Head *Head
	Snap *Snap
	Cols [][]byte // every row, per column, expired ones too
	V    Version

	Released bool
	Invalid  bool // a rollback under Invalidate dropped a version of its ancestry
	Evicted  bool // seen answering ErrEvicted: optional state the pool took
}

// Rows returns the rows x holds, expired ones too.
func (x *RefHandle) Rows() int {
	return len(x.Cols[0]) / x.Lin.Layout.Columns[0].RowBytes()
}

// Kind names x for messages.
func (x *RefHandle) Kind() string {
	if x.Head != nil {
		return "head"
	}
	return "snapshot"
}

// StateErr returns the error any call on x answers before anything else.
func (x *RefHandle) StateErr() error {
	switch {
	case x.Released:
		return ErrReleased
	case x.Invalid:
		return ErrInvalidated
	case x.Evicted:
		return ErrEvicted
	}
	return nil
}

// Commit makes a new version of head x whose rows are cols (x keeps them).
func (x *RefHandle) Commit(cols [][]byte) {
	l := x.Lin
	l.Last++
	l.Parent[l.Last] = x.V
	x.V, x.Cols = l.Last, cols
	if l.Vers != nil {
		l.Vers[x.V] = cloneCols(cols)
	}
}

// Append commits x's rows with cols appended.
func (x *RefHandle) Append(cols [][]byte) {
	next := cloneCols(x.Cols)
	for i := range next {
		next[i] = append(next[i], cols[i]...)
	}
	x.Commit(next)
}

// Write commits x's rows with cols written from row at on.
func (x *RefHandle) Write(at int, cols [][]byte) {
	next := cloneCols(x.Cols)
	for i, c := range x.Lin.Layout.Columns {
		copy(next[i][at*c.RowBytes():], cols[i])
	}
	x.Commit(next)
}

// Snapshot returns the reference of s, a snapshot of head x.
func (x *RefHandle) Snapshot(s *Snap) *RefHandle {
	return x.Lin.Snap(s, x.V, cloneCols(x.Cols))
}

// Branch returns the reference of b, a branch of head x.
func (x *RefHandle) Branch(b *Head) *RefHandle {
	return x.Lin.add(&RefHandle{Lin: x.Lin, Head: b, Cols: cloneCols(x.Cols), V: x.V})
}

// At returns the reference of s, version v of x's lineage rebuilt: its
// rows are the lineage's (KeepVersions).
func (x *RefHandle) At(s *Snap, v Version) *RefHandle {
	return x.Lin.Snap(s, v, cloneCols(x.Lin.Vers[v]))
}

// CanMerge reports whether head x may merge c: a handle of its lineage
// whose version descends from x's.
func (x *RefHandle) CanMerge(c *RefHandle) bool {
	return c.Lin == x.Lin && x.Lin.IsAncestor(x.V, c.V)
}

// Merge makes x take c's version and rows.
func (x *RefHandle) Merge(c *RefHandle) {
	x.V, x.Cols = c.V, cloneCols(c.Cols)
}

// CanRollback reports whether head x may roll back to to: a handle of its
// lineage whose version is an ancestor of x's.
func (x *RefHandle) CanRollback(to *RefHandle) bool {
	return to.Lin == x.Lin && x.Lin.IsAncestor(to.V, x.V)
}

// Rollback makes x take to's version and rows. Under Invalidate, every
// other live handle of the lineage whose ancestry holds a version of x's
// that to's lacks is invalidated.
func (x *RefHandle) Rollback(to *RefHandle) {
	l := x.Lin
	if l.Layout.Descendants == Invalidate {
		gone := l.Path(x.V)
		for v := range l.Path(to.V) {
			delete(gone, v)
		}
		for _, y := range l.handles {
			if y == x || y.Released {
				continue
			}
			for v := range l.Path(y.V) {
				if gone[v] {
					y.Invalid = true
					break
				}
			}
		}
	}
	x.V, x.Cols = to.V, cloneCols(to.Cols)
}

// Release marks x released: every call on it answers ErrReleased.
func (x *RefHandle) Release() {
	x.Released = true
	x.Lin.handles = slices.DeleteFunc(x.Lin.handles, func(y *RefHandle) bool { return y == x })
}

// Same reports whether dst, rows [from, to) of x read per column, are x's.
func (x *RefHandle) Same(from, to int, dst [][]byte) bool {
	for i, c := range x.Lin.Layout.Columns {
		if dst[i] != nil && !bytes.Equal(dst[i], x.Cols[i][from*c.RowBytes():to*c.RowBytes()]) {
			return false
		}
	}
	return true
}

// cloneCols returns a deep copy of cols; a nil column comes back empty.
func cloneCols(cols [][]byte) [][]byte {
	out := make([][]byte, len(cols))
	for i, c := range cols {
		out[i] = bytes.Clone(c)
		if out[i] == nil {
			out[i] = []byte{}
		}
	}
	return out
}
