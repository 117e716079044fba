// Package writes has writers and readers without directives: the facts
// are inferred in every package, active or not.
package writes

// Set writes b.
func Set(b []byte) { b[0] = 1 } // want Set:"writes\\(0\\)"

// Inc writes through a pointer: inferred, but no fact leaves the package
// (only parameters that can hold a view, slices, are exported).
func Inc(n *int) { *n++ }

// Via writes through a helper of the package, after deriving a slice.
func Via(x int, b []byte) { // want Via:"writes\\(1\\)"
	t := b[1:]
	set(t)
}

func set(b []byte) { copy(b, "x") }

// Field writes through a struct parameter's slice field.
func Field(s Spans) { s.Keys[0] = 1 } // want Field:"writes\\(0\\)"

// Spans holds slices.
type Spans struct{ Keys []int }

// Reset writes its receiver, a pointer: no fact either.
func (s *Spans) Reset() { s.Keys = nil }

// Sort writes its receiver, a slice.
func (k Keys) Sort() { k[0], k[1] = k[1], k[0] } // want Sort:"writes\\(-1\\)"

// Keys is a slice type with methods.
type Keys []int

// Generic writes a slice of a type parameter.
func Generic[S ~[]E, E any](s S, e E) { s[0] = e } // want Generic:"writes\\(0\\)"

// Read only reads.
func Read(b []byte, n *int) int { return int(b[0]) + *n }

// Local writes only a copy.
func Local(s Spans, a [4]int) {
	a[0] = 1
	s = Spans{}
	_ = s
}

// Map writes a map, which is not a write through a slice or pointer.
func Map(m map[string]int) { m["a"] = 1 }
