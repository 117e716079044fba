package ownership

import (
	"go/ast"
	"go/types"
)

// CalleeKind classifies the function a call invokes.
type CalleeKind int

// The kinds of callee.
const (
	Static     CalleeKind = iota // a function or concrete method known at compile time
	Dynamic                      // an interface method or a function value
	Builtin                      // a built-in function such as append or copy
	Conversion                   // a type conversion
)

// Callee returns the function call invokes (the generic origin for
// instances), its kind, and for method calls the receiver operand.
func Callee(info *types.Info, call *ast.CallExpr) (fn *types.Func, kind CalleeKind, recv ast.Expr) {
	fun := ast.Unparen(call.Fun)
	if tv, ok := info.Types[fun]; ok && tv.IsType() {
		return nil, Conversion, nil
	}
	switch f := fun.(type) {
	case *ast.IndexExpr:
		fun = ast.Unparen(f.X)
	case *ast.IndexListExpr:
		fun = ast.Unparen(f.X)
	}
	var id *ast.Ident
	switch f := fun.(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
		if sel, ok := info.Selections[f]; ok {
			switch sel.Kind() {
			case types.MethodVal:
				recv = f.X
				fn, _ := sel.Obj().(*types.Func)
				if fn == nil {
					return nil, Dynamic, recv
				}
				if types.IsInterface(sel.Recv()) || isTypeParam(sel.Recv()) {
					return fn.Origin(), Dynamic, recv
				}
				return fn.Origin(), Static, recv
			case types.MethodExpr:
				fn, _ := sel.Obj().(*types.Func)
				if fn == nil || types.IsInterface(sel.Recv()) {
					return nil, Dynamic, nil
				}
				return fn.Origin(), Static, nil
			}
		}
	default:
		return nil, Dynamic, nil
	}
	switch obj := info.Uses[id].(type) {
	case *types.Func:
		return obj.Origin(), Static, nil
	case *types.Builtin:
		return nil, Builtin, nil
	}
	return nil, Dynamic, nil
}

func isTypeParam(t types.Type) bool {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	_, ok := types.Unalias(t).(*types.TypeParam)
	return ok
}

// BuiltinName returns the name of the built-in function call invokes, or "".
func BuiltinName(info *types.Info, call *ast.CallExpr) string {
	if id, ok := ast.Unparen(call.Fun).(*ast.Ident); ok {
		if b, ok := info.Uses[id].(*types.Builtin); ok {
			return b.Name()
		}
	}
	return ""
}

// ParamIndex maps the index of an argument of a call to fn onto the index of
// the parameter it binds (the last one for variadic arguments), or -2.
func ParamIndex(fn *types.Func, arg int) int {
	sig, ok := fn.Type().(*types.Signature)
	if !ok {
		return -2
	}
	n := sig.Params().Len()
	if arg < n {
		return arg
	}
	if sig.Variadic() && n > 0 {
		return n - 1
	}
	return -2
}

// paramName returns the name of parameter i (-1: the receiver) of fn.
func paramName(fn *types.Func, i int) string {
	sig, ok := fn.Type().(*types.Signature)
	if !ok {
		return ""
	}
	if i == -1 {
		if sig.Recv() == nil {
			return ""
		}
		return sig.Recv().Name()
	}
	if i < 0 || i >= sig.Params().Len() {
		return ""
	}
	return sig.Params().At(i).Name()
}

// ParamVar returns parameter i (-1: the receiver) of sig, or nil.
func ParamVar(sig *types.Signature, i int) *types.Var {
	if i == -1 {
		return sig.Recv()
	}
	if i < 0 || i >= sig.Params().Len() {
		return nil
	}
	return sig.Params().At(i)
}

// TypeName returns the name of the named type t denotes (through pointers),
// for messages.
func TypeName(t types.Type) string {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := types.Unalias(t).(*types.Named); ok {
		return n.Obj().Name()
	}
	return types.TypeString(t, func(*types.Package) string { return "" })
}
