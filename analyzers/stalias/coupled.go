package stalias

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"

	"github.com/gpustate/gpustate/contract"
)

// Coupled members (docs/GUIDE.md, "Coupled state"). A group's accessor
// returns a member head that the group moves and releases with the other
// members: Rollback, Merge and Release on it answer state.ErrCoupled at
// run time. checkCoupled reports such a call where the head comes from a
// group's accessor: the call itself (g.KV().Rollback(s)), or a variable
// every assignment of which is an accessor call (kv := g.KV()). A member's
// own Snapshot and Branch, and writes through it, are its own: silent.

// groupType is the runtime's group, which a generated group handle holds.
const groupType = "github.com/gpustate/gpustate/runtime/state/internal/store.Group"

// coupledCalls are the calls a member leaves to its group.
var coupledCalls = map[string]bool{"Rollback": true, "Merge": true, "Release": true}

// member is a member head: its accessor and the group handle's type.
type member struct {
	name  string // the accessor: the member's name
	group *types.TypeName
}

// checkCoupled reports Rollback, Merge and Release on members obtained
// from a group's accessor.
func checkCoupled(pass *analysis.Pass) {
	info := pass.TypesInfo
	vars := make(map[*types.Var]*member) // nil entry: assigned otherwise too
	assign := func(lhs ast.Expr, rhs ast.Expr) {
		id, ok := ast.Unparen(lhs).(*ast.Ident)
		if !ok {
			return
		}
		v, ok := info.ObjectOf(id).(*types.Var)
		if !ok {
			return
		}
		m := accessorCall(info, rhs)
		if prev, seen := vars[v]; m == nil || seen && prev == nil {
			vars[v] = nil
			return
		}
		vars[v] = m
	}
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i := range n.Lhs {
						assign(n.Lhs[i], n.Rhs[i])
					}
				} else {
					for _, l := range n.Lhs {
						assign(l, nil)
					}
				}
			case *ast.ValueSpec:
				for i, name := range n.Names {
					var rhs ast.Expr
					if len(n.Values) == len(n.Names) {
						rhs = n.Values[i]
					}
					assign(name, rhs)
				}
			case *ast.RangeStmt:
				if n.Key != nil {
					assign(n.Key, nil)
				}
				if n.Value != nil {
					assign(n.Value, nil)
				}
			case *ast.UnaryExpr:
				if id, ok := ast.Unparen(n.X).(*ast.Ident); ok {
					assign(id, nil) // &v: written through a pointer
				}
			}
			return true
		})
	}
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
			if !ok || !coupledCalls[sel.Sel.Name] {
				return true
			}
			m := accessorCall(info, sel.X)
			if id, ok := ast.Unparen(sel.X).(*ast.Ident); ok && m == nil {
				if v, ok := info.ObjectOf(id).(*types.Var); ok {
					m = vars[v]
				}
			}
			if m != nil {
				pass.Reportf(call.Pos(),
					"%s on member %s of group %s answers state.ErrCoupled: the group moves and releases its members together; call %s on the group",
					sel.Sel.Name, m.name, groupName(m.group), sel.Sel.Name)
			}
			return true
		})
	}
}

// accessorCall returns the member e is, when e is a call of a group
// handle's accessor: a method without parameters of a type that holds a
// runtime group, returning a pointer. nil otherwise.
func accessorCall(info *types.Info, e ast.Expr) *member {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok || len(call.Args) != 0 {
		return nil
	}
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	fn, ok := info.Uses[sel.Sel].(*types.Func)
	if !ok {
		return nil
	}
	sig := fn.Signature()
	if sig.Recv() == nil || sig.Params().Len() != 0 || sig.Results().Len() != 1 {
		return nil
	}
	if _, ok := sig.Results().At(0).Type().(*types.Pointer); !ok {
		return nil
	}
	recv := sig.Recv().Type()
	if p, ok := recv.(*types.Pointer); ok {
		recv = p.Elem()
	}
	named, ok := types.Unalias(recv).(*types.Named)
	if !ok || !holdsGroup(named) {
		return nil
	}
	return &member{name: fn.Name(), group: named.Obj()}
}

// holdsGroup reports whether t's struct holds a *state.Group: a group
// handle stategen generated.
func holdsGroup(t *types.Named) bool {
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return false
	}
	for i := range st.NumFields() {
		if p, ok := st.Field(i).Type().(*types.Pointer); ok {
			if n, ok := types.Unalias(p.Elem()).(*types.Named); ok && n.Obj().Pkg() != nil &&
				n.Obj().Pkg().Path()+"."+n.Obj().Name() == groupType {
				return true
			}
		}
	}
	return false
}

// groupName names the group a handle type was generated for: the
// declared type G for which contract.GeneratedNames(G).Head is the
// handle's name, else the handle's own name.
func groupName(handle *types.TypeName) string {
	name := handle.Name()
	if handle.Pkg() == nil {
		return name
	}
	declared := func(typ string) bool {
		_, ok := handle.Pkg().Scope().Lookup(typ).(*types.TypeName)
		return ok
	}
	if g, n, ok := contract.GeneratedFor(name, declared); ok && n.Head == name {
		return g
	}
	return name
}
