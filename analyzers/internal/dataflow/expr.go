package dataflow

import (
	"go/ast"
	"go/token"
	"go/types"
)

// VarOf returns the variable that e (an identifier, possibly parenthesized)
// denotes, or nil.
func VarOf(info *types.Info, e ast.Expr) *types.Var {
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return nil
	}
	v, _ := info.ObjectOf(id).(*types.Var)
	return v
}

// Root returns the variable at the root of an operand: x in x, x.f, x[i],
// x[i:j], *x, &x and (x), or nil when the root is not a variable (a call, a
// literal, a package-level selector is still its variable).
func Root(info *types.Info, e ast.Expr) *types.Var {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.SelectorExpr:
			if sel, ok := info.Selections[x]; ok && sel.Kind() == types.FieldVal {
				e = x.X
				continue
			}
			v, _ := info.ObjectOf(x.Sel).(*types.Var) // qualified identifier
			return v
		case *ast.IndexExpr:
			e = x.X
		case *ast.SliceExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.UnaryExpr:
			if x.Op != token.AND {
				return nil
			}
			e = x.X
		case *ast.Ident:
			v, _ := info.ObjectOf(x).(*types.Var)
			return v
		default:
			return nil
		}
	}
}
