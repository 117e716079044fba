package stcleanup

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
	case *ast.ReturnStmt:
		c.ret(st, n)
	case *ast.DeferStmt:
		c.call(st, n.Call, false)
		if lit, ok := ast.Unparen(n.Call.Fun).(*ast.FuncLit); ok {
			// The closure runs at exit and sees the variables' values
			// then: whatever they hold when the function returns is
			// released (or kept) by it.
			st[len(st)-1].holders |= c.watch(lit)
		}
	case *ast.GoStmt:
		c.call(st, n.Call, true)
	case *ast.SendStmt:
		c.expr(st, n.Chan)
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
// release call as a statement, on the right of an assignment, deferred, in
// the init of an if, or in the body of an if that checks val is not nil.
func (c *cleanup) stmtReleases(s ast.Stmt, val *types.Var) int {
	switch s := s.(type) {
	case *ast.ExprStmt:
		if call, ok := ast.Unparen(s.X).(*ast.CallExpr); ok {
			return c.releasesVar(call, val)
		}
	case *ast.AssignStmt:
		if len(s.Rhs) == 1 {
			if call, ok := ast.Unparen(s.Rhs[0]).(*ast.CallExpr); ok {
				return c.releasesVar(call, val)
			}
		}
	case *ast.DeferStmt:
		return c.releasesVar(s.Call, val)
	case *ast.IfStmt:
		if s.Init != nil {
			return c.stmtReleases(s.Init, val)
		}
		if s.Else == nil && slices.Contains(dataflow.Imply(c.info, s.Cond, true).NonNil, val) {
			return c.releasesEach(s.Body.List, val)
		}
	}
	return -1
}

// releasesVar returns how firmly call discharges the value of v, or -1:
// release for a release of v, store for a call on v of an interface or
// type-parameter method that may be the release (see mayRelease).
func (c *cleanup) releasesVar(call *ast.CallExpr, v *types.Var) int {
	fn, kind, recv := c.o.Callee(c.info, call)
	if kind == ownership.Dynamic && recv != nil && dataflow.Root(c.info, recv) == v && mayRelease(fn) {
		return disposeLevel(fn)
	}
	if kind != ownership.Static {
		return -1
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
