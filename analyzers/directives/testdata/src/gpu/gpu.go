// Package gpu stands for a third-party GPU binding: no directives of its own.
package gpu

type Tensor interface{ Bytes() []byte }

type Context interface {
	Layer(i int) Tensor
	Close() error
}

type Backend interface {
	NewContext() Context
}

type Pool struct{}

func (p *Pool) Put(b []byte) {}
func (p *Pool) Close() error { return nil }

func Open() (*Pool, error) { return &Pool{}, nil }

// Impl is a concrete context: its methods carry their own facts.
type Impl struct{}

func (Impl) Layer(i int) Tensor { return nil }
func (Impl) Close() error       { return nil }
