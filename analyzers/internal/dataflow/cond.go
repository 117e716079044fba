package dataflow

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/cfg"
)

// Conds returns the boolean conditions that end blocks with a true and a
// false successor (Succs[0] and Succs[1]): the conditions of if and for
// statements and the case expressions of tagless switch statements. Range,
// select and type-switch blocks also have two successors, but no condition.
func Conds(body ast.Node) map[ast.Expr]bool {
	conds := make(map[ast.Expr]bool)
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.IfStmt:
			conds[n.Cond] = true
		case *ast.ForStmt:
			if n.Cond != nil {
				conds[n.Cond] = true
			}
		case *ast.SwitchStmt:
			if n.Tag == nil {
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						conds[e] = true
					}
				}
			}
		}
		return true
	})
	return conds
}

// BranchCond returns the condition that decides b's two successors, or nil.
func BranchCond(b *cfg.Block, conds map[ast.Expr]bool) ast.Expr {
	if len(b.Succs) != 2 || len(b.Nodes) == 0 {
		return nil
	}
	if e, ok := b.Nodes[len(b.Nodes)-1].(ast.Expr); ok && conds[e] {
		return e
	}
	return nil
}

// Implied is what a condition proves about variables when it evaluates to
// a given truth value.
type Implied struct {
	NonNil, Nil []*types.Var // compared with nil
	True, False []*types.Var // boolean variables
}

// Hooks tell ImplyWith about calls whose meaning comes from directives.
type Hooks struct {
	// ErrArg returns the error argument of a call of an error mapper
	// (//state:errmap: its result is nil exactly when the argument is), or
	// nil.
	ErrArg func(call *ast.CallExpr) ast.Expr
	// Valid returns the receiver of a call of a //state:valid method (true
	// exactly when the receiver holds a resource), or nil.
	Valid func(call *ast.CallExpr) ast.Expr
}

// Imply returns what cond proves when it evaluates to truth. It understands
// !, &&, ||, parentheses, comparisons of a variable with nil, and boolean
// variables.
func Imply(info *types.Info, cond ast.Expr, truth bool) Implied {
	return ImplyWith(info, cond, truth, nil)
}

// ImplyWith is Imply that also understands, with h, comparisons of a
// variable with its type's zero value (0, "", an empty composite literal:
// a null handle whatever its type), calls of valid methods, and
// comparisons of an error mapper's result with nil (a check of its
// argument).
func ImplyWith(info *types.Info, cond ast.Expr, truth bool, h *Hooks) Implied {
	im := implier{info: info, h: h}
	im.walk(cond, truth)
	return im.r
}

// implier gathers what a condition proves, one operand at a time.
type implier struct {
	info *types.Info
	h    *Hooks
	r    Implied
}

func (im *implier) walk(e ast.Expr, truth bool) {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		v, ok := im.info.Uses[e].(*types.Var)
		if !ok || !isBool(v.Type()) {
			return
		}
		if truth {
			im.r.True = append(im.r.True, v)
		} else {
			im.r.False = append(im.r.False, v)
		}
	case *ast.UnaryExpr:
		if e.Op == token.NOT {
			im.walk(e.X, !truth)
		}
	case *ast.CallExpr:
		im.call(e, truth)
	case *ast.BinaryExpr:
		switch e.Op {
		case token.LAND:
			if truth {
				im.walk(e.X, true)
				im.walk(e.Y, true)
			}
		case token.LOR:
			if !truth {
				im.walk(e.X, false)
				im.walk(e.Y, false)
			}
		case token.EQL, token.NEQ:
			im.compare(e, truth)
		}
	}
}

// nullity records v as non-nil when nonNil, else as nil.
func (im *implier) nullity(v *types.Var, nonNil bool) {
	if nonNil {
		im.r.NonNil = append(im.r.NonNil, v)
	} else {
		im.r.Nil = append(im.r.Nil, v)
	}
}

// call handles a call in a condition: a valid method, or a predicate of
// an error.
func (im *implier) call(e *ast.CallExpr, truth bool) {
	if im.h != nil && im.h.Valid != nil {
		if recv := im.h.Valid(e); recv != nil {
			if v := VarOf(im.info, recv); v != nil {
				im.nullity(v, truth)
			}
			return
		}
	}
	// A predicate of an error (errors.Is(err, ErrX), isFault(err)) holds,
	// as far as the analyzers care, only of a non-nil error: taking that
	// as proved keeps them quiet on such branches. The assertion helpers
	// assert.NoError and assert.Nil hold of a nil one, so their failure
	// proves it non-nil.
	nilCheck := false
	if sel, ok := ast.Unparen(e.Fun).(*ast.SelectorExpr); ok {
		nilCheck = sel.Sel.Name == "NoError" || sel.Sel.Name == "Nil"
	}
	if truth != nilCheck {
		for _, a := range e.Args {
			if v := VarOf(im.info, a); v != nil && types.Identical(v.Type(), errorType) {
				im.r.NonNil = append(im.r.NonNil, v)
			}
		}
	}
}

// compare handles == and != against nil or a zero value.
func (im *implier) compare(e *ast.BinaryExpr, truth bool) {
	info, h := im.info, im.h
	x, y := e.X, e.Y
	null := func(e ast.Expr) bool { return IsNil(info, e) || h != nil && isZeroValue(info, e) }
	if null(x) {
		x, y = y, x
	}
	if !null(y) {
		return
	}
	if call, ok := ast.Unparen(x).(*ast.CallExpr); ok && h != nil && h.ErrArg != nil && IsNil(info, y) {
		if a := h.ErrArg(call); a != nil {
			x = a // errmap(err) != nil checks err
		}
	}
	if v := VarOf(info, x); v != nil {
		im.nullity(v, (e.Op == token.NEQ) == truth)
	}
}

var errorType = types.Universe.Lookup("error").Type()

func isBool(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsBoolean != 0
}

// isZeroValue reports whether e is the zero value of a non-boolean type: a
// constant 0 or "", or a composite literal without elements.
func isZeroValue(info *types.Info, e ast.Expr) bool {
	if lit, ok := ast.Unparen(e).(*ast.CompositeLit); ok {
		return len(lit.Elts) == 0
	}
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil {
		return false
	}
	switch tv.Value.Kind() {
	case constant.Int, constant.Float:
		return constant.Sign(tv.Value) == 0
	case constant.String:
		return constant.StringVal(tv.Value) == ""
	}
	return false
}

// IsNil reports whether e is the predeclared nil.
func IsNil(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	return ok && tv.IsNil()
}
