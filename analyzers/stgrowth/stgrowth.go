package stgrowth

import (
	_ "embed"
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"

	"github.com/gpustate/gpustate/analyzers/directives"
	"github.com/gpustate/gpustate/analyzers/internal/analysisutil"
	"github.com/gpustate/gpustate/contract"
)

//go:embed doc.go
var doc string

// Analyzer reports state that may grow without a bound.
var Analyzer = &analysis.Analyzer{
	Name:     "stgrowth",
	Doc:      analysisutil.MustExtractDoc(doc, "stgrowth"),
	URL:      "https://pkg.go.dev/github.com/gpustate/gpustate/analyzers/stgrowth",
	Run:      analysisutil.WithIgnores(run),
	Requires: []*analysis.Analyzer{directives.Analyzer},
}

// run reports the stgrowth diagnostics of the package's parse (package
// contract keeps them only for contracts without stcontract errors), then
// walks every function body for calls to appends methods, known from local
// directives or imported facts, made inside a for or range loop as an
// expression statement or with the error result assigned to _. A function
// literal starts afresh: its body runs when it is called, not per iteration
// of the loop around it. Inactive packages return at once.
func run(pass *analysis.Pass) (any, error) {
	r := pass.ResultOf[directives.Analyzer].(*directives.Result)
	if !r.Active() {
		return nil, nil
	}
	for _, d := range r.Package().Diagnostics {
		if d.Analyzer == contract.StGrowth {
			analysisutil.Report(pass, d)
		}
	}
	for _, f := range pass.Files {
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				walk(pass, r, fd.Body, false)
			}
		}
	}
	return nil, nil
}

// walk visits n, inLoop saying whether n runs once per iteration of a loop.
func walk(pass *analysis.Pass, r *directives.Result, n ast.Node, inLoop bool) {
	if n == nil {
		return
	}
	ast.Inspect(n, func(m ast.Node) bool {
		if m == nil {
			return true
		}
		switch m := m.(type) {
		case *ast.ForStmt:
			walk(pass, r, m.Init, inLoop)
			walk(pass, r, m.Cond, true)
			walk(pass, r, m.Post, true)
			walk(pass, r, m.Body, true)
			return false
		case *ast.RangeStmt:
			walk(pass, r, m.X, inLoop)
			walk(pass, r, m.Body, true)
			return false
		case *ast.FuncLit:
			walk(pass, r, m.Body, false)
			return false
		case *ast.ExprStmt:
			if inLoop {
				if call, ok := ast.Unparen(m.X).(*ast.CallExpr); ok {
					check(pass, r, call, nil)
				}
			}
		case *ast.AssignStmt:
			if inLoop && len(m.Rhs) == 1 {
				if call, ok := ast.Unparen(m.Rhs[0]).(*ast.CallExpr); ok {
					check(pass, r, call, m.Lhs)
				}
			}
		}
		return true
	})
}

// check reports call if it calls an appends method and discards its error:
// lhs is nil for an expression statement, else the assignment's left side.
func check(pass *analysis.Pass, r *directives.Result, call *ast.CallExpr, lhs []ast.Expr) {
	fn, ok := typeutil.Callee(pass.TypesInfo, call).(*types.Func)
	if !ok {
		return
	}
	d := r.Func(fn)
	if d == nil || !d.Appends {
		return
	}
	sig, ok := fn.Type().(*types.Signature)
	if !ok {
		return
	}
	res := sig.Results()
	discarded := false
	for i := 0; i < res.Len(); i++ {
		if !isError(res.At(i).Type()) {
			continue
		}
		switch {
		case lhs == nil:
			discarded = true
		case len(lhs) == res.Len():
			if id, ok := lhs[i].(*ast.Ident); ok && id.Name == "_" {
				discarded = true
			}
		}
	}
	if !discarded {
		return
	}
	state := "the state"
	if recv := sig.Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if named, ok := types.Unalias(t).(*types.Named); ok {
			state = named.Obj().Name()
		}
	}
	pass.ReportRangef(call,
		"error of %s is discarded inside a loop; once %s reaches its bound every later append fails (state.ErrBound) and the loop goes on unaware: check the error",
		fnName(fn, sig, pass.Pkg), state)
}

func isError(t types.Type) bool {
	return types.Identical(t, types.Universe.Lookup("error").Type())
}

// fnName names fn relative to pkg: "Append", "(*KVCacheState).Append",
// "(*kv.KVCacheState).Append".
func fnName(fn *types.Func, sig *types.Signature, pkg *types.Package) string {
	qual := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Name()
	}
	if recv := sig.Recv(); recv != nil {
		t := types.TypeString(recv.Type(), qual)
		if strings.HasPrefix(t, "*") {
			return "(" + t + ")." + fn.Name()
		}
		return t + "." + fn.Name()
	}
	if fn.Pkg() != nil && fn.Pkg() != pkg {
		return fn.Pkg().Name() + "." + fn.Name()
	}
	return fn.Name()
}
