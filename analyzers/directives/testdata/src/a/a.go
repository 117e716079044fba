package a // want package:"directives declared"

// KV is the cache of one session.
//
//state:contract purpose="keys and values"
//state:growth append bound=64
//state:owner session
type KV struct { // want KV:"contract KV growth=append valid=true"
	Keys []float32
}

// Bad has a contract with an error: exported all the same, not valid.
//
//state:contract
//state:growth append bound=8
type Bad struct { // want Bad:"contract Bad growth=append valid=false"
	X []int8
}

// Snap is an immutable view.
//
//state:snapshot
type Snap struct{ rows []float32 } // want Snap:"snapshot Snap"

// Handle is a resource.
type Handle struct{ n int }

// Open returns a handle the caller must release.
//
//state:acquire
func Open() (*Handle, error) { return &Handle{}, nil } // want Open:"directives acquire"

// Close releases h.
//
//state:release
func (h *Handle) Close() error { return nil } // want Close:"directives release"

// Push grows h.
//
//state:appends
func (h *Handle) Push(x int) error { return nil } // want Push:"directives appends"

// Fill writes dst and takes h.
//
//state:writes dst
//state:takes h
func Fill(h *Handle, dst []float32) {} // want Fill:"directives takes=h writes=dst"

// Box is generic; its method carries a directive.
type Box[T any] struct{ v []T }

// Data aliases the box.
//
//state:view
func (b *Box[T]) Data() []T { return b.v } // want Data:"directives view"

// Rows aliases the snapshot.
func (s Snap) Rows() []float32 { return s.rows }
