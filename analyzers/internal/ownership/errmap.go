package ownership

import (
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/ast/inspector"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
)

// Error-mapper inference.
//
// A function is an error mapper (//state:errmap) when it returns a nil
// error exactly when its error argument is nil: if err == nil { return nil }
// first and only values that cannot be nil after it, or
// if err != nil { ...; return X } then return nil. A check of its result
// is then a check of the argument: if err := mapErr(err); err != nil is
// the error check of the call that set err. The scan is syntactic and
// looks only at functions shaped func(..., err error, ...) error, so it
// runs in every package.

// inferErrMaps marks the package's error mappers in o.
func inferErrMaps(info *types.Info, o *Oracle, insp *inspector.Inspector) {
	for n := range insp.PreorderSeq((*ast.FuncDecl)(nil)) {
		d := n.(*ast.FuncDecl)
		if d.Body == nil {
			continue
		}
		fn, ok := info.Defs[d.Name].(*types.Func)
		if !ok {
			continue
		}
		p := errMapParam(fn.Signature())
		if p == nil || !mapsErr(info, d.Body, p) {
			continue
		}
		f := o.local[fn]
		if f == nil {
			f = new(Fact)
			o.local[fn] = f
		}
		f.ErrMap = true
	}
}

// errMapParam returns the one error parameter of sig when sig returns a
// single error, else nil.
func errMapParam(sig *types.Signature) *types.Var {
	if sig.Results().Len() != 1 || !isError(sig.Results().At(0).Type()) {
		return nil
	}
	var p *types.Var
	for v := range sig.Params().Variables() {
		if isError(v.Type()) {
			if p != nil {
				return nil
			}
			p = v
		}
	}
	return p
}

func isError(t types.Type) bool { return types.Identical(t, errorType) }

var errorType = types.Universe.Lookup("error").Type()

// mapsErr reports whether body returns nil exactly when p is nil, in one
// of the two shapes the inference knows.
func mapsErr(info *types.Info, body *ast.BlockStmt, p *types.Var) bool {
	if len(body.List) < 2 || assigns(info, body, p) {
		return false
	}
	guard, ok := body.List[0].(*ast.IfStmt)
	if !ok || guard.Init != nil || guard.Else != nil {
		return false
	}
	switch {
	case testsNil(info, guard.Cond, p, token.EQL):
		// if err == nil { return nil }; every later return non-nil.
		if len(guard.Body.List) != 1 || !returnsNil(guard.Body.List[0]) {
			return false
		}
		return allNonNil(info, body.List[1:], p)
	case testsNil(info, guard.Cond, p, token.NEQ) && len(body.List) == 2:
		// if err != nil { ...; return X }; return nil.
		n := len(guard.Body.List)
		if n == 0 || !returnsNil(body.List[1]) {
			return false
		}
		if _, ok := guard.Body.List[n-1].(*ast.ReturnStmt); !ok {
			return false
		}
		return allNonNil(info, guard.Body.List, p)
	}
	return false
}

// testsNil reports whether cond is p == nil (op EQL) or p != nil (NEQ).
func testsNil(info *types.Info, cond ast.Expr, p *types.Var, op token.Token) bool {
	b, ok := ast.Unparen(cond).(*ast.BinaryExpr)
	if !ok || b.Op != op {
		return false
	}
	x, y := b.X, b.Y
	if dataflow.IsNil(info, x) {
		x, y = y, x
	}
	return dataflow.IsNil(info, y) && dataflow.VarOf(info, x) == p
}

func returnsNil(s ast.Stmt) bool {
	r, ok := s.(*ast.ReturnStmt)
	if !ok || len(r.Results) != 1 {
		return false
	}
	id, ok := ast.Unparen(r.Results[0]).(*ast.Ident)
	return ok && id.Name == "nil"
}

// allNonNil reports whether every return in list, outside function
// literals, returns a value that cannot be nil where p is not nil.
func allNonNil(info *types.Info, list []ast.Stmt, p *types.Var) bool {
	ok := true
	for _, s := range list {
		ast.Inspect(s, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.ReturnStmt:
				if len(n.Results) != 1 || !nonNilError(info, n.Results[0], p) {
					ok = false
				}
			}
			return ok
		})
	}
	return ok
}

// nonNilError reports whether e cannot be nil where p is not nil: p
// itself, &T{...} or T{...}, fmt.Errorf, errors.New, errors.Join or a
// conversion of one, or a package's sentinel error variable.
func nonNilError(info *types.Info, e ast.Expr, p *types.Var) bool {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		v, ok := info.Uses[x].(*types.Var)
		return ok && (v == p || v.Pkg() != nil && v.Parent() == v.Pkg().Scope())
	case *ast.SelectorExpr:
		v, ok := info.Uses[x.Sel].(*types.Var)
		return ok && !v.IsField() && v.Pkg() != nil && v.Parent() == v.Pkg().Scope()
	case *ast.CompositeLit:
		return true
	case *ast.UnaryExpr:
		_, ok := ast.Unparen(x.X).(*ast.CompositeLit)
		return x.Op == token.AND && ok
	case *ast.CallExpr:
		fn, kind, _ := Callee(info, x)
		if kind == Conversion && len(x.Args) == 1 {
			return nonNilError(info, x.Args[0], p)
		}
		if kind != Static || fn == nil || fn.Pkg() == nil {
			return false
		}
		switch fn.Pkg().Path() + "." + fn.Name() {
		case "fmt.Errorf", "errors.New":
			return true
		case "errors.Join":
			for _, a := range x.Args {
				if dataflow.VarOf(info, a) == p {
					return true
				}
			}
		}
	}
	return false
}

// assigns reports whether body assigns p.
func assigns(info *types.Info, body *ast.BlockStmt, p *types.Var) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok {
			for _, l := range as.Lhs {
				if dataflow.VarOf(info, l) == p {
					found = true
				}
			}
		}
		return !found
	})
	return found
}
