// Package res declares resources the way stategen's output does, with
// function directives and no contract of its own.
package res

// Pool is a resource.
type Pool struct{ n int }

// NewPool returns a pool to close.
//
//state:acquire
func NewPool() (*Pool, error) { return &Pool{}, nil }

// Close releases the pool.
//
//state:release
func (p *Pool) Close() error { return nil }

// State is a handle on persistent state.
type State struct{ rows []int }

// NewState returns a head the caller must release.
//
//state:acquire
func NewState(p *Pool) (*State, error) { return &State{}, nil }

// Open returns a head; it cannot fail.
//
//state:acquire
func Open() *State { return &State{} }

// Snapshot returns an immutable snapshot to release.
//
//state:acquire
func (s *State) Snapshot() (*Snap, error) { return &Snap{}, nil }

// Branch returns a new head to release.
//
//state:acquire
func (s *State) Branch() (*State, error) { return &State{}, nil }

// Append grows the state.
//
//state:appends
func (s *State) Append(x int) error { return nil }

// Len is a plain use.
func (s *State) Len() int { return len(s.rows) }

// Release releases the head.
//
//state:release
func (s *State) Release() error { return nil }

// Adopt takes over s.
//
//state:takes s
func Adopt(s *State) {}

// Snap is an immutable snapshot.
//
//state:snapshot
type Snap struct{ rows []int }

// Release releases the snapshot.
//
//state:release
func (v *Snap) Release() error { return nil }

// Spans aliases the snapshot's rows.
//
//state:view
func (v *Snap) Spans() []int { return v.rows }

// Read copies rows out; a plain use.
func (s *State) Read(from, to int) ([]int, error) { return s.rows[from:to], nil }

// ReadInto copies rows into dst; a plain use.
func (s *State) ReadInto(dst []int) error { copy(dst, s.rows); return nil }

// Len is a plain use of the snapshot.
func (v *Snap) Len() int { return len(v.rows) }

// Engine is a resource behind an interface whose methods carry no
// directives.
type Engine interface {
	Forward(x int) error
	Len() int
	Close() error
}

// OpenEngine returns an engine to close.
//
//state:acquire
func OpenEngine() (Engine, error) { return nil, nil }

// Layer is a view of the state: the same resource.
//
//state:view
func (s *State) Layer(i int) *State { return s }
