package flow

import (
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/cfg"
)

// A Problem is a forward dataflow problem over a CFG whose states are values
// of type S. States must be treated as immutable: Transfer and Edge return a
// new state rather than modifying their argument.
type Problem[S any] struct {
	Entry    S                                     // state on entry to the function
	Bottom   S                                     // state of a block not yet reached
	Join     func(a, b S) S                        // least upper bound
	Equal    func(a, b S) bool                     // whether two states are the same
	Transfer func(b *cfg.Block, in S) S            // effect of the block's nodes
	Edge     func(b *cfg.Block, succ int, out S) S // refinement along b.Succs[succ]; nil: none
}

// maxVisits bounds the work per block; a problem that has not converged by
// then is abandoned (its function reports nothing).
const maxVisits = 64

// Solve computes the state on entry to every live block of g. It reports false
// when the iteration did not converge within its budget; callers then report
// nothing for the function, which keeps the analyzers quiet rather than wrong.
func Solve[S any](g *cfg.CFG, p *Problem[S]) (in []S, ok bool) {
	n := len(g.Blocks)
	in = make([]S, n)
	reached := make([]bool, n)
	for i := range in {
		in[i] = p.Bottom
	}
	if n == 0 {
		return in, true
	}
	in[0] = p.Entry
	reached[0] = true
	visits := make([]int, n)
	queued := make([]bool, n)
	work := []*cfg.Block{g.Blocks[0]}
	queued[0] = true
	for len(work) > 0 {
		b := work[len(work)-1]
		work = work[:len(work)-1]
		queued[b.Index] = false
		visits[b.Index]++
		if visits[b.Index] > maxVisits {
			return in, false
		}
		out := p.Transfer(b, in[b.Index])
		for i, succ := range b.Succs {
			s := out
			if p.Edge != nil {
				s = p.Edge(b, i, out)
			}
			j := succ.Index
			var next S
			if reached[j] {
				next = p.Join(in[j], s)
				if p.Equal(next, in[j]) {
					continue
				}
			} else {
				next = s
				reached[j] = true
			}
			in[j] = next
			if !queued[j] {
				queued[j] = true
				work = append(work, succ)
			}
		}
	}
	return in, true
}

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

// Imply returns what cond proves when it evaluates to truth. It understands
// !, &&, ||, parentheses, comparisons of a variable with nil, and boolean
// variables.
func Imply(info *types.Info, cond ast.Expr, truth bool) Implied {
	var r Implied
	var walk func(e ast.Expr, truth bool)
	walk = func(e ast.Expr, truth bool) {
		switch e := ast.Unparen(e).(type) {
		case *ast.Ident:
			v, ok := info.Uses[e].(*types.Var)
			if !ok || !isBool(v.Type()) {
				return
			}
			if truth {
				r.True = append(r.True, v)
			} else {
				r.False = append(r.False, v)
			}
		case *ast.UnaryExpr:
			if e.Op == token.NOT {
				walk(e.X, !truth)
			}
		case *ast.CallExpr:
			// A predicate of an error (errors.Is(err, ErrX), isFault(err))
			// holds, as far as the analyzers care, only of a non-nil error:
			// taking that as proved keeps them quiet on such branches. The
			// assertion helpers assert.NoError and assert.Nil hold of a nil
			// one, so their failure proves it non-nil.
			nilCheck := false
			if sel, ok := ast.Unparen(e.Fun).(*ast.SelectorExpr); ok {
				nilCheck = sel.Sel.Name == "NoError" || sel.Sel.Name == "Nil"
			}
			if truth != nilCheck {
				for _, a := range e.Args {
					if v := VarOf(info, a); v != nil && types.Identical(v.Type(), errorType) {
						r.NonNil = append(r.NonNil, v)
					}
				}
			}
		case *ast.BinaryExpr:
			switch e.Op {
			case token.LAND:
				if truth {
					walk(e.X, true)
					walk(e.Y, true)
				}
			case token.LOR:
				if !truth {
					walk(e.X, false)
					walk(e.Y, false)
				}
			case token.EQL, token.NEQ:
				x, y := e.X, e.Y
				if nilExpr(info, x) {
					x, y = y, x
				}
				if !nilExpr(info, y) {
					return
				}
				v := VarOf(info, x)
				if v == nil {
					return
				}
				if (e.Op == token.NEQ) == truth {
					r.NonNil = append(r.NonNil, v)
				} else {
					r.Nil = append(r.Nil, v)
				}
			}
		}
	}
	walk(cond, truth)
	return r
}

var errorType = types.Universe.Lookup("error").Type()

func isBool(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsBoolean != 0
}

func nilExpr(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	return ok && tv.IsNil()
}

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
