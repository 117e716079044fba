package a

import "res"

// Tests use released handles on purpose.
func checkReleased() int {
	s := res.Open()
	s.Release()
	return s.Len()
}
