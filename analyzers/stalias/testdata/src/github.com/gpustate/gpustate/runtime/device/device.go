// Package device stands in for the device layer: the types and Backend
// methods stalias knows by their import path.
package device

// Ptr is a device address.
type Ptr uint64

// Span locates Rows rows of one column in one block.
type Span struct {
	Ptr  Ptr
	Rows int
}

// Backend moves bytes to and from device memory.
type Backend interface {
	CopyHtoD(dst Ptr, src []byte) error
	CopyDtoH(dst []byte, src Ptr) error
	CopyDtoD(dst, src Ptr, bytes int) error
	Memset(dst Ptr, value byte, bytes int) error
}
