// Package cgo has a contract over C element types, next to a cgo preamble.
package cgo

// #include <stdint.h>
// static int32_t twice(int32_t x) { return 2 * x; }
import "C"

// Samples is a state type whose elements are C integer types.
//
//state:contract
//state:growth append bound=1024
//state:owner request
type Samples struct {
	Raw  []C.int32_t
	Wide []C.double `state:"width=2"`
	Ptrs []*C.char // want `field Ptrs of state type Samples has element type \*C.char`
}

// Twice calls C.
//
//state:writes out
func Twice(in C.int32_t, out *C.int32_t) { *out = C.twice(in) }
