// Package streleased defines an Analyzer that reports uses of a gpustate
// resource after it was released.
//
// # Analyzer streleased
//
// streleased: report uses of a resource after its release
//
// A variable whose value was released (by a //state:release method, a
// //state:frees parameter such as DestroyImage(dev, img), or a function that
// releases that parameter on every path) on every path to a later use of
// it is reported at that use: a method call, a field read, an argument. A
// //state:child result assigned once to a variable (cmd := pool.Alloc()) is
// released with its parent: using it after the parent's release is
// reported too. Release helpers need no directive: releaseAll(a, b) releases
// a and b whether releaseAll takes ...*T, ...io.Closer-like interfaces or
// ...T over a type parameter, as long as it calls on every path a method of
// the parameter's type that is the argument's release method (xs... hands
// over the elements, not the slice, and is not a release of it). A copy of
// a handle is the handle: after w := v, releasing v releases w and the other
// way round, when each of them is assigned only there (copying a released
// handle is not a use; using the copy is). Every other call on a released handle returns
// state.ErrReleased at run time; the analyzer finds it at compile time.
//
// Releasing again is allowed (Release is idempotent), and so are comparisons
// with nil and assigning the variable a new value. A release in a defer
// statement happens at the function's exit and releases nothing before it.
// Uses inside function literals are not followed: the literal may run
// before the release. Test files are not checked: tests use released
// handles on purpose, to see every call answer state.ErrReleased.
package streleased
