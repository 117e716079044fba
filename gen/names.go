package gen

import "github.com/gpustate/gpustate/contract"

// Types returns the types generated for contract c: TState first, then
// TSnapshot (with an immutable snapshot) and TSpans.
func Types(c *contract.Contract) []string {
	out := []string{c.Type + "State"}
	if snapshot(c) {
		out = append(out, c.Type+"Snapshot")
	}
	return append(out, c.Type+"Spans")
}
