// Package gpu stands for a third-party GPU binding, with no directives.
package gpu

type Tensor interface{ Bytes() []byte }

type Closer interface{ Close() error }

type Context interface {
	Closer
	Layer(i int) Tensor
	Forward(ts ...Tensor) Tensor
}

type Backend interface {
	NewContext() Context
}

type Pool struct{}

func (p *Pool) Put(b []byte, n int) {}
func (p *Pool) Close() error        { return nil }

func Open(dev int) (*Pool, error) { return &Pool{}, nil }
func Launch(dst []float32, n int) {}
func Sync()                       {}

var Default = &Pool{}
