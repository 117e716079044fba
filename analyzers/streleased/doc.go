// Package streleased defines an Analyzer that reports uses of a gpustate
// resource after it was released.
//
// # Analyzer streleased
//
// streleased: report uses of a resource after its release
//
// A variable whose value was released (by a //state:release method, or by
// a function that releases that parameter on every path) on every path to
// a later use of it is reported at that use: a method call, a field read,
// an argument. Every other call on a released handle returns
// state.ErrReleased at run time; the analyzer finds it at compile time.
//
// Releasing again is allowed (Release is idempotent), and so are comparisons
// with nil and assigning the variable a new value. A release in a defer
// statement happens at the function's exit and releases nothing before it.
// Uses inside function literals are not followed: the literal may run
// before the release. Test files are not checked: tests use released
// handles on purpose, to see every call answer state.ErrReleased.
package streleased
