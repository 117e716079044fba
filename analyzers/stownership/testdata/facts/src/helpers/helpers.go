// Package helpers has methods that read through their receiver and
// release helpers over interfaces and type parameters: no directives.
package helpers

import "res"

// Handle wraps a state.
type Handle struct {
	s    *res.State
	rows []int
}

// Close releases the handle.
func (h *Handle) Close() { h.s.Release() } // want Close:"takes\\(-1\\) releases\\(-1\\)"

// Rows returns a copy of rows read through the receiver's fields: it does
// not take the receiver.
func (h *Handle) Rows(n int) ([]int, error) { return head(h.rows, n) }

func head(rows []int, n int) ([]int, error) { return append([]int(nil), rows[:n]...), nil }

// Releaser is what the helpers release.
type Releaser interface{ Release() error }

// ReleaseAll releases each of xs.
func ReleaseAll(xs ...Releaser) { // want ReleaseAll:"^takes\\(0\\) disposes\\(0\\)$"
	for _, x := range xs {
		x.Release()
	}
}

// ReleaseEach releases each of xs.
func ReleaseEach[T Releaser](xs ...T) { // want ReleaseEach:"^takes\\(0\\) disposes\\(0\\)$"
	for _, x := range xs {
		if err := x.Release(); err != nil {
			panic(err)
		}
	}
}

// Sizer has a method without arguments that is no release.
type Sizer interface {
	Len() int
	Release() error
}

// Measure calls Len on each of xs: a method that returns an int is not a
// release, so it only borrows them and takes nothing.
func Measure[T Sizer](xs ...T) int {
	n := 0
	for _, x := range xs {
		n += x.Len()
	}
	return n
}

// CloseOne releases x.
func CloseOne[T Releaser](x T) error { return x.Release() } // want CloseOne:"^takes\\(0\\) disposes\\(0\\)$"
