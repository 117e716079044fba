package streleased

import (
	_ "embed"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/cfg"

	"github.com/gpustate/gpustate/analyzers/internal/analysisutil"
	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
	"github.com/gpustate/gpustate/analyzers/stownership"
)

//go:embed doc.go
var doc string

// Analyzer reports uses of a resource after it was released on every path.
var Analyzer = New(stownership.Analyzer)

// New returns the analyzer reading the oracle and function bodies of own,
// an analyzer made by stownership.New.
func New(own *analysis.Analyzer) *analysis.Analyzer {
	return analysisutil.Checker("streleased", doc, func(pass *analysis.Pass) (any, error) { return run(pass, own) }, own)
}

// run solves, for each function that releases a local variable, the
// must-dataflow problem "which variables are released on every path to
// here" (intersection at joins; a release adds the variable, an assignment
// removes it), and reports every use of a variable in that set.
// Packages without directives return at once.
func run(pass *analysis.Pass, own *analysis.Analyzer) (any, error) {
	res := pass.ResultOf[own].(*stownership.Result).Result
	if !res.Dirs.Active() {
		return nil, nil
	}
	for _, f := range res.Funcs {
		// Tests use released handles on purpose, to check that every
		// call answers ErrReleased.
		if strings.HasSuffix(pass.Fset.File(f.Node.Pos()).Name(), "_test.go") {
			continue
		}
		checkFunc(pass, res, f)
	}
	return nil, nil
}

type checker struct {
	pass    *analysis.Pass
	info    *types.Info
	o       *ownership.Oracle
	res     *ownership.Result
	vars    map[*types.Var]uint64
	method  map[*types.Var]string // the release method used on each variable
	record  bool
	seen    map[token.Pos]bool
	skip    map[*ast.Ident]bool // identifiers that are not uses
	relCall map[*ast.CallExpr]uint64
	fnNode  ast.Node
	defs    map[*types.Var]int          // assignments to each local variable (more than 1: not an alias)
	copies  []aliasCopy                 // w := v between local variables
	aliases map[*types.Var][]*types.Var // variables that hold the same handle for their whole life
	copyOf  map[*ast.AssignStmt][]aliasCopy
	// children maps a local variable to the local variables assigned
	// once a //state:child result of it (cmd := pool.Alloc()): released
	// with it.
	children map[*types.Var][]*types.Var
}

// aliasCopy is an assignment w := v (or w = v) of one local variable to
// another.
type aliasCopy struct{ w, v *types.Var }

// checkFunc checks one function: it finds the releases of local variables
// and the identifiers that are not uses, solves the must-released problem
// over the function's CFG, then replays each block from its fixed point to
// report the uses of released variables.
func checkFunc(pass *analysis.Pass, res *ownership.Result, f *ownership.Func) {
	c := &checker{
		pass:    pass,
		info:    pass.TypesInfo,
		o:       res.Oracle,
		res:     res,
		vars:    make(map[*types.Var]uint64),
		method:  make(map[*types.Var]string),
		seen:    make(map[token.Pos]bool),
		skip:    make(map[*ast.Ident]bool),
		relCall: make(map[*ast.CallExpr]uint64),
		fnNode:  f.Node,
		defs:    make(map[*types.Var]int),
		aliases: make(map[*types.Var][]*types.Var),
		copyOf:  make(map[*ast.AssignStmt][]aliasCopy),

		children: make(map[*types.Var][]*types.Var),
	}
	c.scanAliases(f)
	c.scan(f)
	if len(c.vars) == 0 {
		return
	}
	p := &dataflow.Problem[uint64]{
		Entry:  0,
		Bottom: ^uint64(0),
		Join:   func(a, b uint64) uint64 { return a & b },
		Equal:  func(a, b uint64) bool { return a == b },
		Transfer: func(b *cfg.Block, in uint64) uint64 {
			for _, n := range b.Nodes {
				in = c.node(n, in)
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
			st = c.node(n, st)
		}
	}
}

// scan finds the releases of f's body (outside defer and go statements and
// literals) and the identifiers that are not uses: the operands of == and
// !=, assignment targets, and range keys and values.
func (c *checker) scan(f *ownership.Func) {
	ast.Inspect(f.Body(), func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit, *ast.DeferStmt, *ast.GoStmt:
			return false
		case *ast.CallExpr:
			c.releases(n, f.Node)
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				c.skipIdents(n.X, n.Y)
			}
		case *ast.AssignStmt:
			c.skipIdents(n.Lhs...)
		case *ast.RangeStmt:
			for _, x := range []ast.Expr{n.Key, n.Value} {
				if id, ok := x.(*ast.Ident); ok {
					c.skip[id] = true
				}
			}
		}
		return true
	})
}

// local returns the variable e denotes when it is a local variable of the
// function, else nil.
func (c *checker) local(e ast.Expr) *types.Var {
	v := dataflow.VarOf(c.info, e)
	if v == nil || v.IsField() || v.Pos() < c.fnNode.Pos() || v.Pos() >= c.fnNode.End() {
		return nil
	}
	return v
}

// scanAliases finds the copies w := v between local variables that are
// each assigned once (parameters: never), whose address is never taken:
// such w and v hold the same handle from the copy on, so releasing one
// releases the other.
func (c *checker) scanAliases(f *ownership.Func) {
	def := func(e ast.Expr, n int) {
		if v := c.local(e); v != nil {
			c.defs[v] += n
		}
	}
	// A parameter holds a value on entry: an assignment to it is its
	// second definition (old := s; s = b leaves old the old handle).
	if f.Sig != nil {
		for v := range f.Sig.Params().Variables() {
			c.defs[v]++
		}
		if r := f.Sig.Recv(); r != nil {
			c.defs[r]++
		}
	}
	ast.Inspect(f.Body(), func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				def(l, 1)
				if len(n.Lhs) == len(n.Rhs) && (n.Tok == token.DEFINE || n.Tok == token.ASSIGN) {
					w, v := c.local(l), c.local(n.Rhs[i])
					if w != nil && v != nil && w != v && ownership.Writable(w.Type()) {
						c.copies = append(c.copies, aliasCopy{w, v})
					}
				}
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				def(id, 1)
			}
		case *ast.RangeStmt:
			def(n.Key, 1)
			def(n.Value, 1)
		case *ast.IncDecStmt:
			def(n.X, 2)
		case *ast.UnaryExpr:
			if n.Op == token.AND {
				def(n.X, 2)
			}
		}
		return true
	})
	c.scanChildren(f)
	for _, cp := range c.copies {
		if c.defs[cp.w] == 1 && c.defs[cp.v] <= 1 {
			c.aliases[cp.w] = append(c.aliases[cp.w], cp.v)
			c.aliases[cp.v] = append(c.aliases[cp.v], cp.w)
		}
	}
	ast.Inspect(f.Body(), func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, l := range as.Lhs {
				w, v := c.local(l), c.local(as.Rhs[i])
				if w != nil && v != nil && len(c.aliases[w]) > 0 && slices.Contains(c.aliases[w], v) {
					c.copyOf[as] = append(c.copyOf[as], aliasCopy{w, v})
					// Copying a handle is not a use of it: the uses of
					// the copy are.
					c.skip[ast.Unparen(as.Rhs[i]).(*ast.Ident)] = true
				}
			}
		}
		return true
	})
}

// scanChildren finds the local variables, each assigned once, that hold a
// //state:child result of another local variable (cmd := pool.Alloc(),
// cmd := alloc(pool)): using them after the parent's release is a use
// after release.
func (c *checker) scanChildren(f *ownership.Func) {
	ast.Inspect(f.Body(), func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Rhs) != 1 {
			return true
		}
		call, ok := ast.Unparen(as.Rhs[0]).(*ast.CallExpr)
		if !ok {
			return true
		}
		fn, _, recv := c.o.Callee(c.info, call)
		if fn == nil {
			return true
		}
		var parent ast.Expr
		switch i := c.o.Child(fn); {
		case i == -1:
			parent = recv
		case i >= 0 && i < len(call.Args):
			parent = call.Args[i]
		}
		if parent == nil {
			return true
		}
		p, child := c.local(parent), c.local(as.Lhs[0])
		if p != nil && child != nil && c.defs[child] == 1 {
			c.children[p] = append(c.children[p], child)
		}
		return true
	})
}

// skipIdents marks the identifiers among es (parenthesized or not) as not
// uses.
func (c *checker) skipIdents(es ...ast.Expr) {
	for _, x := range es {
		if id, ok := ast.Unparen(x).(*ast.Ident); ok {
			c.skip[id] = true
		}
	}
}

// releases records the local variables call releases.
func (c *checker) releases(call *ast.CallExpr, fnNode ast.Node) {
	fn, kind, recv := c.o.Callee(c.info, call)
	if kind != ownership.Static {
		return
	}
	var m uint64
	var mark func(v *types.Var)
	mark = func(v *types.Var) {
		if c.res.Withheld(v.Type()) {
			return
		}
		b, ok := c.vars[v]
		if !ok {
			if len(c.vars) == 64 {
				return
			}
			b = 1 << len(c.vars)
			c.vars[v] = b
		}
		if m&b != 0 {
			return
		}
		if _, ok := c.method[v]; !ok {
			c.method[v] = fn.Name()
		}
		m |= b
		for _, w := range c.aliases[v] {
			mark(w)
		}
		for _, w := range c.children[v] {
			mark(w)
		}
	}
	add := func(e ast.Expr) {
		v := dataflow.VarOf(c.info, e)
		if v == nil || v.IsField() || v.Pos() < fnNode.Pos() || v.Pos() >= fnNode.End() {
			return
		}
		mark(v)
		if id, ok := ast.Unparen(e).(*ast.Ident); ok && m&c.vars[v] != 0 {
			c.skip[id] = true
		}
	}
	if recv != nil && c.o.Releases(fn, -1) {
		add(recv)
	}
	for j, arg := range call.Args {
		if call.Ellipsis.IsValid() && j == len(call.Args)-1 {
			continue // f(xs...) releases the elements, not the slice
		}
		if c.o.ReleasesArg(fn, ownership.ParamIndex(fn, j), c.info.TypeOf(arg)) {
			add(arg)
		}
	}
	if m != 0 {
		c.relCall[call] = m
	}
}

// node applies one CFG node: uses are checked against the state on entry,
// then releases add and assignments remove variables.
func (c *checker) node(n ast.Node, st uint64) uint64 {
	if st != 0 {
		c.uses(n, st)
	}
	switch n.(type) {
	case *ast.DeferStmt, *ast.GoStmt:
	default:
		ast.Inspect(n, func(x ast.Node) bool {
			switch x := x.(type) {
			case *ast.FuncLit:
				return false
			case *ast.CallExpr:
				st |= c.relCall[x]
			}
			return true
		})
	}
	switch n := n.(type) {
	case *ast.AssignStmt:
		var copied uint64
		for _, cp := range c.copyOf[n] {
			if st&c.vars[cp.v] != 0 {
				copied |= c.vars[cp.w]
			}
		}
		for _, l := range n.Lhs {
			if v := dataflow.VarOf(c.info, l); v != nil {
				st &^= c.vars[v]
			}
		}
		st |= copied
	case *ast.ValueSpec:
		for _, id := range n.Names {
			if v, ok := c.info.Defs[id].(*types.Var); ok {
				st &^= c.vars[v]
			}
		}
	case *ast.Ident: // range key or value
		if v, ok := c.info.Defs[n].(*types.Var); ok {
			st &^= c.vars[v]
		} else if v, ok := c.info.Uses[n].(*types.Var); ok && c.skip[n] {
			st &^= c.vars[v]
		}
	}
	return st
}

// uses reports the uses in n of variables released in st.
func (c *checker) uses(n ast.Node, st uint64) {
	if !c.record {
		return
	}
	ast.Inspect(n, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.FuncLit:
			return false
		case *ast.Ident:
			if c.skip[x] {
				return true
			}
			v, ok := c.info.Uses[x].(*types.Var)
			if !ok || c.vars[v]&st == 0 || c.seen[x.Pos()] {
				return true
			}
			c.seen[x.Pos()] = true
			rel := c.method[v]
			c.pass.ReportRangef(x, "%s %s is used after %s released it; move the %s after its last use",
				ownership.TypeName(v.Type()), v.Name(), rel, rel)
		}
		return true
	})
}
