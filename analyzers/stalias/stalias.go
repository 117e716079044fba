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
	"github.com/gpustate/gpustate/analyzers/stcleanup"
)

//go:embed doc.go
var doc string

// Analyzer reports writes to immutable snapshots.
var Analyzer = &analysis.Analyzer{
	Name:     "stalias",
	Doc:      analysisutil.MustExtractDoc(doc, "stalias"),
	URL:      "https://pkg.go.dev/github.com/gpustate/gpustate/analyzers/stalias",
	Run:      run,
	Requires: []*analysis.Analyzer{stcleanup.Ownership},
}

// run checks each function in two steps. Calls of mutating methods on
// snapshot values are found syntactically. Views are followed by a forward
// may-dataflow over the function's CFG: the state is the set of local
// variables that may hold memory of a snapshot (union at joins; assigning a
// view or a value derived from one adds a variable, assigning anything else
// removes it), and every write is checked against the state where it
// happens. Packages without directives return at once.
func run(pass *analysis.Pass) (any, error) {
	res := pass.ResultOf[stcleanup.Ownership].(*stcleanup.OwnershipResult).Result
	if !res.Dirs.Active() {
		return nil, nil
	}
	for _, f := range res.Funcs {
		checkFunc(pass, res, f)
	}
	return nil, nil
}

type checker struct {
	pass    *analysis.Pass
	info    *types.Info
	o       *ownership.Oracle
	res     *ownership.Result
	node    ast.Node // the function
	vars    map[*types.Var]uint64
	snap    map[*types.Var]string // the snapshot type a variable's view came from
	rangeOf map[ast.Expr]*ast.RangeStmt
	record  bool
	seen    map[token.Pos]bool
	full    bool // too many variables: stop tainting new ones
}

func checkFunc(pass *analysis.Pass, res *ownership.Result, f *ownership.Func) {
	o := res.Oracle
	body := f.Body()
	c := &checker{
		pass:    pass,
		info:    pass.TypesInfo,
		o:       o,
		res:     res,
		node:    f.Node,
		vars:    make(map[*types.Var]uint64),
		snap:    make(map[*types.Var]string),
		rangeOf: make(map[ast.Expr]*ast.RangeStmt),
		seen:    make(map[token.Pos]bool),
	}
	hasView := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			fn, kind, recv := ownership.Callee(c.info, n)
			if kind == ownership.Static && recv != nil && o.IsSnapshot(c.info.TypeOf(recv)) && !res.Withheld(c.info.TypeOf(recv)) {
				if o.Mutates(fn) {
					pass.ReportRangef(n, "%s mutates its receiver, but %s is an immutable snapshot; call it on the state head (or a branch of it)",
						fn.Name(), ownership.TypeName(c.info.TypeOf(recv)))
				}
				if o.View(fn) {
					hasView = true
				}
			}
		case *ast.RangeStmt:
			for _, x := range []ast.Expr{n.Key, n.Value} {
				if x != nil {
					c.rangeOf[x] = n
				}
			}
		}
		return true
	})
	if !hasView {
		return
	}
	p := &dataflow.Problem[uint64]{
		Entry:  0,
		Bottom: 0,
		Join:   func(a, b uint64) uint64 { return a | b },
		Equal:  func(a, b uint64) bool { return a == b },
		Transfer: func(b *cfg.Block, in uint64) uint64 {
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
		if b.Live {
			st := ins[b.Index]
			for _, n := range b.Nodes {
				st = c.step(n, st)
			}
		}
	}
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
		c.full = true
		return 0
	}
	b := uint64(1) << len(c.vars)
	c.vars[v] = b
	return b
}

// view returns the snapshot type whose memory e may refer to, or "".
func (c *checker) view(e ast.Expr, st uint64) string {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		if v, ok := c.info.Uses[x].(*types.Var); ok && c.vars[v]&st != 0 {
			return c.snap[v]
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
		// slices or pointers into the snapshot; &rows[i] points into it.
		if x.Op == token.AND {
			if _, isVar := ast.Unparen(x.X).(*ast.Ident); !isVar || ownership.Writable(c.info.TypeOf(x.X)) {
				return c.view(x.X, st)
			}
		}
	case *ast.TypeAssertExpr:
		return c.view(x.X, st)
	case *ast.CallExpr:
		fn, kind, recv := ownership.Callee(c.info, x)
		switch kind {
		case ownership.Conversion:
			if len(x.Args) == 1 {
				return c.view(x.Args[0], st)
			}
		case ownership.Static:
			if recv != nil && c.o.View(fn) && c.o.IsSnapshot(c.info.TypeOf(recv)) && !c.res.Withheld(c.info.TypeOf(recv)) {
				return ownership.TypeName(c.info.TypeOf(recv))
			}
		}
	}
	return ""
}

// through returns the snapshot type whose memory an assignment to l writes,
// or "": l must pass through an index of a slice or pointer, or a pointer.
func (c *checker) through(l ast.Expr, st uint64) string {
	switch x := ast.Unparen(l).(type) {
	case *ast.IndexExpr:
		t := c.info.TypeOf(x.X)
		if t == nil {
			return ""
		}
		switch t.Underlying().(type) {
		case *types.Slice, *types.Pointer:
			return c.view(x.X, st)
		case *types.Array:
			return c.through(x.X, st)
		}
	case *ast.SelectorExpr:
		if sel, ok := c.info.Selections[x]; ok && sel.Kind() == types.FieldVal {
			if t := c.info.TypeOf(x.X); t != nil && isPointer(t) || sel.Indirect() {
				return c.view(x.X, st)
			}
			return c.through(x.X, st)
		}
	case *ast.StarExpr:
		return c.view(x.X, st)
	}
	return ""
}

func (c *checker) report(n ast.Node, snap string) {
	if !c.record || c.seen[n.Pos()] {
		return
	}
	c.seen[n.Pos()] = true
	c.pass.ReportRangef(n, "write through a view of snapshot %s, which is immutable; write to the state head (or a branch of it), or copy the rows first", snap)
}

// step applies one CFG node: writes are checked against the state before
// it, then assignments update which variables hold views.
func (c *checker) step(n ast.Node, st uint64) uint64 {
	c.writes(n, st)
	assign := func(l ast.Expr, snap string) {
		v := dataflow.VarOf(c.info, l)
		if v == nil {
			return
		}
		if snap == "" {
			st &^= c.vars[v]
			return
		}
		if b := c.bit(v); b != 0 {
			st |= b
			c.snap[v] = snap
		}
	}
	switch n := n.(type) {
	case *ast.AssignStmt:
		if n.Tok != token.DEFINE && n.Tok != token.ASSIGN {
			break
		}
		if len(n.Lhs) == len(n.Rhs) {
			snaps := make([]string, len(n.Rhs))
			for i, r := range n.Rhs {
				snaps[i] = c.view(r, st)
			}
			for i, l := range n.Lhs {
				assign(l, snaps[i])
			}
		} else if len(n.Rhs) == 1 {
			s := c.view(n.Rhs[0], st)
			for i, l := range n.Lhs {
				if i == 0 {
					assign(l, s)
				} else {
					assign(l, "")
				}
			}
		}
	case *ast.ValueSpec:
		for i, id := range n.Names {
			s := ""
			if len(n.Values) == len(n.Names) {
				s = c.view(n.Values[i], st)
			} else if len(n.Values) == 1 && i == 0 {
				s = c.view(n.Values[0], st)
			}
			assign(id, s)
		}
	case ast.Expr:
		if rs := c.rangeOf[n]; rs != nil {
			s := ""
			if n == rs.Value {
				s = c.view(rs.X, st)
			}
			assign(n, s)
		}
	}
	return st
}

// writes reports the writes in n through views held in st.
func (c *checker) writes(n ast.Node, st uint64) {
	if !c.record {
		return
	}
	switch n := n.(type) {
	case *ast.AssignStmt:
		for _, l := range n.Lhs {
			if s := c.through(l, st); s != "" {
				c.report(l, s)
			}
		}
	case *ast.IncDecStmt:
		if s := c.through(n.X, st); s != "" {
			c.report(n.X, s)
		}
	}
	ast.Inspect(n, func(x ast.Node) bool {
		call, ok := x.(*ast.CallExpr)
		if !ok {
			_, lit := x.(*ast.FuncLit)
			return !lit
		}
		fn, kind, recv := ownership.Callee(c.info, call)
		switch kind {
		case ownership.Builtin:
			switch ownership.BuiltinName(c.info, call) {
			case "copy", "clear":
				if len(call.Args) > 0 {
					if s := c.view(call.Args[0], st); s != "" {
						c.report(call, s)
					}
				}
			case "append":
				if len(call.Args) > 1 {
					if sl, ok := ast.Unparen(call.Args[0]).(*ast.SliceExpr); ok && !ownership.FullSlice(sl) {
						if s := c.view(sl, st); s != "" {
							c.report(call, s)
						}
					}
				}
			}
		case ownership.Static:
			if recv != nil && c.o.Writes(fn, -1) {
				if s := c.view(recv, st); s != "" {
					c.report(call, s)
				}
			}
			for j, arg := range call.Args {
				if c.o.Writes(fn, ownership.ParamIndex(fn, j)) {
					if s := c.view(arg, st); s != "" {
						c.report(call, s)
					}
				}
			}
		}
		return true
	})
}

func isPointer(t types.Type) bool {
	_, ok := t.Underlying().(*types.Pointer)
	return ok
}
