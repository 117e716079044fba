package stownership

import (
	"go/ast"
	"go/types"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
)

// local reports whether v is a variable of the analyzed function (a
// parameter, result or local), as opposed to a global, a field or a free
// variable of an enclosing function.
func (c *cleanup) local(v *types.Var) bool {
	if v == nil || v.IsField() || v.Pkg() == nil || v.Parent() == v.Pkg().Scope() {
		return false
	}
	return c.in.Node.Pos() <= v.Pos() && v.Pos() < c.in.Node.End()
}

// bit returns the bit of local variable v, indexing it on first use; 0 when
// v is not local or the function has too many tracked variables.
func (c *cleanup) bit(v *types.Var) uint64 {
	if !c.local(v) {
		return 0
	}
	return c.index(v)
}

// condBit returns the bit of a boolean variable tested by a condition. Unlike
// bit, it accepts variables of enclosing functions and globals: the function
// does not assign them (that would make them local), so what one branch
// proved about them holds at the next test, unless a call changes them;
// assuming it does not errs toward silence.
func (c *cleanup) condBit(v *types.Var) uint64 {
	if v.IsField() {
		return 0
	}
	return c.index(v)
}

// index returns the bit of v, indexing it on first use (and noting it in
// errVars when it is an error); 0 when the function has too many tracked
// variables.
func (c *cleanup) index(v *types.Var) uint64 {
	i, ok := c.vars[v]
	if !ok {
		if c.nvars == 64 {
			c.overflow = true
			return 0
		}
		i = c.nvars
		c.vars[v] = i
		c.nvars++
		if types.Identical(v.Type(), c.errType) {
			c.errVars |= 1 << i
		}
	}
	return 1 << i
}

// known returns v's bit if v is already indexed (so may hold something).
func (c *cleanup) known(v *types.Var) uint64 {
	if i, ok := c.vars[v]; ok {
		return 1 << i
	}
	return 0
}

// localVar returns the local variable e denotes, or nil.
func (c *cleanup) localVar(e ast.Expr) *types.Var {
	v := dataflow.VarOf(c.info, e)
	if v != nil && c.local(v) {
		return v
	}
	return nil
}

// isBlank reports whether e is the blank identifier.
func isBlank(e ast.Expr) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && id.Name == "_"
}

// site returns the obligation of an acquiring call e, or -1. A view of an
// acquiring call (b.NewContext().Layer(i)) is the same resource
// (docs/DIRECTIVES.md): its obligation is the call's.
func (c *cleanup) site(e ast.Expr) (*ast.CallExpr, int) {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return nil, -1
	}
	if id, ok := c.siteID[call]; ok {
		return call, id
	}
	// A view of a resource is the resource (docs/analyzers/stcleanup.md):
	// the view of a resource acquired on the spot, NewContext().Layer(i),
	// carries the acquire's obligation.
	if fn, _, recv := c.o.Callee(c.info, call); fn != nil && recv != nil && c.o.View(fn) {
		return c.site(recv)
	}
	return nil, -1
}

// rootBits returns the bit of the variable at the root of e, if indexed.
func (c *cleanup) rootBits(e ast.Expr) uint64 {
	if v := dataflow.Root(c.info, e); v != nil {
		return c.known(v)
	}
	return 0
}
