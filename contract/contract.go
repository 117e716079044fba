package contract

import (
	"go/token"
	"go/types"
)

// Package is the parse of one package's //state: directives.
type Package struct {
	Contracts   []*Contract     // state types, in source order
	Snapshots   []*SnapshotType // types whose doc holds //state:snapshot
	Funcs       []*Func         // funcs and methods with function directives
	Groups      []*Group        // //state:group types, in source order
	Externs     []*Extern       // //state:extern lines, in source order
	Diagnostics []Diagnostic    // every problem, in position order
}

// Diagnostic is one problem found in the directives of a package.
type Diagnostic struct {
	Pos, End token.Pos
	Analyzer string // "stcontract" or "stgrowth": which analyzer reports it
	Type     string // the state type it concerns ("" when none)
	Message  string // lowercase, no trailing period, names the type and the remedy
	Fixes    []Fix  // mechanical fixes (SuggestedFix)
}

// Fix is a mechanical change that resolves a Diagnostic.
type Fix struct {
	Message string
	Edits   []Edit
}

// Edit replaces the source text in [Pos, End) with NewText.
type Edit struct {
	Pos, End token.Pos
	NewText  string
}

// Contract is the parsed contract of one state type. It is gob-encodable
// (exported fields, no maps) so that analyzers can carry it across packages
// as an analysis fact; the type object it was parsed from is not encoded.
type Contract struct {
	Type            string       // the named type
	Pos             token.Pos    // the //state:contract line
	Purpose         string       // the purpose="..." of the contract line
	Growth          Growth       // GrowthAppend | GrowthMutable (GrowthUnset only on an invalid contract)
	Bound           int64        // rows; 0 with Unbounded
	Unbounded       bool         // bound=unbounded
	UnboundedReason string       // the reason="..." of an unbounded growth line
	Window          int64        // rows of a window=W growth line (only the last W stay readable); 0 when none
	BlockRows       int          // rows per block of a //state:block rows=N line; 0: the runtime's default
	ShareKey        string       // the key field of a //state:share prefix key=FIELD line; "" when blocks are not shared
	Owner           string       // the owner kind
	Retention       Retention    // RetentionMandatory (default) | RetentionOptional | RetentionReconstructable
	Snapshot        SnapshotMode // SnapshotImmutable (default) | SnapshotNone
	Branch          BranchMode   // BranchNone (default) | BranchIsolated
	Merge           MergeMode    // MergeUnset | MergeUnsupported | MergeFastforward
	Rollback        bool         // a //state:rollback line is present
	Descendants     Descendants  // DescendantsInvalidate | DescendantsKeep
	Checkpoint      *Checkpoint  // nil when absent
	Replay          *Replay      // a //state:replay line; nil when absent
	Cleanup         string       // the on=EVENT value
	Fields          []Field      // the struct's fields, in declaration order
	Valid           bool         // no stcontract diagnostics (stgrowth ones allowed)

	obj *types.TypeName
}

// Object returns the type the contract was parsed from, or nil when the
// contract was decoded from a fact or parsed without type information.
func (c *Contract) Object() *types.TypeName { return c.obj }

// Checkpoint is the policy of a //state:checkpoint line. Exactly one of
// Every and Budget spaces the checkpoints; the other is 0.
type Checkpoint struct {
	Every int // a checkpoint every Every versions; 0 when the line spaces them by Budget
	Keep  int // checkpoints retained; 0 when the line has no keep (a stgrowth finding)
	// Budget, when set, takes a checkpoint whenever the deltas written
	// since the last one reach Budget bytes, so rebuilding any retained
	// version replays at most Budget bytes of deltas; 0 when unset.
	Budget int64
}

// Field is one field of a state type: a slice of fixed-size elements, Width
// elements to a row.
type Field struct {
	Name     string
	Elem     string // element type as written, types.TypeString relative to the package ("float32", "[8]uint16", "Token")
	ElemSize int64  // bytes of one element (gc compiler, amd64)
	Width    int    // elements per row (tag state:"width=W"), default 1
	RowBytes int64  // ElemSize * Width
}

// Func is a func or method with function directives.
type Func struct {
	Name                                     string    // "F" or "(*T).M" / "T.M"
	Pos                                      token.Pos // the first //state: line of its doc comment
	Acquire, Release, Mutates, Appends, View bool      // Appends implies Mutates: both are set
	Takes                                    []string  // parameter names
	Writes                                   []string  // parameter names

	// Frees lists the parameters the function releases (//state:frees
	// NAME): after the call they are released.
	Frees []string
	// TakesOnSuccess lists the parameters it takes only when its error
	// result is nil (//state:takes NAME onsuccess).
	TakesOnSuccess []string
	// Results lists the results that are each a new resource
	// (//state:acquire N...), 0-based; nil with Acquire set means the
	// first result alone.
	Results []int
	// Releaser is the index of a returned func() that releases the
	// acquired resource (//state:acquire release=N), plus one; 0: none.
	Releaser int
	// Child names the parameter the first result belongs to
	// (//state:child NAME), or "recv" for the receiver; "": none.
	Child string
	// Valid marks a method that reports whether its receiver holds a
	// resource (//state:valid).
	Valid bool
	// ErrMap marks a func that returns a nil error exactly when its error
	// argument is nil (//state:errmap).
	ErrMap bool

	obj *types.Func
}

// AcquiredResults returns the indices of the results that are new
// resources: Results, or the first result alone for a bare
// //state:acquire; nil when the func acquires nothing.
func (f *Func) AcquiredResults() []int {
	switch {
	case f == nil || !f.Acquire:
		return nil
	case len(f.Results) > 0:
		return f.Results
	}
	return []int{0}
}

// Object returns the function the directives were parsed from, or nil when
// the record was decoded from a fact or parsed without type information.
func (f *Func) Object() *types.Func { return f.obj }

// SnapshotType is a type whose doc comment holds a bare //state:snapshot: its
// values are immutable.
type SnapshotType struct {
	Type string
	Pos  token.Pos // the //state:snapshot line

	obj *types.TypeName
}

// Object returns the snapshot type, or nil when the record was decoded from a
// fact or parsed without type information.
func (s *SnapshotType) Object() *types.TypeName { return s.obj }

// Growth is the growth law of a state type.
type Growth int

// Growth laws.
const (
	GrowthUnset   Growth = iota // no valid growth line: only on an invalid contract
	GrowthAppend                // rows are only appended, up to Bound
	GrowthMutable               // exactly Bound rows, written in place
)

func (g Growth) String() string {
	switch g {
	case GrowthAppend:
		return "append"
	case GrowthMutable:
		return "mutable"
	}
	return "unset"
}

// Retention says whether a state may be evicted.
type Retention int

// Retention policies.
const (
	RetentionMandatory       Retention = iota // never evicted (default)
	RetentionOptional                         // may be dropped
	RetentionReconstructable                  // may be rebuilt from checkpoints
)

func (r Retention) String() string {
	switch r {
	case RetentionOptional:
		return "optional"
	case RetentionReconstructable:
		return "reconstructable"
	}
	return "mandatory"
}

// SnapshotMode says whether Snapshot is generated.
type SnapshotMode int

// Snapshot modes.
const (
	SnapshotImmutable SnapshotMode = iota // snapshots are generated (default)
	SnapshotNone                          // no snapshots
)

func (s SnapshotMode) String() string {
	if s == SnapshotNone {
		return "none"
	}
	return "immutable"
}

// BranchMode says whether Branch is generated.
type BranchMode int

// Branch modes.
const (
	BranchNone     BranchMode = iota // no branches (default)
	BranchIsolated                   // isolated copy-on-write branches
)

func (b BranchMode) String() string {
	if b == BranchIsolated {
		return "isolated"
	}
	return "none"
}

// MergeMode is the merge decision of an isolated branch.
type MergeMode int

// Merge decisions.
const (
	MergeUnset       MergeMode = iota // no decision written (an error with BranchIsolated)
	MergeUnsupported                  // branches are never merged
	MergeFastforward                  // a child merges into an unchanged parent
)

func (m MergeMode) String() string {
	switch m {
	case MergeUnsupported:
		return "unsupported"
	case MergeFastforward:
		return "fastforward"
	}
	return "unset"
}

// Descendants says what a rollback does to snapshots and branches taken after
// its target.
type Descendants int

// Rollback policies.
const (
	DescendantsInvalidate Descendants = iota // they answer ErrInvalidated
	DescendantsKeep                          // they stay readable
)

func (d Descendants) String() string {
	if d == DescendantsKeep {
		return "keep"
	}
	return "invalidate"
}
