package stalias

import (
	_ "embed"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/cfg"

	"github.com/gpustate/gpustate/analyzers/internal/analysisutil"
	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
	"github.com/gpustate/gpustate/analyzers/stownership"
)

//go:embed doc.go
var doc string

// Analyzer reports writes to immutable snapshots and through read-only or
// stale device spans.
var Analyzer = New(stownership.Analyzer)

// New returns the analyzer reading the oracle and function bodies of own,
// an analyzer made by stownership.New.
func New(own *analysis.Analyzer) *analysis.Analyzer {
	return analysisutil.Checker("stalias", doc, func(pass *analysis.Pass) (any, error) { return run(pass, own) }, own)
}

// run checks each function in two steps. Calls of mutating methods on
// snapshot values are found syntactically. Views are followed by a forward
// may-dataflow over the function's CFG: the state is the set of local
// variables that may hold memory of a view (union at joins; assigning a
// view or a value derived from one adds a variable, assigning anything else
// removes it) and, among those holding the device spans AppendDevice or
// WriteDevice returned, the set that a later call on the same head has made
// stale; heads are told apart by identity, tracked in the same state (see
// heads.go). Every write is checked against the state where it happens.
// Packages without directives return at once.
func run(pass *analysis.Pass, own *analysis.Analyzer) (any, error) {
	res := pass.ResultOf[own].(*stownership.Result).Result
	if !res.Dirs.Active() {
		return nil, nil
	}
	for _, f := range res.Funcs {
		checkFunc(pass, res, f)
	}
	checkCoupled(pass)
	return nil, nil
}

// The kinds of memory a variable may hold.
const (
	snapView    = iota // a view of a snapshot: immutable
	spansView          // device spans a view of a head returned (Spans): read only
	deviceSpans        // device spans AppendDevice or WriteDevice returned: the caller's until the next call on the head
)

// origin is where the memory a variable holds came from.
type origin struct {
	kind   int
	typ    string // the snapshot or head type
	method string // the method that returned the view
	spans  bool   // the view holds device spans
}

// ref is what an expression may refer to: the origin of its memory (nil:
// none), whether device spans in it may be stale, and, for the spans
// AppendDevice or WriteDevice returned, the identities of the head they
// came from.
type ref struct {
	og    *origin
	stale bool
	heads uint64
}

// state is the dataflow fact: the variables that may hold a view, those
// whose device spans may be stale, and, in functions that take device
// spans from a head, the head identities of the tracked variables (of, by
// index in hvars) and of the spans each variable holds (from, by bit).
type state struct {
	view, stale uint64
	of, from    []uint64
}

type checker struct {
	pass    *analysis.Pass
	info    *types.Info
	o       *ownership.Oracle
	res     *ownership.Result
	node    ast.Node // the function
	vars    map[*types.Var]uint64
	origin  map[*types.Var]*origin
	staleBy map[*origin]string // the call that made device spans stale
	calls   map[*ast.CallExpr]*origin
	rangeOf map[ast.Expr]*ast.RangeStmt
	lits    map[*types.Var]*ast.FuncLit // variables bound to a function literal
	inLit   map[*ast.FuncLit]bool
	defers  []*ast.DeferStmt
	device  bool               // the function takes device spans from a head
	hvars   map[*types.Var]int // the variables whose head identities are tracked
	idents  map[ident]uint64   // the bit of each head identity
	identOf []ident            // the identity of each bit
	entry   []uint64           // the identities of the tracked variables on entry
	record  bool
	seen    map[token.Pos]bool
}

// checkFunc checks one function: it reports mutating calls on snapshots,
// and, where the function takes views, runs the view analysis over its CFG
// and reports writes through views at the fixpoint.
func checkFunc(pass *analysis.Pass, res *ownership.Result, f *ownership.Func) {
	c := newChecker(pass, res, f)
	if !c.findViews(f.Body()) {
		return
	}
	c.index(f.Body())
	if c.device {
		c.trackHeads(f.Body())
	}
	c.solve(f)
}

func newChecker(pass *analysis.Pass, res *ownership.Result, f *ownership.Func) *checker {
	return &checker{
		pass:    pass,
		info:    pass.TypesInfo,
		o:       res.Oracle,
		res:     res,
		node:    f.Node,
		vars:    make(map[*types.Var]uint64),
		origin:  make(map[*types.Var]*origin),
		staleBy: make(map[*origin]string),
		calls:   make(map[*ast.CallExpr]*origin),
		rangeOf: make(map[ast.Expr]*ast.RangeStmt),
		lits:    make(map[*types.Var]*ast.FuncLit),
		inLit:   make(map[*ast.FuncLit]bool),
		seen:    make(map[token.Pos]bool),
	}
}

// findViews reports mutates calls on snapshots and records the calls that
// return views; it reports whether there is any (nothing else to check
// without one). Function literals are functions of their own here.
func (c *checker) findViews(body *ast.BlockStmt) bool {
	hasView := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			fn, kind, recv := c.o.Callee(c.info, n)
			if kind == ownership.Static && recv != nil && c.o.IsSnapshot(c.info.TypeOf(recv)) && !c.res.Withheld(c.info.TypeOf(recv)) && c.o.Mutates(fn) {
				c.pass.ReportRangef(n, "%s mutates its receiver, but %s is an immutable snapshot; call it on the state head (or a branch of it)",
					fn.Name(), ownership.TypeName(c.info.TypeOf(recv)))
			}
			if og := c.viewCall(n); og != nil {
				hasView = true
				c.device = c.device || og.kind == deviceSpans
			}
		}
		return true
	})
	return hasView
}

// index records range keys and values, the variables bound to literals and
// the deferred calls, inside literals too: a literal's body is checked where
// it runs.
func (c *checker) index(body *ast.BlockStmt) {
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.RangeStmt:
			for _, x := range []ast.Expr{n.Key, n.Value} {
				if x != nil {
					c.rangeOf[x] = n
				}
			}
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i, r := range n.Rhs {
					c.bindLit(n.Lhs[i], r)
				}
			}
		case *ast.ValueSpec:
			if len(n.Names) == len(n.Values) {
				for i, r := range n.Values {
					c.bindLit(n.Names[i], r)
				}
			}
		case *ast.DeferStmt:
			c.defers = append(c.defers, n)
		}
		return true
	})
}

// solve runs the view analysis to its fixpoint, then walks each live block
// once more with reporting on; deferred calls run at each exit, against the
// state there.
func (c *checker) solve(f *ownership.Func) {
	p := &dataflow.Problem[state]{
		Entry:  state{of: c.entry},
		Bottom: state{},
		Join:   join,
		Equal:  equal,
		Transfer: func(b *cfg.Block, in state) state {
			for _, n := range b.Nodes {
				in = c.step(n, in)
			}
			return in
		},
	}
	ins, ok := dataflow.Solve(f.CFG, p)
	if !ok {
		return
	}
	c.record = true
	for _, b := range f.CFG.Blocks {
		if !b.Live {
			continue
		}
		st := ins[b.Index]
		for _, n := range b.Nodes {
			st = c.step(n, st)
		}
		if len(b.Succs) == 0 {
			c.runDefers(st)
		}
	}
}

// runDefers checks the deferred calls against the state at an exit.
func (c *checker) runDefers(st state) {
	for _, d := range c.defers {
		c.call(d.Call, st)
		if lit, ok := ast.Unparen(d.Call.Fun).(*ast.FuncLit); ok {
			c.checkLit(lit, st)
		}
	}
}

// bindLit records that variable l is bound to the function literal r.
func (c *checker) bindLit(l ast.Expr, r ast.Expr) {
	lit, ok := ast.Unparen(r).(*ast.FuncLit)
	if !ok {
		return
	}
	if v := dataflow.VarOf(c.info, l); v != nil {
		c.lits[v] = lit
	}
}

// viewCall returns where the memory call returns comes from, when call is
// a view of a snapshot, a view of a head that returns device spans, or a
// mutating method of a head that returns device spans; else nil.
func (c *checker) viewCall(call *ast.CallExpr) *origin {
	if og, ok := c.calls[call]; ok {
		return og
	}
	var og *origin
	fn, kind, recv := c.o.Callee(c.info, call)
	if kind == ownership.Static && recv != nil {
		if view, mut := c.o.View(fn), c.o.Mutates(fn); view || mut {
			rt := c.info.TypeOf(recv)
			spans := false
			if res := fn.Signature().Results(); res.Len() > 0 {
				spans = ownership.HoldsDeviceSpan(res.At(0).Type())
			}
			switch {
			case c.res.Withheld(rt):
			case view && c.o.IsSnapshot(rt):
				og = &origin{kind: snapView, typ: ownership.TypeName(rt), method: fn.Name(), spans: spans}
			case view && spans:
				og = &origin{kind: spansView, typ: ownership.TypeName(rt), method: fn.Name(), spans: true}
			case mut && spans:
				og = &origin{kind: deviceSpans, typ: ownership.TypeName(rt), method: fn.Name(), spans: true}
			}
		}
	}
	c.calls[call] = og
	return og
}

// bit returns the bit of local variable v, indexing it on first use.
func (c *checker) bit(v *types.Var) uint64 {
	if v == nil || v.IsField() || v.Pos() < c.node.Pos() || v.Pos() >= c.node.End() {
		return 0
	}
	if b, ok := c.vars[v]; ok {
		return b
	}
	if len(c.vars) == 64 {
		return 0
	}
	b := uint64(1) << len(c.vars)
	c.vars[v] = b
	return b
}

// view returns what the memory e may refer to: where it comes from (nil:
// no view), whether it may be stale, and the head device spans came from.
func (c *checker) view(e ast.Expr, st state) ref {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		if v, ok := c.info.Uses[x].(*types.Var); ok {
			if b := c.vars[v]; b&st.view != 0 {
				return ref{c.origin[v], b&st.stale != 0, st.spansFrom(b)}
			}
		}
	case *ast.SelectorExpr:
		if sel, ok := c.info.Selections[x]; ok && sel.Kind() == types.FieldVal {
			return c.view(x.X, st)
		}
	case *ast.IndexExpr:
		return c.view(x.X, st)
	case *ast.SliceExpr:
		return c.view(x.X, st)
	case *ast.StarExpr:
		return c.view(x.X, st)
	case *ast.UnaryExpr:
		// &v points at the variable v, a copy, unless v itself holds
		// slices or pointers into the view; &rows[i] points into it.
		if x.Op == token.AND {
			if _, isVar := ast.Unparen(x.X).(*ast.Ident); !isVar || ownership.Writable(c.info.TypeOf(x.X)) {
				return c.view(x.X, st)
			}
		}
	case *ast.BinaryExpr:
		// Address arithmetic: sp.Ptr + off still points into the view.
		if x.Op == token.ADD || x.Op == token.SUB {
			if r := c.view(x.X, st); r.og != nil && r.og.spans {
				return r
			}
			if x.Op == token.ADD {
				if r := c.view(x.Y, st); r.og != nil && r.og.spans {
					return r
				}
			}
		}
	case *ast.CompositeLit:
		// []device.Span{sp}: a span copied into a new slice still locates
		// the same device memory.
		if ownership.HoldsDeviceSpan(c.info.TypeOf(x)) {
			for _, el := range x.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					el = kv.Value
				}
				if r := c.view(el, st); r.og != nil && r.og.spans {
					return r
				}
			}
		}
	case *ast.TypeAssertExpr:
		return c.view(x.X, st)
	case *ast.CallExpr:
		return c.viewOfCall(x, st)
	}
	return ref{}
}

// viewOfCall returns what the result of call may refer to: the operand of
// a conversion, or a view call's memory, with the head identities of the
// device spans AppendDevice and WriteDevice return.
func (c *checker) viewOfCall(call *ast.CallExpr, st state) ref {
	_, kind, recv := c.o.Callee(c.info, call)
	switch kind {
	case ownership.Conversion:
		if len(call.Args) == 1 {
			return c.view(call.Args[0], st)
		}
	case ownership.Static:
		og := c.viewCall(call)
		if og != nil && og.kind == deviceSpans {
			return ref{og: og, heads: c.headIDs(recv, st)}
		}
		return ref{og: og}
	}
	return ref{}
}

// through returns what the memory an assignment to l writes may refer to:
// l must pass through an index of a slice or pointer, or a pointer.
func (c *checker) through(l ast.Expr, st state) ref {
	switch x := ast.Unparen(l).(type) {
	case *ast.IndexExpr:
		t := c.info.TypeOf(x.X)
		if t == nil {
			return ref{}
		}
		switch t.Underlying().(type) {
		case *types.Slice, *types.Pointer:
			return c.view(x.X, st)
		case *types.Array:
			return c.through(x.X, st)
		}
	case *ast.SelectorExpr:
		if sel, ok := c.info.Selections[x]; ok && sel.Kind() == types.FieldVal {
			if ownership.SpanField(sel) {
				return ref{} // sp.Rows = n: a host-side descriptor
			}
			if t := c.info.TypeOf(x.X); t != nil && isPointer(t) || sel.Indirect() {
				return c.view(x.X, st)
			}
			return c.through(x.X, st)
		}
	case *ast.StarExpr:
		return c.view(x.X, st)
	}
	return ref{}
}

// check reports a write at n through the memory r refers to.
func (c *checker) check(n ast.Node, r ref) {
	og := r.og
	if og == nil || og.kind == deviceSpans && !r.stale || !c.record || c.seen[n.Pos()] {
		return
	}
	c.seen[n.Pos()] = true
	switch og.kind {
	case snapView:
		if og.spans {
			c.pass.ReportRangef(n, "write through a view of snapshot %s, which is immutable: its device spans are read only, the blocks are shared with the state; write rows through the state's AppendDevice or WriteDevice (on a branch to keep the snapshot's version)", og.typ)
			return
		}
		c.pass.ReportRangef(n, "write through a view of snapshot %s, which is immutable; write to the state head (or a branch of it), or copy the rows first", og.typ)
	case spansView:
		c.pass.ReportRangef(n, "write through the spans %s of %s returned, which are read only: the blocks may be shared with snapshots, branches and other owners' heads that adopted them as a prefix; write rows through the spans AppendDevice or WriteDevice returns", og.method, og.typ)
	case deviceSpans:
		by := c.staleBy[og]
		c.pass.ReportRangef(n, "write through the spans %s of %s returned after a later call on the state (%s); they are the caller's only until the next call on it: finish the writes before that call, or take new spans", og.method, og.typ, by)
	}
}

// step applies one CFG node: writes are checked against the state before
// it, calls on a head make the device spans taken from it stale, then
// assignments update which variables hold views and which heads.
func (c *checker) step(n ast.Node, st state) state {
	c.writes(n, st)
	if c.device {
		st = c.invalidate(n, st)
	}
	switch n := n.(type) {
	case *ast.AssignStmt:
		if n.Tok == token.DEFINE || n.Tok == token.ASSIGN {
			st = c.assignAll(st, n.Lhs, n.Rhs)
		}
	case *ast.ValueSpec:
		lhs := make([]ast.Expr, len(n.Names))
		for i, id := range n.Names {
			lhs[i] = id
		}
		st = c.assignAll(st, lhs, n.Values)
	case ast.Expr:
		if rs := c.rangeOf[n]; rs != nil {
			var r ref
			if n == rs.Value {
				r = c.view(rs.X, st)
			}
			st = c.assign(st, n, r)
			if i := c.headIndex(n); i >= 0 {
				st = st.withOf(i, c.headValue(n, nil, st))
			}
		}
	}
	return st
}

// assignAll applies the assignment of rhs to lhs: one value each, or the
// results of one call (the first of which may be a view). Every operand
// is evaluated before any variable is assigned.
func (c *checker) assignAll(st state, lhs, rhs []ast.Expr) state {
	refs := make([]ref, len(lhs))
	srcs := make([]ast.Expr, len(lhs))
	if len(lhs) == len(rhs) {
		for i, r := range rhs {
			refs[i], srcs[i] = c.view(r, st), r
		}
	} else if len(rhs) == 1 {
		refs[0] = c.view(rhs[0], st)
	}
	var heads []uint64
	if c.hvars != nil {
		heads = make([]uint64, len(lhs))
		for i, l := range lhs {
			if c.headIndex(l) >= 0 {
				heads[i] = c.headValue(l, srcs[i], st)
			}
		}
	}
	for i, l := range lhs {
		st = c.assign(st, l, refs[i])
		if j := c.headIndex(l); j >= 0 {
			st = st.withOf(j, heads[i])
		}
	}
	return st
}

// assign records that l now holds what r refers to.
func (c *checker) assign(st state, l ast.Expr, r ref) state {
	v := dataflow.VarOf(c.info, l)
	if v == nil {
		return st
	}
	if r.og == nil {
		b := c.vars[v]
		st.view &^= b
		st.stale &^= b
		return st.withFrom(b, 0)
	}
	b := c.bit(v)
	if b == 0 {
		return st
	}
	st.view |= b
	if r.stale {
		st.stale |= b
	} else {
		st.stale &^= b
	}
	c.origin[v] = r.og
	if r.og.kind != deviceSpans {
		r.heads = 0
	}
	return st.withFrom(b, r.heads)
}

// invalidate makes stale the device spans held in st that were taken from
// a head that n calls a directive method on (Snapshot, Branch, Append,
// AppendDevice, Release...) or passes to a function that releases it,
// under any name it may have.
func (c *checker) invalidate(n ast.Node, st state) state {
	if st.view == 0 {
		return st
	}
	if _, ok := n.(*ast.DeferStmt); ok {
		return st // the deferred call runs at the exit
	}
	on := func(h ast.Expr, name string) {
		ids := c.headIDs(h, st)
		if ids == 0 {
			return // a head that is no variable's (f().Snapshot()): another one each time, maybe
		}
		for v, og := range c.origin {
			if b := c.vars[v]; og.kind == deviceSpans && st.view&b != 0 && st.spansFrom(b)&ids != 0 {
				st.stale |= b
				c.staleBy[og] = name
			}
		}
	}
	ast.Inspect(n, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			c.headOperands(x, on)
		}
		return true
	})
	return st
}

// writes reports the writes in n through views held in st.
func (c *checker) writes(n ast.Node, st state) {
	if !c.record {
		return
	}
	switch n := n.(type) {
	case *ast.AssignStmt:
		for _, l := range n.Lhs {
			c.check(l, c.through(l, st))
		}
	case *ast.IncDecStmt:
		c.check(n.X, c.through(n.X, st))
	}
	ast.Inspect(n, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.FuncLit:
			c.checkLit(x, st)
			return false
		case *ast.CallExpr:
			c.call(x, st)
		}
		return true
	})
}

// call reports the writes call makes through views held in st: into its
// operands, or in the body of the literal it calls.
func (c *checker) call(call *ast.CallExpr, st state) {
	if v := dataflow.VarOf(c.info, call.Fun); v != nil {
		if lit := c.lits[v]; lit != nil {
			c.checkLit(lit, st)
		}
	}
	fn, kind, recv := c.o.Callee(c.info, call)
	switch kind {
	case ownership.Builtin:
		switch ownership.BuiltinName(c.info, call) {
		case "copy", "clear":
			if len(call.Args) > 0 {
				c.check(call, c.view(call.Args[0], st))
			}
		case "append":
			if len(call.Args) > 1 {
				if sl, ok := ast.Unparen(call.Args[0]).(*ast.SliceExpr); ok && !ownership.FullSlice(sl) {
					c.check(call, c.view(sl, st))
				}
			}
		}
	case ownership.Static, ownership.Dynamic:
		if fn == nil {
			return
		}
		if recv != nil && kind == ownership.Static && c.o.Writes(fn, -1) {
			c.check(call, c.view(recv, st))
		}
		for j, arg := range call.Args {
			if c.o.Writes(fn, ownership.ParamIndex(fn, j)) {
				c.check(call, c.view(arg, st))
			}
		}
	}
}

// checkLit checks the body of a function literal that runs (is called,
// deferred, run as a goroutine or handed on) with the views in st, which
// it captures. Its statements are followed in source order, so that values
// it derives from captured views are views too.
func (c *checker) checkLit(lit *ast.FuncLit, st state) {
	if c.inLit[lit] {
		return
	}
	c.inLit[lit] = true
	defer delete(c.inLit, lit)
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.FuncLit:
			c.checkLit(x, st)
			return false
		case *ast.RangeStmt:
			c.writes(x.X, st)
			for _, k := range []ast.Expr{x.Key, x.Value} {
				if k != nil {
					st = c.step(k, st)
				}
			}
			ast.Inspect(x.Body, visit)
			return false
		case *ast.AssignStmt, *ast.IncDecStmt, *ast.ExprStmt, *ast.ValueSpec, *ast.ReturnStmt,
			*ast.SendStmt, *ast.GoStmt, *ast.DeferStmt:
			st = c.step(x, st)
			return false
		case ast.Expr:
			c.writes(x, st)
			return false
		}
		return true
	}
	ast.Inspect(lit.Body, visit)
}

func isPointer(t types.Type) bool {
	_, ok := t.Underlying().(*types.Pointer)
	return ok
}
