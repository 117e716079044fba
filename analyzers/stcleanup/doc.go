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
// nil, where the variable holding the resource is nil, or that end in panic
// or a call that never returns (os.Exit, log.Fatal, t.Fatal). A result
// discarded at the call is a leak, and so is a value overwritten (in a loop,
// say) before its release.
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
