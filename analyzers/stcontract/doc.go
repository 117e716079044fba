// Package stcontract defines an Analyzer that reports malformed or
// contradictory gpustate contracts and misused function directives.
//
// # Analyzer stcontract
//
// stcontract: report malformed or contradictory //state: contracts
//
// A state type is a named struct type whose doc comment holds
// //state:contract followed by directives that complete the contract:
//
//	// KVCache holds one session's keys and values.
//	//
//	//state:contract purpose="decoder KV cache"
//	//state:growth append bound=MaxTokens
//	//state:owner session
//	//state:branch isolated merge=fastforward
//	//state:rollback descendants=invalidate
//	type KVCache struct {
//		Keys   []float32 `state:"width=128"`
//		Values []float32 `state:"width=128"`
//	}
//
// stcontract reports, at the line of the directive at fault: an unknown verb
// or key (with the nearest valid one: "did you mean branch?"), a bad value, a
// repeated directive, a claim of durability (durable, crash-safe: runtime
// state and its checkpoints do not survive the process), reconstructable
// retention without a checkpoint line, rollback or checkpoint with snapshot
// none, an isolated branch without a merge decision, a bound that is not
// a positive integer constant expression (evaluated in the scope of its
// file, imports included: bound=dims.Rows), and a bound at which the state
// would exceed 1<<48 bytes, more than a 48-bit address space maps, so that
// no device or host can hold it; and a //state:share prefix key=FIELD
// line whose mode is not prefix, whose key is missing, names no field
// (with the nearest field name), or names a field that is not one sized
// integer (int8 to int64, uint8 to uint64) per row, or that is written on
// a mutable or window state. A missing growth or owner line is reported at the
// //state:contract line, a field that is not a slice of fixed-size elements
// at the field, a width that is not a positive integer constant (evaluated
// like a bound) at the tag. A comment that
// looks like a directive but is not one ("// state:growth" with a space) is
// reported, since gofmt treats it as prose and the contract silently loses a
// line; prose that only mentions state ("// state: the hidden state") is not.
//
// Each fault is reported once: a line rejected at its own position (a
// look-alike, a misspelt verb, a claim of durability) is not reported again
// as missing (no "needs a //state:checkpoint line" for a checkpoint line
// that was written but rejected).
//
// It also reports function directives that cannot apply: release, mutates,
// appends or view on a plain func, takes or writes naming no parameter,
// writes on a parameter that is neither a slice nor a pointer, acquire on a
// func with no result, and any directive outside the doc comment of a type,
// a func or a method of an interface type.
//
// The same holds for //state:extern lines, the contracts of code the user
// cannot edit (//state:extern acquire example.com/gpu.Backend.NewContext):
// an unknown directive, a malformed full name, a line inside a doc comment,
// a repeated line; and, where the named package is among the package's
// dependencies, a name that does not exist (with the nearest existing
// name) and a directive that cannot apply to what it names.
//
// Where the fix is mechanical (a misspelt verb, key or value; a missing
// merge=unsupported; the space in "// state:") the diagnostic carries a
// suggested fix.
package stcontract
