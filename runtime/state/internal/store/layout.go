package store

import (
	"fmt"
	"slices"
	"strconv"
)

// Growth says how a state's rows change.
type Growth int

const (
	// Append states only grow, up to Bound rows; written rows never change.
	Append Growth = iota
	// Mutable states have exactly Bound rows, zero at creation, written in
	// place by Write and WriteDevice.
	Mutable
)

func (g Growth) String() string {
	switch g {
	case Append:
		return "append"
	case Mutable:
		return "mutable"
	}
	return fmt.Sprintf("Growth(%d)", int(g))
}

// Descendants says what a rollback does to the snapshots and branches taken
// after its target on the line it abandons.
type Descendants int

const (
	// Invalidate makes them answer ErrInvalidated.
	Invalidate Descendants = iota
	// Keep leaves them readable and writable.
	Keep
)

func (d Descendants) String() string {
	switch d {
	case Invalidate:
		return "invalidate"
	case Keep:
		return "keep"
	}
	return fmt.Sprintf("Descendants(%d)", int(d))
}

// Column describes one field of a state: Width elements of ElemSize bytes
// per row.
type Column struct {
	Name     string
	ElemSize int
	Width    int
}

// rowBytes returns the bytes of one row of the column.
func (c Column) rowBytes() int { return c.ElemSize * c.Width }

// CheckpointPolicy keeps past versions of a head reconstructable by At.
// The head's first version is a checkpoint; after it, one every Every
// versions, or, with Every zero, whenever the deltas since the last one
// reach Budget bytes (or 1024 versions, whichever comes first). At most
// Keep checkpoints are kept, and with them the deltas after the oldest:
// older versions answer ErrNotRetained.
type CheckpointPolicy struct {
	Every  int
	Keep   int
	Budget int64
}

// Layout is the shape and contract of a state type, as generated code
// declares it once per type.
type Layout struct {
	// Type is the state type's name, for errors and Pool.Close.
	Type string
	// Columns are the fields, in order; every batch has one []byte per
	// column.
	Columns []Column
	// Growth is Append or Mutable.
	Growth Growth
	// Bound is the number of rows: the most an append state may hold, the
	// exact number a mutable state has. Bound <= 0 means unbounded, for
	// append states only.
	Bound int
	// Descendants is the rollback policy.
	Descendants Descendants
	// Checkpoint, when not nil, keeps past versions for At and Plan.
	Checkpoint *CheckpointPolicy
	// Retention says what the pool may take back under memory pressure:
	// Mandatory (the zero value) nothing, Optional the whole state,
	// Reconstructable what its checkpoints and deltas rebuild.
	Retention Retention
	// Window, when positive, makes an append state keep only its last
	// Window rows readable (the contract's //state:growth append
	// window=W): Len counts every row ever appended, rows below
	// Len()-Window answer ErrExpired, and the blocks that hold only
	// expired rows go back to the pool once no snapshot holds them. A
	// window state has no bound (Bound <= 0) and no checkpoint policy.
	Window int
	// BlockRows is the rows of each column one block holds (the
	// contract's //state:block rows=N); zero lets the pool choose (see
	// PoolOptions.BlockBytes).
	BlockRows int
	// ShareKey, when not empty, names the column whose values key prefix
	// sharing (the contract's //state:share prefix key=FIELD): heads made by
	// Pool.NewSharedHead in one non-empty Domain share the full blocks of
	// a common prefix, matched by this column's values. The column has
	// width 1 and an integer element type; the layout has append growth
	// and no window.
	ShareKey string
	// Input, for a state replayed through Head.Step, is the step input's
	// columns (the contract's //state:replay input=T): Step answers
	// ErrShape for an input of another number of columns, or one whose
	// length is no multiple of its row. Nil: inputs are not checked.
	Input []Column
}

// check validates l for a pool with blocks of blockBytes bytes.
func (l *Layout) check(blockBytes int) error {
	if l == nil {
		return fmt.Errorf("state: nil layout: %w", ErrShape)
	}
	if len(l.Columns) == 0 {
		return fmt.Errorf("state: layout of %s has no columns: %w", l.Type, ErrShape)
	}
	for _, c := range l.Columns {
		if c.ElemSize <= 0 || c.Width <= 0 {
			return fmt.Errorf("state: column %s.%s has element size %d and width %d, both must be positive: %w",
				l.Type, c.Name, c.ElemSize, c.Width, ErrShape)
		}
		if c.ElemSize > blockBytes/c.Width {
			return &rowSizeError{typ: l.Type, col: c, blockBytes: blockBytes}
		}
	}
	for _, c := range l.Input {
		if c.ElemSize <= 0 || c.Width <= 0 {
			return fmt.Errorf("state: input column %s of %s has element size %d and width %d, both must be positive: %w",
				c.Name, l.Type, c.ElemSize, c.Width, ErrShape)
		}
	}
	if l.Bound > maxInt/4 {
		return fmt.Errorf("state: layout of %s has a bound of %d rows, more than a state can hold: %w", l.Type, l.Bound, ErrShape)
	}
	switch l.Growth {
	case Append:
	case Mutable:
		if l.Bound <= 0 {
			return fmt.Errorf("state: mutable layout of %s needs a positive bound, has %d: %w", l.Type, l.Bound, ErrShape)
		}
	default:
		return fmt.Errorf("state: layout of %s has unknown growth %v: %w", l.Type, l.Growth, ErrShape)
	}
	if err := l.checkWindow(); err != nil {
		return err
	}
	if err := l.checkShare(); err != nil {
		return err
	}
	if l.Descendants != Invalidate && l.Descendants != Keep {
		return fmt.Errorf("state: layout of %s has unknown descendants policy %v: %w", l.Type, l.Descendants, ErrShape)
	}
	if l.BlockRows < 0 {
		return fmt.Errorf("state: layout of %s has %d rows per block: %w", l.Type, l.BlockRows, ErrShape)
	}
	if l.Retention < Mandatory || l.Retention > Reconstructable {
		return fmt.Errorf("state: layout of %s has unknown retention %v: %w", l.Type, l.Retention, ErrShape)
	}
	if cp := l.Checkpoint; cp != nil {
		if cp.Every < 0 || cp.Keep < 0 || cp.Budget < 0 || (cp.Every == 0 && cp.Budget == 0) || cp.Keep == 0 {
			return fmt.Errorf("state: layout of %s has checkpoint policy every=%d keep=%d budget=%d; it needs every or budget, and keep, positive: %w",
				l.Type, cp.Every, cp.Keep, cp.Budget, ErrShape)
		}
	}
	return nil
}

// clone returns a deep copy of l, so that a caller changing its Layout
// later changes no state.
func (l *Layout) clone() *Layout {
	c := *l
	c.Columns = append([]Column(nil), l.Columns...)
	if l.Input != nil {
		c.Input = append([]Column(nil), l.Input...)
	}
	if l.Checkpoint != nil {
		cp := *l.Checkpoint
		c.Checkpoint = &cp
	}
	return &c
}

// equal reports whether l and o describe the same layout.
func (l *Layout) equal(o *Layout) bool {
	if l == o {
		return true
	}
	if (l.Checkpoint == nil) != (o.Checkpoint == nil) || l.Checkpoint != nil && *l.Checkpoint != *o.Checkpoint {
		return false
	}
	return l.Type == o.Type && slices.Equal(l.Columns, o.Columns) && l.Growth == o.Growth &&
		l.Bound == o.Bound && l.Descendants == o.Descendants && l.Retention == o.Retention &&
		l.Window == o.Window && l.BlockRows == o.BlockRows && l.ShareKey == o.ShareKey &&
		slices.Equal(l.Input, o.Input)
}

// maxBlockBytes is the largest block a pool takes.
const maxBlockBytes = 1 << 30

// rowSizeError is a column whose rows are larger than the pool's blocks: a
// row never spans blocks. It wraps ErrShape (the layout does not fit the
// pool) and names the field, the sizes and the remedy.
type rowSizeError struct {
	typ        string
	col        Column
	blockBytes int
}

func (e *rowSizeError) Error() string {
	c := e.col
	field := c.Name
	if field == "" {
		field = "(unnamed)"
	}
	rowBytes := "more than " + strconv.Itoa(maxInt) + " bytes"
	remedy := "no block holds it (a pool's blocks are at most 1 GiB): split the field"
	if c.Width <= maxInt/c.ElemSize {
		rb := c.ElemSize * c.Width
		rowBytes = strconv.Itoa(rb) + " bytes"
		if rb <= maxBlockBytes {
			remedy = fmt.Sprintf("make the pool with a larger PoolOptions.BlockBytes, at least %d", (rb+blockAlign-1)&^(blockAlign-1))
		}
	}
	return fmt.Sprintf("state: a row of field %s of %s is %s (%d elements of %d bytes), larger than the pool's blocks of %d bytes; a row never spans blocks: %s",
		field, e.typ, rowBytes, c.Width, c.ElemSize, e.blockBytes, remedy)
}

// Unwrap makes the error match ErrShape.
func (e *rowSizeError) Unwrap() error { return ErrShape }

// Retention says what the pool may do with a state under memory pressure.
type Retention int

const (
	// Mandatory state is never evicted: an allocation that finds no room
	// without it answers ErrNoMemory.
	Mandatory Retention = iota
	// Optional state may be evicted; an evicted head or snapshot answers
	// ErrEvicted on every call but Release.
	Optional
	// Reconstructable state may lose the blocks its checkpoints and deltas
	// can rebuild; its next use rebuilds them, transparently.
	Reconstructable
)

func (r Retention) String() string {
	switch r {
	case Mandatory:
		return "mandatory"
	case Optional:
		return "optional"
	case Reconstructable:
		return "reconstructable"
	}
	return fmt.Sprintf("Retention(%d)", int(r))
}

// checkWindow validates the window and block fields of l.
func (l *Layout) checkWindow() error {
	switch {
	case l.BlockRows < 0:
		return fmt.Errorf("state: layout of %s has %d rows per block: %w", l.Type, l.BlockRows, ErrShape)
	case l.Window < 0:
		return fmt.Errorf("state: layout of %s has a window of %d rows; a window is positive, or 0 for none: %w", l.Type, l.Window, ErrShape)
	case l.Window == 0:
		return nil
	case l.Growth != Append:
		return fmt.Errorf("state: layout of %s has a window but %v growth; a window needs append growth: %w", l.Type, l.Growth, ErrShape)
	case l.Bound > 0:
		return fmt.Errorf("state: layout of %s has both a bound of %d and a window of %d rows; a window is the bound, keep one: %w", l.Type, l.Bound, l.Window, ErrShape)
	case l.Checkpoint != nil:
		return fmt.Errorf("state: layout of %s has a window and a checkpoint policy; expired rows cannot be reconstructed: %w", l.Type, ErrShape)
	case l.Window > maxInt/4:
		return fmt.Errorf("state: layout of %s has a window of %d rows, more than a state can hold: %w", l.Type, l.Window, ErrShape)
	}
	return nil
}

// checkShare validates the ShareKey of l: a column of width 1 with an
// integer element size, on an append layout without a window.
func (l *Layout) checkShare() error {
	if l.ShareKey == "" {
		return nil
	}
	k := l.shareColumn()
	switch {
	case k < 0:
		return fmt.Errorf("state: layout of %s shares prefixes keyed by %q, which is no column: %w", l.Type, l.ShareKey, ErrShape)
	case l.Columns[k].Width != 1:
		return fmt.Errorf("state: layout of %s shares prefixes keyed by column %s of width %d; a key column has width 1: %w", l.Type, l.ShareKey, l.Columns[k].Width, ErrShape)
	case !keySize(l.Columns[k].ElemSize):
		return fmt.Errorf("state: layout of %s shares prefixes keyed by column %s of %d-byte elements; a key is an integer of 1, 2, 4 or 8 bytes: %w", l.Type, l.ShareKey, l.Columns[k].ElemSize, ErrShape)
	case l.Growth != Append:
		return fmt.Errorf("state: layout of %s shares prefixes but has %v growth; shared blocks are never written, which needs append growth: %w", l.Type, l.Growth, ErrShape)
	case l.Window > 0:
		return fmt.Errorf("state: layout of %s shares prefixes and has a window; a window drops the prefix it would share: %w", l.Type, ErrShape)
	}
	return nil
}

func keySize(n int) bool { return n == 1 || n == 2 || n == 4 || n == 8 }

// shareColumn returns the index of the key column of l, -1 when none.
func (l *Layout) shareColumn() int {
	if l.ShareKey == "" {
		return -1
	}
	for i, c := range l.Columns {
		if c.Name == l.ShareKey {
			return i
		}
	}
	return -1
}

// blockAlign aligns block sizes, so that every row of every element type
// starts at an address aligned for it when rows pack a block.
const blockAlign = 256

type segment struct {
	parent *segment
	fork   Version // the version of parent this segment starts after
	depth  int
	// jump is an ancestor (skew-binary jump pointers, as in Myers'
	// random-access lists): following jump or parent, whichever does not
	// pass the depth sought, finds any ancestor in O(log depth) steps;
	// nil at the root.
	jump *segment
	// held is the highest version of the segment that a holder other
	// than its writer took (capture: a snapshot, a branch, At, a merge),
	// 0 when none. A writer rolled back to a version of its own segment
	// at or past held goes on writing on it (commitVersion): the
	// versions it abandons there are no one's ancestry. Guarded by the
	// lineage's lock.
	held Version
	// pinned is the highest version of the segment that a holder no
	// rollback invalidates took (pin: a shared group's registered state),
	// 0 when none: a rollback below it writes on in no tail block
	// (lowerTails). It never comes down. Guarded by the lineage's lock.
	pinned Version
}

type position struct {
	seg *segment
	v   Version
}
