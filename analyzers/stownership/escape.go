package stownership

import (
	"go/ast"
	"go/token"
	"go/types"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
)

// discard records, in the final pass, that the result of acquiring call
// id is dropped at the call.
func (c *cleanup) discard(id int) {
	if c.record {
		for _, j := range c.sameCall(id) {
			c.discarded[j] = true
		}
	}
}

// discharge ends the obligations held by the variables in m, where the
// event is at least as strong as the obligation requires.
func (c *cleanup) discharge(st ostate, m uint64, level int) {
	if m == 0 {
		return
	}
	for id := range c.obls {
		if st[id].live && (st[id].holders|st[id].olds)&m != 0 && level >= c.obls[id].minLevel {
			st[id] = obl{}
			if c.record && level < dispose {
				c.escaped[id] = true
			}
		}
	}
}

// refs returns the known variables referenced anywhere in e, closures included.
func (c *cleanup) refs(e ast.Node) uint64 {
	var m uint64
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if v, ok := c.info.Uses[id].(*types.Var); ok {
				m |= c.known(v)
			}
		}
		return true
	})
	return m
}

// escape evaluates e, whose value leaves the function's variables (stored,
// sent, returned): what e aliases escapes firmly, what it merely mentions
// escapes weakly.
func (c *cleanup) escape(st ostate, e ast.Expr) {
	if call, id := c.site(e); id >= 0 {
		c.call(st, call, false)
		return
	}
	a, derived := c.aliasExpr(st, e)
	c.discharge(st, a, store)
	c.discharge(st, (c.escapingRefs(e)|derived)&^a, weak)
}

// escapingRefs returns the known variables referenced in e other than as
// operands of calls (a call has already decided what it does with its
// operands) and inside function literals (see capture).
func (c *cleanup) escapingRefs(e ast.Node) uint64 {
	var m uint64
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if v, ok := c.info.Uses[n].(*types.Var); ok {
				m |= c.known(v)
			}
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			if _, kind, _ := c.o.Callee(c.info, n); kind == ownership.Conversion {
				return true
			}
			// The result of bufio.NewReader(f), gzip.NewReader(f) or
			// wrap(s) may hold its arguments (not its receiver).
			if mayWrap(c.info.TypeOf(n)) {
				for _, a := range n.Args {
					m |= c.escapingRefs(a)
				}
			}
			return false
		}
		return true
	})
	return m
}

// mayWrap reports whether a call result of type t may hold the call's
// arguments: anything but basic values and errors.
func mayWrap(t types.Type) bool {
	switch t := t.(type) {
	case nil:
		return false
	case *types.Tuple:
		for v := range t.Variables() {
			if mayWrap(v.Type()) {
				return true
			}
		}
		return false
	}
	if types.Identical(t, errorType) {
		return false
	}
	_, basic := t.Underlying().(*types.Basic)
	return !basic
}

// aliasEach returns what the values es, held together (the elements of a
// composite literal, the arguments of append), hold: a value that is a
// resource site escapes into them.
//
// In a composite literal assigned to a local variable (collecting), an
// acquiring call is noted in litSites instead: the variable holds it.
func (c *cleanup) aliasEach(st ostate, es []ast.Expr, lit bool) (m, derived uint64) {
	for _, e := range es {
		if call, id := c.site(e); id >= 0 {
			if lit && c.collecting {
				c.call(st, call, false)
				c.litSites = append(c.litSites, id)
				continue
			}
			c.escape(st, e)
			continue
		}
		em, ed := c.aliasExpr(st, e)
		m, derived = m|em, derived|ed
	}
	return m, derived
}

// aliasExpr evaluates e and returns the variables whose resources e's value
// holds: a variable, a conversion or assertion of one, or a composite
// literal (or its address) containing them. derived are the variables a
// call's result may hold part of: those at the root of an argument that is
// not the variable itself (s.rows in wrap(s.rows)).
func (c *cleanup) aliasExpr(st ostate, e ast.Expr) (m, derived uint64) {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		if v, ok := c.info.Uses[x].(*types.Var); ok {
			return c.known(v), 0
		}
		return 0, 0
	case *ast.CompositeLit:
		values := make([]ast.Expr, len(x.Elts))
		for i, elt := range x.Elts {
			if kv, ok := elt.(*ast.KeyValueExpr); ok {
				c.expr(st, kv.Key)
				elt = kv.Value
			}
			values[i] = elt
		}
		return c.aliasEach(st, values, true)
	case *ast.UnaryExpr:
		if lit, ok := ast.Unparen(x.X).(*ast.CompositeLit); ok && x.Op == token.AND {
			return c.aliasExpr(st, lit)
		}
	case *ast.TypeAssertExpr:
		return c.aliasExpr(st, x.X)
	case *ast.SliceExpr:
		// live[:n] is the same list; live[i] one of its elements, which
		// holds part of what the list holds.
		if v := c.localVar(x.X); v != nil {
			c.expr(st, x.Low)
			c.expr(st, x.High)
			c.expr(st, x.Max)
			return c.known(v), 0
		}
	case *ast.IndexExpr:
		if v := c.localVar(x.X); v != nil && isSlice(c.info.TypeOf(x.X)) {
			c.expr(st, x.Index)
			return 0, c.known(v)
		}
	case *ast.CallExpr:
		_, kind, _ := c.o.Callee(c.info, x)
		if kind == ownership.Conversion && len(x.Args) == 1 {
			return c.aliasExpr(st, x.Args[0])
		}
		if kind == ownership.Builtin && ownership.BuiltinName(c.info, x) == "append" && len(x.Args) > 0 {
			// append(list, v) holds what list and v hold: the value goes
			// where the slice goes (a local slice keeps it in the
			// function; one stored or returned lets it escape).
			collecting := c.collecting
			c.collecting = false
			defer func() { c.collecting = collecting }()
			return c.aliasEach(st, x.Args, false)
		}
		if kind != ownership.Builtin && mayWrap(c.info.TypeOf(x)) {
			c.expr(st, e)
			m, derived = c.wrapped(x.Args)
			// The view of a resource is the resource: ctx.Layer(i) holds
			// what ctx holds.
			if fn, _, recv := c.o.Callee(c.info, x); fn != nil && recv != nil && c.o.View(fn) {
				rm, rd := c.wrapped([]ast.Expr{recv})
				m, derived = m|rm, derived|rd
			}
			return m, derived
		}
	}
	c.expr(st, e)
	return 0, 0
}

// wrapped returns the variables whose resources the result of a call with
// arguments args may hold: r := bufio.NewReader(f) may hold f (and
// r := wrap(&cfg{f: f}) too), so releasing
// or returning r counts for f (only more holders: never a finding more).
// An argument that is the variable itself hands the variable on; one that
// is only a part of it (s.rows, s.buf[i:]) derives from it, which is
// enough to make the result a holder but does not keep the variable itself:
// a method that returns rows read through its receiver's fields does not
// take its receiver.
func (c *cleanup) wrapped(args []ast.Expr) (m, derived uint64) {
	for _, a := range args {
		// A temporary literal (wrap(&cfg{f: f})) is borrowed by the call,
		// but its result may hold what the literal holds.
		m |= c.litBits(a)
		v := dataflow.Root(c.info, a)
		if v == nil {
			continue
		}
		if dataflow.VarOf(c.info, a) == v {
			m |= c.known(v)
		} else {
			derived |= c.known(v)
		}
	}
	return m, derived
}

// expr evaluates e for its effects on obligations.
func (c *cleanup) expr(st ostate, e ast.Expr) {
	switch x := e.(type) {
	case nil:
		return
	case *ast.Ident, *ast.BasicLit:
		return
	case *ast.FuncLit:
		c.capture(st, x)
		return
	case *ast.CallExpr:
		c.call(st, x, false)
		return
	case *ast.UnaryExpr:
		if x.Op == token.AND {
			c.expr(st, x.X)
			c.discharge(st, c.refs(x.X), weak)
			return
		}
	case *ast.CompositeLit:
		for _, elt := range x.Elts {
			if kv, ok := elt.(*ast.KeyValueExpr); ok {
				c.expr(st, kv.Key)
				elt = kv.Value
			}
			c.escape(st, elt)
		}
		return
	case *ast.SelectorExpr:
		if sel, ok := c.info.Selections[x]; ok && sel.Kind() == types.MethodVal {
			// A method value (s.Release passed to t.Cleanup, say) keeps its receiver.
			c.expr(st, x.X)
			c.discharge(st, c.refs(x.X), weak)
			return
		}
		c.expr(st, x.X)
		return
	}
	ast.Inspect(e, func(n ast.Node) bool {
		if n == e {
			return true
		}
		if sub, ok := n.(ast.Expr); ok {
			c.expr(st, sub)
			return false
		}
		return true
	})
}

// deferLit handles defer func(...) { ... }(args): the literal runs at
// exit, in this function, so what it references does not escape. What its
// body releases on every path (see releasesEach: a release under a
// condition other than a nil or error check is not one) counts as released
// now, as defer x.Release() does, and again at each exit for whatever the
// variables hold then (a closure deferred before the acquire).
func (c *cleanup) deferLit(st ostate, call *ast.CallExpr, lit *ast.FuncLit) {
	for j, arg := range call.Args {
		c.callValueArg(st, call, j, arg)
	}
	rel, disp := c.watch(lit)
	c.discharge(st, rel, release)
	c.discharge(st, disp, dispose)
	g := &st[len(st)-1]
	g.holders |= rel
	g.errs |= disp
}

// watch indexes the local variables a deferred literal refers to and
// returns those its body releases on every path (rel) and those it may
// dispose of through an interface method (disp).
func (c *cleanup) watch(lit *ast.FuncLit) (rel, disp uint64) {
	seen := make(map[*types.Var]bool)
	ast.Inspect(lit.Body, func(n ast.Node) bool {
		id, ok := n.(*ast.Ident)
		if !ok {
			return true
		}
		v, ok := c.info.Uses[id].(*types.Var)
		if !ok || seen[v] || !c.local(v) || isBasic(v.Type()) && c.known(v) == 0 {
			return true
		}
		seen[v] = true
		switch c.releasesEach(lit.Body.List, v) {
		case release:
			rel |= c.bit(v)
		case dispose:
			disp |= c.bit(v)
		}
		return true
	})
	return rel, disp
}

// isSlice reports whether t is a slice type.
func isSlice(t types.Type) bool {
	if t == nil {
		return false
	}
	_, ok := t.Underlying().(*types.Slice)
	return ok
}

// isBasic reports whether t is a basic type (no resource can hide in it).
func isBasic(t types.Type) bool {
	_, ok := t.Underlying().(*types.Basic)
	return ok
}

// capture handles a function literal: the resources it references escape
// into the closure; those it releases count as released.
func (c *cleanup) capture(st ostate, lit *ast.FuncLit) {
	m, ok := c.free[lit]
	if !ok {
		m = c.refs(lit.Body)
		c.free[lit] = m
	}
	if m == 0 {
		return
	}
	rel, ok := c.litRel[lit]
	if !ok {
		ast.Inspect(lit.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				fn, _, recv := c.o.Callee(c.info, call)
				if fn != nil && recv != nil && c.o.Releases(fn, -1) {
					if v := dataflow.Root(c.info, recv); v != nil {
						rel |= c.known(v)
					}
				}
				if fn != nil {
					for j, arg := range call.Args {
						if c.o.Releases(fn, ownership.ParamIndex(fn, j)) {
							if v := dataflow.Root(c.info, arg); v != nil {
								rel |= c.known(v)
							}
						}
					}
				}
			}
			return true
		})
		c.litRel[lit] = rel
	}
	c.discharge(st, rel, release)
	c.discharge(st, m&^rel, weak)
}
