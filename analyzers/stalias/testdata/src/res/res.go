// Package res declares a state head and its snapshot the way stategen's
// output does.
package res

// Span locates rows in device memory.
type Span struct {
	Ptr  uint64
	Rows int
}

// Spans are the spans of each column.
type Spans struct{ Keys, Values []Span }

// State is a head.
type State struct{ rows []int }

// Rows aliases the head's rows; writing them is allowed.
//
//state:view
func (s *State) Rows() []int { return s.rows }

// Snapshot returns an immutable snapshot.
//
//state:acquire
func (s *State) Snapshot() (*Snap, error) { return &Snap{}, nil }

// Release releases the head.
//
//state:release
func (s *State) Release() error { return nil }

// Snap is an immutable snapshot.
//
//state:snapshot
type Snap struct{ rows []int }

// Rows aliases the snapshot's rows: read only.
//
//state:view
func (v *Snap) Rows() []int { return v.rows }

// Spans aliases the snapshot's device rows: read only.
//
//state:view
func (v *Snap) Spans() (Spans, error) { return Spans{}, nil }

// Poke is a contradiction stalias catches at the call.
//
//state:mutates
func (v *Snap) Poke() {}

// Len is a plain read.
func (v *Snap) Len() int { return len(v.rows) }

// Release releases the snapshot.
//
//state:release
func (v *Snap) Release() error { return nil }

// Launch runs a kernel that writes dst.
//
//state:writes dst
func Launch(dst []Span, src []Span) {}
