// Package ml stands for a third-party GPU binding shaped like a Go
// inference engine's: a Backend makes Contexts, which hand out tensors.
// It has no directives; package mlcontracts gives it its contracts.
package ml

type Tensor interface {
	Bytes() []byte
	Shape() []int
}

type Context interface {
	Layer(i int) Context
	Input() Context
	Empty(n int) Tensor
	Forward(ts ...Tensor) Context
	Compute(ts ...Tensor)
	Close()
}

type Backend interface {
	NewContext() Context
	NewContextSize(n int) Context
	Close()
}

// Open returns a backend the caller must close.
func Open(path string) (Backend, error) { return nil, nil }
