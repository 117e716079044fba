// Package extern holds the contracts of example.com/gpu, which it imports.
package extern

import "example.com/gpu"

var _ = gpu.Sync

// Lines that hold, silent.

//state:extern acquire example.com/gpu.Backend.NewContext
//state:extern release example.com/gpu.Context.Close
//state:extern view example.com/gpu.Context.Layer
//state:extern acquire example.com/gpu.Open
//state:extern release example.com/gpu.(*Pool).Close
//state:extern takes b example.com/gpu.(*Pool).Put
//state:extern writes dst example.com/gpu.Launch

// A package this one does not import: matched by name in importers, silent.

//state:extern acquire github.com/ollama/ollama/ml.Backend.NewContext
//state:extern release github.com/ollama/ollama/ml.Context.Close

// Lines that name nothing, with the nearest existing name.

//state:extern acquire example.com/gpu.Opne // want `//state:extern names no func Opne in example.com/gpu; did you mean Open\?`
//state:extern acquire example.com/gpu.Allocate // want `//state:extern names no func Allocate in example.com/gpu; the nearest existing name is Launch`
//state:extern release example.com/gpu.Contxt.Close // want `//state:extern names no type Contxt in example.com/gpu; did you mean Context\?`
//state:extern release example.com/gpu.Context.Clsoe // want `//state:extern names no method of Context Clsoe in example.com/gpu; did you mean Close\?`
//state:extern acquire example.com/gpu.Pool // want `example.com/gpu.Pool names type gpu.Pool, not a func`
//state:extern acquire example.com/gpu.Default // want `example.com/gpu.Default names var Default \*Pool, not a func`
//state:extern release example.com/gpu.(*Context).Close // want `Context is an interface, whose methods are named example.com/gpu.Context.Close, without \(\*...\)`

// Verbs that cannot apply.

//state:extern release example.com/gpu.Sync // want `//state:extern release applies to a method \(it releases its receiver; use //state:extern frees NAME`
//state:extern release other.com/x.Free // want `//state:extern release applies to a method, and other.com/x.Free names a plain func`
//state:extern acquire example.com/gpu.Sync // want `//state:extern acquire on example.com/gpu.Sync: it returns nothing`
//state:extern takes buf example.com/gpu.(*Pool).Put // want `//state:extern takes buf names no parameter of example.com/gpu.\(\*Pool\).Put; the parameters are b, n`
//state:extern writes n example.com/gpu.Launch // want `//state:extern writes n on example.com/gpu.Launch: parameter n has type int, which is neither a slice nor a pointer`

// Malformed lines.

//state:extern // want `//state:extern needs a directive and the full name of a func or method`
//state:extern acquire // want `//state:extern acquire needs the full name of a func or method`
//state:extern aquire example.com/gpu.Open // want `unknown directive "aquire" in //state:extern; did you mean acquire\?`
//state:extern growth example.com/gpu.Open // want `//state:extern carries a function directive`
//state:extern acquire example.com/gpu.(*Pool.Put // want `malformed full name "example.com/gpu.\(\*Pool.Put" in //state:extern`
//state:extern takes example.com/gpu.(*Pool).Put // want `//state:extern takes needs a parameter name before the full name`
//state:extern acquire b example.com/gpu.Open // want `//state:extern acquire takes no parameter names; remove "b"`
//state:extern acquire example.com/gpu.Open // want `repeated //state:extern acquire for example.com/gpu.Open \(first at line 13\); keep one`
// state:extern acquire example.com/gpu.Open // want `// state:extern has a space after //`

// Use is here so that the package has code.
//
//state:extern acquire example.com/gpu.Open // want `//state:extern is a line of its own, outside any doc comment, and here it is in the doc comment of func Use`
func Use() {
	//state:extern writes ts example.com/gpu.Context.Forward // a line inside a body holds too
}
