package ownership

import (
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/ast/inspector"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
)

// Writes inference.
//
// A function writes parameter p when its body stores through memory that p
// refers to: an index assignment into a slice (or pointer to array) derived
// from p, an assignment through a pointer derived from p, ++, --, op-assign
// on such a location, copy or clear into it, append to a sub-slice of it; or
// when it passes a value derived from p to a parameter that is written (by a
// directive, by an inferred fact, or by another function of the package,
// iterated to a fixed point). Values derive from p through assignment,
// field selection, indexing, slicing, dereference, conversion and range.
// The scan is flow-insensitive and builds no CFG, so it runs in every
// package, the standard library included: slices.Sort(v) is a write of v.

// writeInfo is the per-function state of the scan.
type writeInfo struct {
	fn      *types.Func
	params  map[*types.Var]int // parameter -> bit index (receiver first)
	index   []int              // bit index -> parameter index (-1 receiver)
	derive  map[*types.Var]uint64
	written uint64
	calls   []writeCall

	// collected by visit, consumed by solve
	flows    []flowEdge
	stores   []ast.Expr      // assignment targets
	writeOps []ast.Expr      // operands written by copy, clear, append
	calls0   []*ast.CallExpr // every other call
}

// writeCall is a call passing values derived from parameters.
type writeCall struct {
	callee *types.Func
	param  int    // callee parameter (-1: receiver)
	from   uint64 // our parameters the operand derives from
}

// inferWrites records in o the writes facts of the package's function
// declarations: one filtered traversal collects each body's assignments,
// stores and calls, each body is solved on its own, then the calls between
// them are iterated to a fixed point.
func inferWrites(info *types.Info, o *Oracle, insp *inspector.Inspector) {
	var infos []*writeInfo
	byFn := make(map[*types.Func]*writeInfo)
	// One filtered traversal of the package: function declarations do not
	// nest, so each node belongs to the last one seen, if it lies inside.
	var cur *writeInfo
	var end token.Pos
	for n := range insp.PreorderSeq(writeNodes...) {
		if d, ok := n.(*ast.FuncDecl); ok {
			cur = nil
			if d.Body == nil {
				continue
			}
			fn, ok := info.Defs[d.Name].(*types.Func)
			if !ok {
				continue
			}
			if cur = newWriteInfo(fn); cur != nil {
				end = d.End()
				infos = append(infos, cur)
				byFn[fn] = cur
			}
			continue
		}
		if cur == nil {
			continue
		}
		if n.Pos() >= end {
			cur = nil
			continue
		}
		cur.visit(info, n)
	}
	for _, w := range infos {
		w.solve(info)
	}
	// Fixed point over the package's calls.
	for changed := true; changed; {
		changed = false
		for _, w := range infos {
			for _, c := range w.calls {
				if c.from&^w.written == 0 {
					continue
				}
				writes := false
				if cw := byFn[c.callee]; cw != nil {
					writes = cw.writesParam(c.param) || o.Writes(c.callee, c.param)
				} else {
					writes = o.Writes(c.callee, c.param)
				}
				if writes {
					w.written |= c.from
					changed = true
				}
			}
		}
	}
	for _, w := range infos {
		if w.written == 0 {
			continue
		}
		f := o.local[w.fn]
		if f == nil {
			f = new(Fact)
			o.local[w.fn] = f
		}
		f.Writes = nil
		for b, p := range w.index {
			if w.written&(1<<b) != 0 {
				f.Writes = append(f.Writes, p)
			}
		}
	}
}

// newWriteInfo returns the scan state for fn, or nil when no parameter of
// fn can be written through.
func newWriteInfo(fn *types.Func) *writeInfo {
	sig, ok := fn.Type().(*types.Signature)
	if !ok {
		return nil
	}
	w := &writeInfo{fn: fn, params: make(map[*types.Var]int), derive: make(map[*types.Var]uint64)}
	add := func(i int, v *types.Var) {
		if v == nil || v.Name() == "" || v.Name() == "_" || len(w.index) == 64 || !writable(v.Type()) {
			return
		}
		b := len(w.index)
		w.params[v] = b
		w.index = append(w.index, i)
		w.derive[v] = 1 << b
	}
	add(-1, sig.Recv())
	for i := range sig.Params().Len() {
		add(i, sig.Params().At(i))
	}
	if len(w.index) == 0 {
		return nil
	}
	return w
}

func (w *writeInfo) writesParam(p int) bool {
	for b, q := range w.index {
		if q == p {
			return w.written&(1<<b) != 0
		}
	}
	return false
}

// Writable reports whether memory can be written through a value of type
// t: a slice, a pointer, or a struct or array holding one.
func Writable(t types.Type) bool { return t != nil && writable(t) }

func writable(t types.Type) bool {
	switch u := t.Underlying().(type) {
	case *types.Slice, *types.Pointer:
		return true
	case *types.Array:
		return writable(u.Elem())
	case *types.Struct:
		for f := range u.Fields() {
			if writable(f.Type()) {
				return true
			}
		}
		return false
	case *types.Interface:
		tp, ok := types.Unalias(t).(*types.TypeParam)
		return ok && sliceOrPointerTypeParam(tp)
	}
	return false
}

// sliceOrPointerTypeParam reports whether every type in tp's type set is a
// slice or a pointer (S ~[]E).
func sliceOrPointerTypeParam(tp *types.TypeParam) bool {
	iface, ok := tp.Constraint().Underlying().(*types.Interface)
	if !ok {
		return false
	}
	found := false
	for t := range iface.EmbeddedTypes() {
		switch t := t.(type) {
		case *types.Union:
			for i := range t.Len() {
				switch t.Term(i).Type().Underlying().(type) {
				case *types.Slice, *types.Pointer:
					found = true
				default:
					return false
				}
			}
		default:
			switch t.Underlying().(type) {
			case *types.Slice, *types.Pointer:
				found = true
			}
		}
	}
	return found
}

// indirect reports whether indexing or selecting through a value of type t
// reaches memory the value refers to (slice, pointer, pointer to array, or
// a type parameter whose type set holds only those).
func indirect(t types.Type) bool {
	if t == nil {
		return false
	}
	if tp, ok := types.Unalias(t).(*types.TypeParam); ok {
		return sliceOrPointerTypeParam(tp)
	}
	switch t.Underlying().(type) {
	case *types.Slice, *types.Pointer:
		return true
	}
	return false
}

var writeNodes = []ast.Node{
	(*ast.FuncDecl)(nil),
	(*ast.AssignStmt)(nil),
	(*ast.IncDecStmt)(nil),
	(*ast.ValueSpec)(nil),
	(*ast.RangeStmt)(nil),
	(*ast.CallExpr)(nil),
}

// flowEdge is an assignment between variables: lhs may refer to what rhs does.
type flowEdge struct {
	lhs *types.Var
	rhs ast.Expr
}

// visit collects, from one node of the function, the assignments between
// variables, the stores and the calls; solve then iterates derivation over
// the assignments alone.
func (w *writeInfo) visit(info *types.Info, n ast.Node) {
	edge := func(l, r ast.Expr) {
		if v := dataflow.VarOf(info, l); v != nil {
			w.flows = append(w.flows, flowEdge{v, r})
		}
	}
	switch n := n.(type) {
	case *ast.AssignStmt:
		w.stores = append(w.stores, n.Lhs...)
		if (n.Tok == token.DEFINE || n.Tok == token.ASSIGN) && len(n.Lhs) == len(n.Rhs) {
			for i, l := range n.Lhs {
				edge(l, n.Rhs[i])
			}
		}
	case *ast.IncDecStmt:
		w.stores = append(w.stores, n.X)
	case *ast.ValueSpec:
		if len(n.Names) == len(n.Values) {
			for i, id := range n.Names {
				edge(id, n.Values[i])
			}
		}
	case *ast.RangeStmt:
		if n.Value != nil {
			edge(n.Value, n.X)
		}
	case *ast.CallExpr:
		if id, ok := ast.Unparen(n.Fun).(*ast.Ident); ok {
			switch id.Name {
			case "copy", "clear", "append":
				if _, ok := info.Uses[id].(*types.Builtin); !ok {
					break
				}
				if id.Name != "append" && len(n.Args) > 0 {
					w.writeOps = append(w.writeOps, n.Args[0])
				} else if len(n.Args) > 1 {
					if s, ok := ast.Unparen(n.Args[0]).(*ast.SliceExpr); ok && !FullSlice(s) {
						w.writeOps = append(w.writeOps, s)
					}
				}
				return
			}
		}
		// Resolved in solve, and only when an operand derives from a
		// parameter: most calls pass none.
		w.calls0 = append(w.calls0, n)
	}
}

// solve derives, to a fixed point, which variables refer to which
// parameters' memory, then finds the parameters written directly and the
// calls that pass them on.
func (w *writeInfo) solve(info *types.Info) {
	for changed := true; changed; {
		changed = false
		for _, f := range w.flows {
			if m := w.from(info, f.rhs); w.derive[f.lhs]|m != w.derive[f.lhs] {
				w.derive[f.lhs] |= m
				changed = true
			}
		}
	}
	for _, l := range w.stores {
		w.written |= w.through(info, l)
	}
	for _, e := range w.writeOps {
		w.written |= w.from(info, e)
	}
	for _, call := range w.calls0 {
		var recvFrom uint64
		fun := ast.Unparen(call.Fun)
		if sel, ok := fun.(*ast.SelectorExpr); ok {
			recvFrom = w.from(info, sel.X)
		}
		argFrom := make([]uint64, len(call.Args))
		from := recvFrom
		for j, a := range call.Args {
			argFrom[j] = w.from(info, a)
			from |= argFrom[j]
		}
		if from == 0 {
			continue
		}
		fn, kind, recv := Callee(info, call)
		if kind != Static && !(kind == Dynamic && InDevice(fn)) {
			continue
		}
		if recv != nil && recvFrom != 0 && indirect(info.TypeOf(recv)) {
			w.calls = append(w.calls, writeCall{fn, -1, recvFrom})
		}
		for j, m := range argFrom {
			if m != 0 {
				if p := ParamIndex(fn, j); p >= 0 {
					w.calls = append(w.calls, writeCall{fn, p, m})
				}
			}
		}
	}
	w.flows, w.stores, w.writeOps, w.calls0 = nil, nil, nil, nil
}

// from returns the parameters whose memory e may refer to.
func (w *writeInfo) from(info *types.Info, e ast.Expr) uint64 {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		if v, ok := info.Uses[x].(*types.Var); ok {
			return w.derive[v]
		}
	case *ast.SelectorExpr:
		if sel, ok := info.Selections[x]; ok && sel.Kind() == types.FieldVal {
			return w.from(info, x.X)
		}
	case *ast.IndexExpr:
		return w.from(info, x.X)
	case *ast.SliceExpr:
		return w.from(info, x.X)
	case *ast.StarExpr:
		return w.from(info, x.X)
	case *ast.UnaryExpr:
		// &v points at v itself: it reaches the parameter's memory only
		// when v does (a slice or pointer inside it), or when v is a
		// location inside that memory (&p[i], &p.f).
		if x.Op == token.AND {
			if _, isVar := ast.Unparen(x.X).(*ast.Ident); !isVar || Writable(info.TypeOf(x.X)) {
				return w.from(info, x.X)
			}
		}
	case *ast.TypeAssertExpr:
		return w.from(info, x.X)
	case *ast.CallExpr:
		if _, kind, _ := Callee(info, x); kind == Conversion && len(x.Args) == 1 {
			return w.from(info, x.Args[0])
		}
	}
	return 0
}

// FullSlice reports whether s is a full slice expression x[i:j:j] (or
// x[:0:0]) whose capacity equals its length, so that append to it always
// copies.
func FullSlice(s *ast.SliceExpr) bool {
	return s.Slice3 && s.Max != nil && types.ExprString(s.Max) == exprString(s.High)
}

func exprString(e ast.Expr) string {
	if e == nil {
		return "0"
	}
	return types.ExprString(e)
}

// through returns the parameters whose memory an assignment to l writes:
// l must pass through an index of a slice or pointer, or a dereference.
func (w *writeInfo) through(info *types.Info, l ast.Expr) uint64 {
	switch x := ast.Unparen(l).(type) {
	case *ast.IndexExpr:
		if indirect(info.TypeOf(x.X)) {
			return w.from(info, x.X)
		}
		if t := info.TypeOf(x.X); t != nil && isArray(t) {
			return w.through(info, x.X)
		}
	case *ast.SelectorExpr:
		if sel, ok := info.Selections[x]; ok && sel.Kind() == types.FieldVal {
			if SpanField(sel) {
				return 0
			}
			if indirect(info.TypeOf(x.X)) || sel.Indirect() {
				return w.from(info, x.X)
			}
			return w.through(info, x.X)
		}
	case *ast.StarExpr:
		return w.from(info, x.X)
	}
	return 0
}

func isArray(t types.Type) bool {
	_, ok := t.Underlying().(*types.Array)
	return ok
}
