// Package onefault checks that each fault in a contract is reported once.
package onefault

// Rebuilt has a checkpoint line with a misspelt key: that line is the one
// fault, not a missing checkpoint as well.
//
//state:contract
//state:growth append bound=64
//state:owner session
//state:retention reconstructable
//state:checkpoint evry=8 keep=4 // want `unknown key evry`
type Rebuilt struct{ X []float32 }

// Missing has no checkpoint line at all.
//
//state:contract
//state:growth append bound=64
//state:owner session
//state:retention reconstructable // want `reconstructable state Missing needs a //state:checkpoint line`
type Missing struct{ X []float32 }

// Hidden is a plain function whose body comments on its state in prose.
func Hidden(x int) int {
	// state: the hidden state of the step, kept between calls
	// state: Growth of the buffer is the caller's business
	return x
}

// Prose shows that comments in a body that merely mention state are not
// directives, however they are spaced.
func Prose(x int) int {
	//state: the hidden state
	//	state: the hidden state
	/* state: the hidden state */
	// state:the hidden state
	return x
}

// Durable claims durability on its checkpoint line: that line is the fault.
//
//state:contract
//state:growth append bound=64
//state:owner session
//state:retention reconstructable
//state:checkpoint every=8 keep=4 durable // want `the contract of Durable claims durability \(durable\)`
type Durable struct{ X []float32 }

// Spaced has its checkpoint line written as prose.
//
//state:contract
//state:growth append bound=64
//state:owner session
//state:retention reconstructable
// state:checkpoint every=8 keep=4 // want `// state:checkpoint has a space after //`
type Spaced struct{ X []float32 }

// Misspelt misspells the checkpoint verb.
//
//state:contract
//state:growth append bound=64
//state:owner session
//state:retention reconstructable
//state:chekpoint every=8 keep=4 // want `unknown directive //state:chekpoint on state type Misspelt; did you mean checkpoint\?`
type Misspelt struct{ X []float32 }

// A look-alike outside any body is still reported.
// state:owner session // want `// state:owner has a space after //`
var _ = 0

// DurableGrowth claims durability on its growth line: that line is the
// fault, not a missing growth line as well.
//
//state:contract
//state:growth append bound=64 crash-safe // want `the contract of DurableGrowth claims durability \(crash-safe\)`
//state:owner session
type DurableGrowth struct{ X []float32 }
