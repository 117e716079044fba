package stownership

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
)

// mayRelease reports whether a dynamic call of method fn could be a
// release: fn carries no directive of its own, takes no arguments, and
// returns nothing or an error, as Close, Release and Free do. A method with
// arguments or another result (Len() int, Forward(x)) only borrows its
// receiver.
func mayRelease(o *ownership.Oracle, fn *types.Func) bool {
	return fn != nil && o.Dir(fn) == nil && ownership.MayDispose(fn)
}

// disposable reports whether a parameter of type t may be disposed of by
// calling a method of its interface or type-parameter type: t is an
// interface or a type parameter, or a slice of one (a variadic helper).
func disposable(t types.Type) bool {
	if s, ok := t.Underlying().(*types.Slice); ok {
		t = s.Elem()
	}
	if _, ok := types.Unalias(t).(*types.TypeParam); ok {
		return true
	}
	return types.IsInterface(t)
}

// call evaluates a call: releases and takers end obligations, unknown
// callees keep what they are given, and an acquiring call used as an
// operand whose value nobody keeps is discarded. In a go statement
// everything the call is given escapes.
func (c *cleanup) call(st ostate, call *ast.CallExpr, goStmt bool) {
	fn, kind, recv := c.o.Callee(c.info, call)
	switch kind {
	case ownership.Conversion:
		for _, a := range call.Args {
			c.expr(st, a)
		}
		return
	case ownership.Builtin:
		c.builtin(st, call)
		return
	}
	if recv != nil {
		c.receiver(st, fn, kind, recv, goStmt)
	} else if kind == ownership.Dynamic {
		c.expr(st, call.Fun)
		// release() or defer release(), the releaser returned beside a
		// resource: only releasers hold resources among func values.
		if v := c.localVar(call.Fun); v != nil && !goStmt && isFunc(v.Type()) {
			c.discharge(st, c.known(v), release)
		}
	}
	for j, arg := range call.Args {
		c.argument(st, call, fn, kind, j, arg, goStmt)
	}
}

// builtin evaluates a call of a builtin: what append adds to a slice
// escapes into it; every other builtin only reads its operands.
func (c *cleanup) builtin(st ostate, call *ast.CallExpr) {
	if ownership.BuiltinName(c.info, call) == "append" && len(call.Args) > 0 {
		c.expr(st, call.Args[0])
		for _, a := range call.Args[1:] {
			c.escape(st, a)
		}
		return
	}
	for _, a := range call.Args {
		c.expr(st, a)
	}
}

// receiver evaluates a method call's receiver: a release or a taker ends
// its obligations, an interface method may be the release, and in a go
// statement the receiver escapes. A receiver that is itself an acquiring
// call is evaluated first, and discarded unless the method releases it.
func (c *cleanup) receiver(st ostate, fn *types.Func, kind ownership.CalleeKind, recv ast.Expr, goStmt bool) {
	if rc, id := c.site(recv); id >= 0 {
		c.call(st, rc, false)
		if !(kind == ownership.Static && c.o.Releases(fn, -1)) && kind != ownership.Dynamic && !goStmt {
			c.discard(id)
		}
		return
	}
	c.expr(st, recv)
	m := c.rootBits(recv)
	switch {
	case goStmt:
		c.discharge(st, c.refs(recv), weak)
	case fn != nil && c.o.Releases(fn, -1):
		// A release: declared, inferred, or an interface method's
		// directive (Context.Close).
		c.discharge(st, m, release)
	case fn != nil && c.o.Takes(fn, -1):
		c.discharge(st, m, store)
	case kind == ownership.Dynamic && mayRelease(c.o, fn):
		// An interface or type-parameter method without arguments
		// (io.Closer's Close, a generic helper's x.Release()) may be the
		// release.
		c.discharge(st, m, dispose)
	}
	// Any other method borrows its receiver: v.Read, v.Len, an
	// unannotated interface method (docs/analyzers/stcleanup.md).
}

// argument evaluates the j-th argument of a call: what the callee releases,
// disposes of or takes ends there; an unknown callee keeps what it is
// given; an acquiring call passed straight in is discarded unless the
// callee takes it.
func (c *cleanup) argument(st ostate, call *ast.CallExpr, fn *types.Func, kind ownership.CalleeKind, j int, arg ast.Expr, goStmt bool) {
	if goStmt {
		c.escape(st, arg)
		return
	}
	if ac, id := c.site(arg); id >= 0 {
		c.call(st, ac, false)
		// f(Acquire()) hands f the result and, for an acquirer with an
		// error result, the error too: f decides (a test helper that
		// extracts the error, say). Only a lone result is discarded.
		if _, tuple := c.info.TypeOf(ac).(*types.Tuple); kind == ownership.Static && !tuple && !c.o.Takes(fn, ownership.ParamIndex(fn, j)) {
			c.discard(id)
		}
		return
	}
	if fn == nil {
		c.callValueArg(st, call, j, arg)
		return
	}
	pi := ownership.ParamIndex(fn, j)
	switch {
	case c.o.Releases(fn, pi):
		c.expr(st, arg)
		c.discharge(st, c.rootBits(arg), release)
	case c.o.Disposes(fn, pi):
		c.expr(st, arg)
		c.discharge(st, c.rootBits(arg), dispose)
	case c.o.Takes(fn, pi):
		c.expr(st, arg)
		c.discharge(st, c.rootBits(arg), store)
	case c.o.TakesOnSuccess(fn, pi):
		c.expr(st, arg)
		if ev := c.onSuccess[call]; ev != nil {
			c.pending = append(c.pending, pendingTake{m: c.rootBits(arg), err: ev})
		} else {
			// The call's error is not kept in a variable (returned or
			// passed on): assume it succeeds.
			c.discharge(st, c.rootBits(arg), store)
		}
	default:
		c.borrow(st, arg)
	}
}

// borrow evaluates an argument the callee borrows: a composite literal
// (Desc{Shader: sh}, &Opts{...}) passed straight to the call is a
// temporary, so what it holds is borrowed with it, not stored
// (docs/DIRECTIVES.md); an acquiring call inside it is discarded.
func (c *cleanup) borrow(st ostate, arg ast.Expr) {
	x := ast.Unparen(arg)
	if u, ok := x.(*ast.UnaryExpr); ok && u.Op == token.AND {
		x = ast.Unparen(u.X)
	}
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		c.expr(st, arg)
		return
	}
	for _, elt := range lit.Elts {
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			c.expr(st, kv.Key)
			elt = kv.Value
		}
		if call, id := c.site(elt); id >= 0 {
			c.call(st, call, false)
			c.discard(id)
			continue
		}
		c.borrow(st, elt)
	}
}

// isFunc reports whether t is a func type.
func isFunc(t types.Type) bool {
	_, ok := t.Underlying().(*types.Signature)
	return ok
}

// callValueArg evaluates the j-th argument of a call of a function value.
// A function value's facts are unknown: it borrows what it is given, and
// the caller keeps the obligation (docs/analyzers/stcleanup.md). A
// literal called on the spot (defer func(s *T) { s.Release() }(s)) is
// seen through: the discharge its body makes of the parameter on every
// path is the call's.
func (c *cleanup) callValueArg(st ostate, call *ast.CallExpr, j int, arg ast.Expr) {
	c.borrow(st, arg)
	lit, ok := ast.Unparen(call.Fun).(*ast.FuncLit)
	if !ok {
		return
	}
	sig, _ := c.info.TypeOf(lit).(*types.Signature)
	if sig == nil || j >= sig.Params().Len() || sig.Variadic() && j >= sig.Params().Len()-1 {
		return
	}
	if level := c.releasesEach(lit.Body.List, sig.Params().At(j)); level >= 0 {
		c.discharge(st, c.rootBits(arg), level)
	}
}

// ret handles a return statement: returned values escape (a resource
// returned as the first result makes the function an acquirer), and every
// obligation still live leaks through this exit.
func (c *cleanup) ret(st ostate, r *ast.ReturnStmt) {
	// A resource returned beside a non-nil error is not handed back:
	// callers discard the results on error (docs/DIRECTIVES.md).
	beside := c.besideError(st, r)
	saved := make(map[int]obl, len(beside))
	for _, id := range beside {
		saved[id] = st[id]
	}
	c.besideNow = beside
	c.retResults(st, r)
	c.besideNow = nil
	for id, ob := range saved {
		st[id] = ob
		if c.record {
			c.besideAt[id] = r
		}
	}
	for id := range c.obls {
		if st[id].live && st[id].taken != 0 {
			// Given to a takes-onsuccess callee whose error is
			// returned unchecked: the caller's caller decides.
			st[id] = obl{}
		}
	}
	c.retExit(st, r)
}

// besideError returns the acquire obligations, live at return r, that r
// hands back beside an error known non-nil there (an error variable proved
// non-nil on every path to r, or a value that cannot be nil:
// fmt.Errorf(...), errors.New(...), &E{...}, a package's ErrX), or in a
// named result that a deferred closure sets to nil when the error is not
// nil and the error is not known nil.
func (c *cleanup) besideError(st ostate, r *ast.ReturnStmt) []int {
	res := c.in.Sig.Results()
	n := res.Len()
	if n < 2 || !types.Identical(res.At(n-1).Type(), errorType) {
		return nil
	}
	var errVar *types.Var
	always, isNil := false, false
	switch {
	case len(r.Results) == 0:
		if len(c.in.Results) == n {
			errVar = c.in.Results[n-1]
		}
	case len(r.Results) == n:
		e := r.Results[n-1]
		if v := dataflow.VarOf(c.info, e); v != nil && c.local(v) {
			errVar = v
		} else {
			always = c.nonNilError(e)
			isNil = dataflow.IsNil(c.info, e)
		}
	default:
		return nil
	}
	var b uint64
	if errVar != nil {
		b = c.known(errVar)
	}
	// What result i hands back.
	held := func(i int) uint64 {
		if len(r.Results) == 0 {
			return c.known(c.in.Results[i])
		}
		return c.refs(r.Results[i])
	}
	var all, dropped uint64
	for i := range n - 1 {
		all |= held(i)
		if slices.Contains(c.dropOnErr, i) {
			dropped |= held(i)
		}
	}
	var ids []int
	for id, ob := range c.obls {
		if ob.call == nil || !st[id].live {
			continue
		}
		h := st[id].holders | st[id].olds
		switch {
		case h&all != 0 && (always || st[id].nonnils&b != 0):
			ids = append(ids, id)
		case h&dropped != 0 && !isNil && (b == 0 || st[id].nils&b == 0):
			ids = append(ids, id)
		}
	}
	return ids
}

// nonNilError reports whether e is an error value that cannot be nil.
func (c *cleanup) nonNilError(e ast.Expr) bool {
	switch x := ast.Unparen(e).(type) {
	case *ast.UnaryExpr:
		_, ok := ast.Unparen(x.X).(*ast.CompositeLit)
		return x.Op == token.AND && ok
	case *ast.CompositeLit:
		return true
	case *ast.CallExpr:
		fn, kind, _ := c.o.Callee(c.info, x)
		if kind != ownership.Static || fn == nil || fn.Pkg() == nil {
			return false
		}
		name := fn.Pkg().Path() + "." + fn.Name()
		return name == "fmt.Errorf" || name == "errors.New"
	case *ast.Ident, *ast.SelectorExpr:
		// A package's sentinel error, ErrClosed.
		var id *ast.Ident
		if sel, ok := x.(*ast.SelectorExpr); ok {
			id = sel.Sel
		} else {
			id = x.(*ast.Ident)
		}
		v, ok := c.info.Uses[id].(*types.Var)
		return ok && v.Pkg() != nil && v.Parent() == v.Pkg().Scope() && strings.HasPrefix(strings.ToLower(v.Name()), "err")
	}
	return false
}

// retResults evaluates the results of a return: returned values escape,
// and a resource returned as the first result makes the function an
// acquirer.
func (c *cleanup) retResults(st ostate, r *ast.ReturnStmt) {
	if len(r.Results) == 0 {
		var m uint64
		for i, v := range c.in.Results {
			b := c.known(v)
			c.noteAcquirer(st, i, b, v.Type())
			m |= b
		}
		c.discharge(st, m, store)
	} else if len(r.Results) == 1 && c.in.Sig.Results().Len() > 1 {
		if call, id := c.site(r.Results[0]); id >= 0 {
			c.call(st, call, false)
			// return CreateImage(dev): what it acquires, this acquires.
			for _, j := range c.sameCall(id) {
				c.noteAcquirerCall(c.obls[j].result)
			}
		} else {
			c.escape(st, r.Results[0])
		}
	} else {
		for i, e := range r.Results {
			if call, id := c.site(e); id >= 0 {
				c.call(st, call, false)
				c.noteAcquirerCall(i)
				continue
			}
			if v := dataflow.VarOf(c.info, e); v != nil {
				c.noteAcquirer(st, i, c.known(v), v.Type())
			} else if i == 0 {
				c.noteAcquirer(st, i, c.litBits(e), c.info.TypeOf(e))
				// return &batch{ctx: b.NewContext()}: the struct
				// is acquired when it has a release method.
				if c.litHasSite(e) && c.wrapperType(c.info.TypeOf(e)) {
					c.noteAcquirerCall(0)
				}
			}
			c.escape(st, e)
		}
		c.noteReleaser(st, r)
	}
}

// retExit ends the function at return r: deferred closures run, and what
// is still live leaks through r.
func (c *cleanup) retExit(st ostate, r *ast.ReturnStmt) {
	// Deferred closures see what the variables hold at exit.
	c.discharge(st, st[len(st)-1].holders, release)
	c.discharge(st, st[len(st)-1].errs, dispose)
	if !c.record {
		return
	}
	for id := range c.obls {
		if !st[id].live {
			continue
		}
		if c.obls[id].call == nil {
			c.seedFail[id] = true
			continue
		}
		if prev := c.exitAt[id]; prev == nil || r.Pos() < prev.Pos() {
			c.exitAt[id] = r
		}
	}
}

// noteAcquirer records that the function returns, as its first result, a
// value of type t held by the variables m: it is an acquirer when they hold
// an outstanding resource of type t, or t is a struct with a release
// method of its own that wraps one (return &conn{s: s}, nil: the struct is
// acquired, docs/analyzers/stcleanup.md), not a wrapper that merely may
// hold one, such as a bufio.Writer over a file.
//
// Result i > 0 is acquired too when it returns an outstanding resource of
// its own type (return img, mem, nil after vk.CreateImage): the function
// acquires several results (//state:acquire 0 1).
func (c *cleanup) noteAcquirer(st ostate, i int, m uint64, t types.Type) {
	if !c.record || m == 0 || t == nil {
		return
	}
	wrapper := i == 0 && c.wrapperType(t)
	for id := range c.obls {
		ob := c.obls[id]
		if slices.Contains(c.besideNow, id) {
			continue
		}
		if st[id].live && st[id].holders&m != 0 && ob.call != nil && (wrapper || types.Identical(t, resultAt(c.info, ob.call, ob.result))) {
			c.noteAcquirerCall(i)
		}
	}
}

// wrapperType reports whether t is a named struct type (or a pointer to
// one) that has a release method.
func (c *cleanup) wrapperType(t types.Type) bool {
	u := types.Unalias(t)
	if p, ok := u.(*types.Pointer); ok {
		u = types.Unalias(p.Elem())
	}
	n, ok := u.(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return false
	}
	if _, ok := n.Underlying().(*types.Struct); !ok {
		return false
	}
	return c.o.ReleaseMethod(t) != ""
}

// litBits returns the known variables a composite literal (or its address)
// holds among its elements, nested literals included; 0 for any other
// expression.
func (c *cleanup) litBits(e ast.Expr) uint64 {
	x := ast.Unparen(e)
	if u, ok := x.(*ast.UnaryExpr); ok && u.Op == token.AND {
		x = ast.Unparen(u.X)
	}
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		return 0
	}
	var m uint64
	for _, elt := range lit.Elts {
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			elt = kv.Value
		}
		if v := dataflow.VarOf(c.info, elt); v != nil {
			m |= c.known(v)
		} else {
			m |= c.litBits(elt)
		}
	}
	return m
}

// litHasSite reports whether e is a composite literal (or its address)
// with an acquiring call among its elements, nested literals included.
func (c *cleanup) litHasSite(e ast.Expr) bool {
	x := ast.Unparen(e)
	if u, ok := x.(*ast.UnaryExpr); ok && u.Op == token.AND {
		x = ast.Unparen(u.X)
	}
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		return false
	}
	for _, elt := range lit.Elts {
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			elt = kv.Value
		}
		if _, id := c.site(elt); id >= 0 || c.litHasSite(elt) {
			return true
		}
	}
	return false
}

// resultAt returns the type of result i of call.
func resultAt(info *types.Info, call *ast.CallExpr, i int) types.Type {
	t := info.TypeOf(call)
	if tup, ok := t.(*types.Tuple); ok && tup.Len() > 0 {
		t = tup.At(min(i, tup.Len()-1)).Type()
	}
	return t
}

// noteReleaser records, in the final pass, that return r hands back, beside
// its first result, a func that releases it: a literal whose body releases
// the variable returned first (return w, func() { w.Close() }, nil), or
// that variable's release method value (return w, w.Close, nil).
func (c *cleanup) noteReleaser(st ostate, r *ast.ReturnStmt) {
	if !c.record || len(r.Results) < 2 {
		return
	}
	v := dataflow.VarOf(c.info, r.Results[0])
	if v == nil || !c.local(v) {
		return
	}
	for i, e := range r.Results[1:] {
		switch x := ast.Unparen(e).(type) {
		case *ast.FuncLit:
			if sig, ok := c.info.TypeOf(x).(*types.Signature); ok && sig.Params().Len() == 0 && c.releasesEach(x.Body.List, v) == release {
				c.releaser = i + 2
			}
		case *ast.SelectorExpr:
			if sel, ok := c.info.Selections[x]; ok && sel.Kind() == types.MethodVal && dataflow.VarOf(c.info, x.X) == v {
				if fn, ok := sel.Obj().(*types.Func); ok && c.o.Releases(fn, -1) {
					c.releaser = i + 2
				}
			}
		}
	}
}

// noteAcquirerCall records, in the final pass, that the function returns
// an acquired resource as its result i.
func (c *cleanup) noteAcquirerCall(i int) {
	switch {
	case !c.record:
	case i == 0:
		c.acquirer = true
	case !slices.Contains(c.acquired, i):
		c.acquired = append(c.acquired, i)
	}
}
