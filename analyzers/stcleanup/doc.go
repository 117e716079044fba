// Package stcleanup defines an Analyzer that reports acquired gpustate
// resources not released on every path.
//
// # Analyzer stcleanup
//
// stcleanup: report acquired resources not released on every path
//
// A call to a function marked //state:acquire (or inferred to be an
// acquirer: it returns, without releasing, the result of an acquire call)
// creates an obligation: on every path from the call to the function's exit,
// the resource must be released (a call of a //state:release method, or of
// a function that releases or takes that parameter) or escape: be returned
// (also inside a returned struct), stored in a field, global, map, slice or
// channel, captured by a closure, or passed to a //state:takes parameter.
// defer x.Release(), defer func() { x.Release() }() and defer helper(x)
// count.
//
// No release is needed on paths where the acquire's error result is not
// nil (err != nil, or a predicate of err such as errors.Is(err, ErrX)),
// where the variable holding the resource is nil, or that end in panic or a
// call that never returns (os.Exit, log.Fatal, t.Fatal). Paths that
// contradict what was known when the resource was acquired are not
// followed: a release under the same boolean condition as the acquire
// (if shared { s = acquire() } ... if shared { s.Release() }), or an error
// check of an error variable known nil on that path.
//
// A result discarded at the call is a leak, and so is a value overwritten
// (in a loop, say) before its release. Keeping only the error,
// _, err := acquire(), is not reported: the caller expects the call to
// fail; nor is handing both results on, f(acquire()).
//
// The analysis errs toward silence: values merged from several paths may be
// released through any variable that held them, the result of a call may
// hold the call's arguments (r := bufio.NewReader(f): returning r keeps f),
// and a resource handed to code it cannot see (a function value, an
// interface method without arguments, a goroutine) counts as released, as
// does one handed to a helper that calls such a method on each of its
// variadic arguments (releaseAll(xs ...io.Closer)). A call whose result is
// built from a part of a resource (its fields: r, err := v.Read()) does not
// take the resource: returning that call's error before the release leaks.
// Nothing is reported in main.main: returning from it ends the process.
//
// Each leak is reported once, at the acquiring call, with the exit it leaks
// through as related information, and, where the resource never escapes and
// is not acquired in a loop, a suggested fix that inserts
// defer x.Release() after the error check:
//
//	s, err := NewKVCacheState(pool, owner) // KVCacheState acquired by NewKVCacheState is not released on every path; add defer s.Release()
//	if err != nil {
//		return err
//	}
//	// fix: defer s.Release()
package stcleanup
