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
				if rangeReleases(c, rs) {
					if v := dataflow.Root(c.info, rs.X); v != nil {
						c.discharge(st, c.known(v), release)
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

// rangeReleases reports whether a range statement releases each element it
// visits: its body starts with, or directly contains, a release of the value
// variable (possibly guarded by a nil check). Such a loop releases the
// ranged-over slice as a whole (the variadic closeAll(xs ...*T) idiom).
func rangeReleases(c *cleanup, rs *ast.RangeStmt) bool {
	val := c.localVar(rs.Value)
	if val == nil {
		return false
	}
	var releases func(list []ast.Stmt) bool
	releases = func(list []ast.Stmt) bool {
		for _, s := range list {
			switch s := s.(type) {
			case *ast.ExprStmt:
				if call, ok := ast.Unparen(s.X).(*ast.CallExpr); ok && c.releasesVar(call, val) {
					return true
				}
			case *ast.AssignStmt:
				if len(s.Rhs) == 1 {
					if call, ok := ast.Unparen(s.Rhs[0]).(*ast.CallExpr); ok && c.releasesVar(call, val) {
						return true
					}
				}
			case *ast.DeferStmt:
				if c.releasesVar(s.Call, val) {
					return true
				}
			case *ast.IfStmt:
				if s.Init == nil && s.Else == nil && releases(s.Body.List) {
					if slices.Contains(dataflow.Imply(c.info, s.Cond, true).NonNil, val) {
						return true
					}
				}
			}
		}
		return false
	}
	return releases(rs.Body.List)
}

// releasesVar reports whether call releases the value of v.
func (c *cleanup) releasesVar(call *ast.CallExpr, v *types.Var) bool {
	fn, kind, recv := ownership.Callee(c.info, call)
	if kind != ownership.Static {
		return false
	}
	if recv != nil && dataflow.Root(c.info, recv) == v && c.o.Releases(fn, -1) {
		return true
	}
	for j, arg := range call.Args {
		if dataflow.Root(c.info, arg) == v && c.o.Releases(fn, ownership.ParamIndex(fn, j)) {
			return true
		}
	}
	return false
}
