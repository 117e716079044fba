package stcleanup

import "github.com/gpustate/gpustate/analyzers/internal/ownership"

// SetDirectives makes every package see d as its directives until the
// returned function is called.
func SetDirectives(d ownership.Directives) (restore func()) {
	override = d
	return func() { override = nil }
}
