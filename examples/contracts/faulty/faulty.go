//go:build statevet_demo

// Package faulty holds one instance of each contract mistake statevet
// catches. It builds only with -tags statevet_demo, so that the
// repository's own checks stay clean; scripts/demo.sh runs statevet on it
// and compares the findings with expected.txt.
package faulty

import "github.com/gpustate/gpustate/examples/contracts/valid"

var rows = 1024

// Cache misspells a verb and forgets the merge decision of its branches.
//
//state:contract
//state:growth append bound=2048
//state:owner session
//state:brnch isolated
//state:rollback descendants=invalidate
type Cache struct {
	Keys []float32 `state:"width=64"`
}

// Pages has no owner, and a bound that is a variable.
//
//state:contract
//state:growth append bound=rows
type Pages struct {
	IDs []uint32
}

// Weights claims durability and keeps a field that is not a slice.
//
//state:contract
//state:growth mutable bound=16
//state:owner process
//state:retention durable
type Weights struct {
	W    []float32
	Name string
}

// Scratch is reconstructable but has no checkpoint to rebuild from, and its
// branches are isolated with no merge decision.
//
//state:contract
//state:growth append bound=512
//state:owner request
//state:retention reconstructable
//state:branch isolated
type Scratch struct {
	X []int8
}

// Trace grows without a bound and says nothing about why.
//
//state:contract
//state:growth append bound=unbounded
//state:owner process
type Trace struct {
	Events []uint64
}

// History keeps checkpoints with no limit.
//
//state:contract
//state:growth append bound=256
//state:owner session
//state:checkpoint every=16
type History struct {
	Steps []float64
}

// Notes loses its owner line to a space after //: gofmt treats the line as
// prose.
//
// state:owner session
//
//state:contract
//state:growth append bound=128
type Notes struct {
	Text []byte
}

// Free releases a buffer, but release belongs on a method.
//
//state:release
func Free(b []float32) {}

// Scale writes through n, which is not a slice or a pointer.
//
//state:writes n
func Scale(n int, xs []float32) {}

// Collect pushes xs into a ring declared in another package, ignoring the
// error that says the ring is full.
func Collect(r *valid.Ring, xs []float32) {
	for _, x := range xs {
		r.Push(x)
	}
}

// Embeddings is sized past any device: 1<<40 rows of 2*valid.HeadDim
// float32s are 512 TiB, more than a 48-bit address space maps.
//
//state:contract
//state:growth mutable bound=1<<40
//state:owner process
type Embeddings struct {
	Vec []float32 `state:"width=2*valid.HeadDim"`
}

// Tokens takes its width from a variable.
//
//state:contract
//state:growth append bound=4096
//state:owner session
type Tokens struct {
	IDs []uint32 `state:"width=rows"`
}
