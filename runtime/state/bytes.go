package state

import "unsafe"

// Bytes returns the bytes of s, sharing its memory (no copy). T must be a
// fixed-size type without pointers (the element types a contract allows).
func Bytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// Rows returns b viewed as a []T, sharing its memory (no copy) when b's
// address is aligned for T, as every slice made by make or by Bytes is; a
// misaligned b is copied into a new slice instead. Trailing bytes that do
// not make a whole T are left out. A T of size zero gives nil.
func Rows[T any](b []byte) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if size == 0 || len(b) < size {
		return nil
	}
	n := len(b) / size
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%unsafe.Alignof(zero) != 0 {
		out := make([]T, n)
		copy(Bytes(out), b)
		return out
	}
	return unsafe.Slice((*T)(p), n)
}
