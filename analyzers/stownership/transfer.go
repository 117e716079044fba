package stownership

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
)

// node applies one CFG node to the state: assignments, returns, defer,
// go and send statements, calls whose result is dropped, and the parts of
// range statements, each to the obligations it concerns.
func (c *cleanup) node(st ostate, n ast.Node) {
	switch n := n.(type) {
	case *ast.AssignStmt:
		if n.Tok == token.DEFINE || n.Tok == token.ASSIGN {
			c.assign(st, n, n.Lhs, n.Rhs)
			c.applyPending(st)
			return
		}
		for _, e := range n.Lhs {
			c.expr(st, e)
		}
		for _, e := range n.Rhs {
			c.expr(st, e)
		}
	case *ast.ValueSpec:
		lhs := make([]ast.Expr, len(n.Names))
		for i, id := range n.Names {
			lhs[i] = id
		}
		c.assign(st, n, lhs, n.Values)
		c.applyPending(st)
	case *ast.ReturnStmt:
		c.ret(st, n)
	case *ast.DeferStmt:
		if lit, ok := ast.Unparen(n.Call.Fun).(*ast.FuncLit); ok {
			c.deferLit(st, n.Call, lit)
			return
		}
		c.call(st, n.Call, false)
		if _, id := c.site(n.Call); id >= 0 {
			c.discard(id) // defer s.Snapshot(): nobody keeps the result
		}
	case *ast.GoStmt:
		c.call(st, n.Call, true)
		if _, id := c.site(n.Call); id >= 0 {
			c.discard(id)
		}
	case *ast.SendStmt:
		c.expr(st, n.Chan)
		if c.commSend[n] {
			c.expr(st, n.Value) // sent in its case's block (see block)
			return
		}
		c.escape(st, n.Value)
	case *ast.ExprStmt:
		if call, id := c.site(n.X); id >= 0 {
			c.call(st, call, false)
			c.discard(id)
			return
		}
		c.expr(st, n.X)
	case *ast.IncDecStmt:
		c.expr(st, n.X)
	case ast.Expr:
		if rs := c.rangeOf[n]; rs != nil {
			if n == rs.X {
				c.expr(st, n)
				if level := c.rangeReleases(rs); level >= 0 {
					if v := dataflow.Root(c.info, rs.X); v != nil {
						c.discharge(st, c.known(v), level)
					}
				}
				return
			}
			if rs.Tok == token.DEFINE || rs.Tok == token.ASSIGN {
				if v := c.localVar(n); v != nil {
					c.kill(st, c.known(v), n)
					return
				}
			}
		}
		c.expr(st, n)
	}
}

// rangeReleases returns how firmly a range statement discharges what it
// ranges over, or -1: release when its body releases each element it
// visits (the variadic closeAll(xs ...*T) idiom), store when it calls on
// each an interface or type-parameter method that may be the release
// (releaseAll(xs ...io.Closer), releaseAll[T Releaser](xs ...T)).
func (c *cleanup) rangeReleases(rs *ast.RangeStmt) int {
	val := c.localVar(rs.Value)
	if val == nil {
		return -1
	}
	return c.releasesEach(rs.Body.List, val)
}

// releasesEach returns the firmest discharge of val by the statements of
// list themselves (not by nested blocks other than a nil check), or -1.
func (c *cleanup) releasesEach(list []ast.Stmt, val *types.Var) int {
	level := -1
	for _, s := range list {
		level = max(level, c.stmtReleases(s, val))
	}
	return level
}

// stmtReleases returns how firmly statement s discharges val, or -1: a
// release call in an expression statement, an assignment or a return
// (also inside another call's arguments, as in errs = append(errs,
// x.Release()) or errors.Join(a.Release(), b.Release())), deferred, in the
// init of an if, on each element of val in a range over it, or in the body
// of an if that checks val is not nil or
// tests an error (the error-path cleanup of a deferred closure, if err !=
// nil { x.Release() }: the other path keeps the resource).
func (c *cleanup) stmtReleases(s ast.Stmt, val *types.Var) int {
	switch s := s.(type) {
	case *ast.ExprStmt:
		return c.exprReleases(s.X, val)
	case *ast.AssignStmt:
		level := -1
		for _, e := range s.Rhs {
			level = max(level, c.exprReleases(e, val))
		}
		return level
	case *ast.ReturnStmt:
		level := -1
		for _, e := range s.Results {
			level = max(level, c.exprReleases(e, val))
		}
		return level
	case *ast.DeferStmt:
		return c.releasesVar(s.Call, val)
	case *ast.RangeStmt:
		// for _, b := range val { b.s.Release() }: each element released.
		if id, ok := s.Value.(*ast.Ident); ok && dataflow.Root(c.info, s.X) == val {
			if elem, ok := c.info.ObjectOf(id).(*types.Var); ok {
				return c.releasesEach(s.Body.List, elem)
			}
		}
	case *ast.IfStmt:
		if s.Init != nil {
			return c.stmtReleases(s.Init, val)
		}
		if s.Else == nil && (slices.Contains(dataflow.ImplyWith(c.info, s.Cond, true, c.hooks).NonNil, val) || c.testsError(s.Cond) || c.onceGuard(s)) {
			return c.releasesEach(s.Body.List, val)
		}
	}
	return -1
}

// exprReleases returns the firmest discharge of val by a call in e, outside
// function literals, or -1.
func (c *cleanup) exprReleases(e ast.Expr, val *types.Var) int {
	level := -1
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			level = max(level, c.releasesVar(n, val))
		}
		return true
	})
	return level
}

// onceGuard reports whether s is the guard of a release done once,
// if !closed { closed = true; x.Close() }: its condition tests a boolean
// variable that its body assigns.
func (c *cleanup) onceGuard(s *ast.IfStmt) bool {
	cond := ast.Unparen(s.Cond)
	if u, ok := cond.(*ast.UnaryExpr); ok && u.Op == token.NOT {
		cond = ast.Unparen(u.X)
	}
	flag := dataflow.VarOf(c.info, cond)
	if flag == nil {
		return false
	}
	for _, st := range s.Body.List {
		if as, ok := st.(*ast.AssignStmt); ok {
			for _, l := range as.Lhs {
				if dataflow.VarOf(c.info, l) == flag {
					return true
				}
			}
		}
	}
	return false
}

// testsError reports whether cond compares a variable of type error.
func (c *cleanup) testsError(cond ast.Expr) bool {
	found := false
	ast.Inspect(cond, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if v, ok := c.info.Uses[id].(*types.Var); ok && types.Identical(v.Type(), c.errType) {
				found = true
			}
		}
		return !found
	})
	return found
}

// releasesVar returns how firmly call discharges the value of v, or -1:
// release for a release of v, store for a call on v of an interface or
// type-parameter method that may be the release (see mayRelease).
// A call on v that does neither borrows it: -1.
func (c *cleanup) releasesVar(call *ast.CallExpr, v *types.Var) int {
	fn, kind, recv := c.o.Callee(c.info, call)
	if fn == nil {
		return -1
	}
	if kind == ownership.Dynamic && recv != nil && dataflow.Root(c.info, recv) == v && mayRelease(c.o, fn) {
		return dispose
	}
	if recv != nil && dataflow.Root(c.info, recv) == v && c.o.Releases(fn, -1) {
		return release
	}
	for j, arg := range call.Args {
		if dataflow.Root(c.info, arg) == v && c.o.Releases(fn, ownership.ParamIndex(fn, j)) {
			return release
		}
	}
	return -1
}
