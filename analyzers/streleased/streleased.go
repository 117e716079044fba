package streleased

import (
	_ "embed"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/cfg"

	"github.com/gpustate/gpustate/analyzers/internal/analysisutil"
	"github.com/gpustate/gpustate/analyzers/internal/flow"
)

//go:embed doc.go
var doc string

// Analyzer reports uses of a resource after it was released on every path.
var Analyzer = &analysis.Analyzer{
	Name:     "streleased",
	Doc:      analysisutil.MustExtractDoc(doc, "streleased"),
	URL:      "https://pkg.go.dev/github.com/gpustate/gpustate/analyzers/streleased",
	Run:      run,
	Requires: []*analysis.Analyzer{flow.Analyzer},
}

// run solves, for each function that releases a local variable, the
// must-dataflow problem "which variables are released on every path to
// here" (intersection at joins; a release adds the variable, an assignment
// removes it), and reports every use of a variable in that set.
// Packages without directives return at once.
func run(pass *analysis.Pass) (any, error) {
	res := pass.ResultOf[flow.Analyzer].(*flow.Result)
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
	o       *flow.Oracle
	res     *flow.Result
	vars    map[*types.Var]uint64
	method  map[*types.Var]string // the release method used on each variable
	record  bool
	seen    map[token.Pos]bool
	skip    map[*ast.Ident]bool // identifiers that are not uses
	relCall map[*ast.CallExpr]uint64
}

func checkFunc(pass *analysis.Pass, res *flow.Result, f *flow.Func) {
	o := res.Oracle
	var body *ast.BlockStmt
	switch n := f.Node.(type) {
	case *ast.FuncDecl:
		body = n.Body
	case *ast.FuncLit:
		body = n.Body
	}
	c := &checker{
		pass:    pass,
		info:    pass.TypesInfo,
		o:       o,
		res:     res,
		vars:    make(map[*types.Var]uint64),
		method:  make(map[*types.Var]string),
		seen:    make(map[token.Pos]bool),
		skip:    make(map[*ast.Ident]bool),
		relCall: make(map[*ast.CallExpr]uint64),
	}
	// Find the releases (outside defer and go statements and literals)
	// and the identifiers that are not uses.
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit, *ast.DeferStmt, *ast.GoStmt:
			return false
		case *ast.CallExpr:
			c.releases(n, f.Node)
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				for _, x := range []ast.Expr{n.X, n.Y} {
					if id, ok := ast.Unparen(x).(*ast.Ident); ok {
						c.skip[id] = true
					}
				}
			}
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if id, ok := ast.Unparen(l).(*ast.Ident); ok {
					c.skip[id] = true
				}
			}
		case *ast.RangeStmt:
			for _, x := range []ast.Expr{n.Key, n.Value} {
				if id, ok := x.(*ast.Ident); ok {
					c.skip[id] = true
				}
			}
		}
		return true
	})
	if len(c.vars) == 0 {
		return
	}
	p := &flow.Problem[uint64]{
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
	ins, ok := flow.Solve(f.In.CFG, p)
	if !ok {
		return
	}
	c.record = true
	for _, b := range f.In.CFG.Blocks {
		if !b.Live {
			continue
		}
		st := ins[b.Index]
		for _, n := range b.Nodes {
			st = c.node(n, st)
		}
	}
}

// releases records the local variables call releases.
func (c *checker) releases(call *ast.CallExpr, fnNode ast.Node) {
	fn, kind, recv := flow.Callee(c.info, call)
	if kind != flow.Static {
		return
	}
	var m uint64
	add := func(e ast.Expr) {
		v := flow.VarOf(c.info, e)
		if v == nil || v.IsField() || v.Pos() < fnNode.Pos() || v.Pos() >= fnNode.End() || c.res.Withheld(v.Type()) {
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
		if _, ok := c.method[v]; !ok {
			c.method[v] = fn.Name()
		}
		m |= b
		if id, ok := ast.Unparen(e).(*ast.Ident); ok {
			c.skip[id] = true
		}
	}
	if recv != nil && c.o.Releases(fn, -1) {
		add(recv)
	}
	for j, arg := range call.Args {
		if c.o.Releases(fn, flow.ParamIndex(fn, j)) {
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
		for _, l := range n.Lhs {
			if v := flow.VarOf(c.info, l); v != nil {
				st &^= c.vars[v]
			}
		}
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
				flow.TypeName(v.Type()), v.Name(), rel, rel)
		}
		return true
	})
}
