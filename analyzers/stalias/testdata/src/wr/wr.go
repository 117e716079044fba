// Package wr has writers without directives.
package wr

// Fill writes b.
func Fill(b []int) { b[0] = 1 }

// FillAll writes through a helper.
func FillAll(bs ...[]int) {
	for _, b := range bs {
		Fill(b)
	}
}

// Bump writes through a derived slice.
func Bump(b []int) {
	t := b[1:]
	t[0]++
}

// Sum only reads.
func Sum(b []int) int {
	n := 0
	for _, x := range b {
		n += x
	}
	return n
}
