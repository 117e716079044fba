package stalias

import (
	"go/ast"
	"go/token"
	"go/types"
	"math/bits"
	"slices"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
)

// Heads are told apart by identity, not by name, so that spans go stale at
// a call on any alias of the head they came from and not at a call through
// a variable that names another head by then. An identity is an abstract
// value: what a variable held on entry to the function, or what an
// assignment of anything but another variable's operand stored (a call's
// result, nil, a range value), each assignment site one identity for all
// the values it stores; followed by a field path (s.cache). The dataflow
// state holds, for each tracked variable, the identities it may hold (union
// at joins), and for each variable holding device spans, the identities of
// the head they came from. A call on a head makes stale the spans whose
// head identities meet the operand's.
//
// A function has at most 64 identities; an operand past them has none, and
// spans from it never go stale (quiet rather than wrong), like spans from a
// head that is no variable's (f().AppendDevice(4)).

// ident is one head identity.
type ident struct {
	v    *types.Var // the variable whose value on entry it is; nil for an assignment's
	site token.Pos  // the assignment that stored it, for v == nil
	path string     // the field and index path below it (.cache, .heads[i])
}

// trackHeads chooses the variables whose head identities the analysis
// follows: the roots of the operands a head method is called on or a
// releasing function is handed, and, backwards through assignments of one
// variable's operand to another (g := h, x := s.cache), the variables those
// roots may have been copied from. The rest keep the identity of their
// value on entry, which calls them by name as before.
func (c *checker) trackHeads(body *ast.BlockStmt) {
	c.hvars = make(map[*types.Var]int)
	c.idents = make(map[ident]uint64)
	var order []*types.Var
	add := func(v *types.Var) {
		if _, ok := c.hvars[v]; v != nil && !ok && len(order) < 64 {
			c.hvars[v] = len(order)
			order = append(order, v)
		}
	}
	type copyEdge struct{ to, from *types.Var }
	var edges []copyEdge
	pairs := func(lhs, rhs []ast.Expr) {
		if len(lhs) != len(rhs) {
			return
		}
		for i := range lhs {
			to, from := dataflow.VarOf(c.info, lhs[i]), c.operandRoot(c.copyOf(rhs[i]))
			if to != nil && from != nil {
				edges = append(edges, copyEdge{to, from})
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			c.headOperands(n, func(h ast.Expr, _ string) { add(c.operandRoot(h)) })
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE || n.Tok == token.ASSIGN {
				pairs(n.Lhs, n.Rhs)
			}
		case *ast.ValueSpec:
			lhs := make([]ast.Expr, len(n.Names))
			for i, id := range n.Names {
				lhs[i] = id
			}
			pairs(lhs, n.Values)
		}
		return true
	})
	for changed := true; changed; {
		changed = false
		for _, e := range edges {
			if _, ok := c.hvars[e.to]; ok {
				n := len(order)
				add(e.from)
				changed = changed || len(order) > n
			}
		}
	}
	c.entry = make([]uint64, len(order))
	for i, v := range order {
		c.entry[i] = c.intern(ident{v: v})
	}
}

// headOperands calls on for each head operand of call that a later write
// through spans must not outlive: the receiver of a method with a directive
// (Snapshot, Branch, Append, AppendDevice, Release...) and the arguments
// of a function that releases them.
func (c *checker) headOperands(call *ast.CallExpr, on func(h ast.Expr, name string)) {
	fn, kind, recv := c.o.Callee(c.info, call)
	if kind != ownership.Static {
		return
	}
	if d := c.o.Dir(fn); recv != nil && d != nil && (d.Acquire || d.Release || d.Mutates || d.Appends) {
		on(recv, fn.Name())
	}
	for j, arg := range call.Args {
		if c.o.Releases(fn, ownership.ParamIndex(fn, j)) {
			on(arg, fn.Name())
		}
	}
}

// operand returns the variable at the root of head operand e and the path
// below it: s.cache is s and ".cache", (*p).heads[i] is p and ".heads[i]";
// &x and *p are x and p themselves. The root is nil when e is no variable's
// (a call, a literal).
func (c *checker) operand(e ast.Expr) (*types.Var, string) {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return c.operand(x.X)
	case *ast.Ident:
		v, _ := c.info.ObjectOf(x).(*types.Var)
		return v, ""
	case *ast.SelectorExpr:
		if sel, ok := c.info.Selections[x]; ok {
			if sel.Kind() != types.FieldVal {
				return nil, ""
			}
			v, p := c.operand(x.X)
			return v, p + "." + x.Sel.Name
		}
		v, _ := c.info.ObjectOf(x.Sel).(*types.Var) // qualified identifier
		return v, ""
	case *ast.IndexExpr:
		v, p := c.operand(x.X)
		return v, p + "[" + types.ExprString(x.Index) + "]"
	case *ast.StarExpr:
		return c.operand(x.X)
	case *ast.UnaryExpr:
		if x.Op == token.AND {
			return c.operand(x.X)
		}
	}
	return nil, ""
}

func (c *checker) operandRoot(e ast.Expr) *types.Var {
	v, _ := c.operand(e)
	return v
}

// intern returns the bit of identity id, or 0 past 64 identities.
func (c *checker) intern(id ident) uint64 {
	if b, ok := c.idents[id]; ok {
		return b
	}
	if len(c.identOf) == 64 {
		return 0
	}
	b := uint64(1) << len(c.identOf)
	c.idents[id] = b
	c.identOf = append(c.identOf, id)
	return b
}

// headIDs returns the identities head operand e may denote in st; none
// where heads are not tracked: in a function that takes device spans only
// inside its literals, which are checked on their own for them.
func (c *checker) headIDs(e ast.Expr, st state) uint64 {
	if c.idents == nil {
		return 0
	}
	root, path := c.operand(e)
	if root == nil {
		return 0
	}
	i, ok := c.hvars[root]
	if !ok || i >= len(st.of) {
		return c.intern(ident{v: root, path: path})
	}
	if path == "" {
		return st.of[i]
	}
	var ids uint64
	for b := st.of[i]; b != 0; b &= b - 1 {
		id := c.identOf[bits.TrailingZeros64(b)]
		id.path += path
		ids |= c.intern(id)
	}
	return ids
}

// copyOf returns the operand whose heads e holds as they are: e itself, or
// the slice append(x, ...) extends, whose elements stay where they were.
func (c *checker) copyOf(e ast.Expr) ast.Expr {
	if call, ok := ast.Unparen(e).(*ast.CallExpr); ok && len(call.Args) > 0 {
		if _, kind, _ := c.o.Callee(c.info, call); kind == ownership.Builtin && ownership.BuiltinName(c.info, call) == "append" {
			return call.Args[0]
		}
	}
	return e
}

// headValue returns the identities that assigning src to l stores in l, a
// tracked variable: those of the operand src copies (another variable's,
// or the slice it appends to), else the identity of this assignment. src
// is nil for a value with no operand of its own (one of a call's results,
// a range value).
func (c *checker) headValue(l, src ast.Expr, st state) uint64 {
	if src != nil {
		if x := c.copyOf(src); c.operandRoot(x) != nil {
			return c.headIDs(x, st)
		}
	}
	return c.intern(ident{site: l.Pos()})
}

// headIndex returns the index of the tracked variable l assigns, or -1.
func (c *checker) headIndex(l ast.Expr) int {
	if c.hvars == nil {
		return -1
	}
	if i, ok := c.hvars[dataflow.VarOf(c.info, l)]; ok {
		return i
	}
	return -1
}

// withOf returns st with tracked variable i holding identities ids.
func (st state) withOf(i int, ids uint64) state {
	if i >= len(st.of) || st.of[i] == ids {
		return st
	}
	st.of = slices.Clone(st.of)
	st.of[i] = ids
	return st
}

// spansFrom returns the head identities the device spans of the variable
// with bit b came from.
func (st state) spansFrom(b uint64) uint64 {
	if i := bits.TrailingZeros64(b); b != 0 && i < len(st.from) {
		return st.from[i]
	}
	return 0
}

// withFrom returns st with the variable of bit b holding spans from heads.
func (st state) withFrom(b uint64, heads uint64) state {
	if b == 0 || st.spansFrom(b) == heads {
		return st
	}
	i := bits.TrailingZeros64(b)
	from := make([]uint64, max(len(st.from), i+1))
	copy(from, st.from)
	from[i] = heads
	st.from = from
	return st
}

// join returns the union of a and b.
func join(a, b state) state {
	r := state{view: a.view | b.view, stale: a.stale | b.stale}
	r.of = orSlices(a.of, b.of)
	r.from = orSlices(a.from, b.from)
	return r
}

func orSlices(a, b []uint64) []uint64 {
	if len(a) < len(b) {
		a, b = b, a
	}
	if len(b) == 0 {
		return a
	}
	r := slices.Clone(a)
	for i, x := range b {
		r[i] |= x
	}
	return r
}

// equal reports whether a and b are the same state; missing entries of a
// slice are zero.
func equal(a, b state) bool {
	return a.view == b.view && a.stale == b.stale && sameBits(a.of, b.of) && sameBits(a.from, b.from)
}

func sameBits(a, b []uint64) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	for i, x := range a {
		if i < len(b) && b[i] != x || i >= len(b) && x != 0 {
			return false
		}
	}
	return true
}
