// Package stcleanup defines an Analyzer that reports acquired gpustate
// resources not released on every path.
//
// # Analyzer stcleanup
//
// stcleanup: report acquired resources not released on every path
//
// A call to a function marked //state:acquire (or inferred to be an
// acquirer: it returns, without releasing, the result of an acquire call,
// or a struct with a release method of its own that holds one) creates an
// obligation: on every path from the call to the function's exit, the
// resource must be released (a call of a //state:release method, or of a
// function that releases or takes that parameter) or escape: be returned
// (also inside a returned struct), stored in a field, global, map,
// sync.Map, slice or channel, captured by a closure, handed to a goroutine,
// runtime.SetFinalizer or runtime.AddCleanup, or passed to a //state:takes
// parameter (declared, or inferred: a callee that visibly stores it).
// defer x.Release(), defer func() { x.Release() }() and defer helper(x)
// count, and so does a helper that collects the release errors
// (errs = append(errs, x.Release()), errors.Join(a.Release(), b.Release())).
//
// Calls never give a resource away otherwise. A call on the resource itself
// (v.Read, v.Len, v.Spans, any method that is not its release) and a call
// whose callee's facts are unknown (an unannotated interface method, a
// function value) borrow it: the caller must still release it, so
// returning or sending the error of such a call before the release leaks
// it. A release in a deferred closure counts only where it runs on every
// path of the closure, or under a nil check or an error check (the
// error-path cleanup, if err != nil { x.Release() }).
//
// No release is needed on paths where the acquire's error result is not
// nil (err != nil, or a predicate of err such as errors.Is(err, ErrX)),
// where the variable holding the resource is nil, or that end in panic or a
// call that never returns (os.Exit, log.Fatal, t.Fatal). Paths that
// contradict what was known when the resource was acquired are not
// followed: a release under the same boolean condition as the acquire
// (if shared { s = acquire() } ... if shared { s.Release() }), or an error
// check of an error variable known nil on that path. In a select, what a
// case sends escapes on that case's path only.
//
// A result discarded at the call is a leak, and so is a value overwritten
// (in a loop, say) before its release, also when a second variable keeps
// it across the loop's runs (last = v) and is overwritten in turn, and a
// resource kept only in a field of a local struct (a named result) that is
// then cleared. Keeping only the error is a discard too, in every form
// (_, err := s.Snapshot(), if _, err := s.Branch(); err != nil,
// var _, err = acquire()): when the call succeeds nobody holds the
// resource, and the message says to assign it and release it after the
// error check. Handing both results on, f(acquire()), is not reported:
// the callee decides.
//
// Bindings (docs/DIRECTIVES.md): a //state:frees parameter, or a function
// that releases its parameter on every path, releases the argument; each
// result of //state:acquire N... is an obligation of its own; a comparison
// of a handle with its type's zero value (nil, 0, an empty struct) or a
// //state:valid method answering false proves there is nothing to release;
// an error mapper's result (//state:errmap, or a function that returns nil
// exactly when its error argument is nil) checks the call's error; a
// //state:takes NAME onsuccess callee takes the argument only where its
// error is nil (unless that error is returned or dropped unchecked); a
// releaser returned beside the resource (w, release, err := newWindow())
// releases it when called or deferred. A //state:child result needs no
// release.
//
// Temporaries and local structs: a composite literal passed straight to a
// call (Desc{Shader: sh}, &Opts{...}) is borrowed with what it holds, and
// an acquire inside it is discarded. A resource stored in a field of a
// local struct (a named result, a pointer that only holds a new struct, a
// literal assigned to a local) stays tracked through the struct: its
// release method (one with arguments too, w.release(dev)) releases it,
// returning it hands it on, clearing the field drops it.
//
// A resource returned beside a non-nil error (return b, err after
// if err != nil; return b, fmt.Errorf(...); a bare return with the named
// error known non-nil; a named result that a deferred closure sets to nil
// when the error is not nil) is not handed back: callers discard results
// on error, so it leaks through that return.
//
// The analysis errs toward silence: values merged from several paths may be
// released through any variable that held them, the result of a call may
// hold the call's arguments (r := bufio.NewReader(f): returning r keeps f),
// and an interface or type-parameter method without arguments that returns
// nothing or an error (io.Closer's Close) may be the release, as may a
// helper that calls such a method on each of its variadic arguments
// (releaseAll(xs ...io.Closer)). A call whose result is built from a part
// of a resource (its fields) does not take the resource. Nothing is
// reported in main.main: returning from it ends the process.
//
// Each leak is reported once, at the acquiring call, with the exit it leaks
// through as related information, and, where the resource never escapes and
// is not acquired in a loop, a suggested fix that inserts
// defer x.Release() after the error check. Where it is kept on another path
// (stored in a map on success), a deferred release would be wrong: the
// message asks for the release before the return that leaks it, and no
// fix is offered.
//
//	s, err := NewKVCacheState(pool, owner) // KVCacheState acquired by NewKVCacheState is not released on every path; add defer s.Release()
//	if err != nil {
//		return err
//	}
//	// fix: defer s.Release()
package stcleanup
