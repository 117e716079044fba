package flow

import (
	"fmt"
	"go/ast"
	"go/types"
	"slices"
	"strings"
	"sync"

	"github.com/gpustate/gpustate/contract"
)

// Directives is what the engine needs from the directives analyzer's result.
type Directives interface {
	Active() bool
	Func(fn *types.Func) *contract.Func
	IsSnapshot(t types.Type) bool
}

// Fact records what statevet inferred about a plain Go function from its body,
// so that callers in other packages see it as if it carried the directives.
// Parameters are numbered from 0; -1 is the receiver.
type Fact struct {
	Acquirer bool  // returns as its first result a resource it acquired and did not release
	Takes    []int // releases or keeps (stores, returns, hands on) these parameters on every path
	Releases []int // releases these parameters on every path (a subset of Takes)
	Writes   []int // writes through these parameters
}

// AFact marks Fact as an analysis fact.
func (*Fact) AFact() {}

// String lists what the fact records, for tests and -debug output.
func (f *Fact) String() string {
	var parts []string
	if f.Acquirer {
		parts = append(parts, "acquirer")
	}
	list := func(name string, ps []int) {
		if len(ps) > 0 {
			s := make([]string, len(ps))
			for i, p := range ps {
				s[i] = fmt.Sprint(p)
			}
			parts = append(parts, name+"("+strings.Join(s, ",")+")")
		}
	}
	list("takes", f.Takes)
	list("releases", f.Releases)
	list("writes", f.Writes)
	return strings.Join(parts, " ")
}

func (f *Fact) empty() bool {
	return !f.Acquirer && len(f.Takes) == 0 && len(f.Releases) == 0 && len(f.Writes) == 0
}

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

// Oracle answers what a call does to its operands, from the function
// directives and from the facts inferred in this package and imported from
// others. Once the flow analyzer has returned it, its methods may be called
// concurrently.
type Oracle struct {
	dirs     Directives
	local    map[*types.Func]*Fact // inferred in this package
	imported map[*types.Func]*Fact // facts of other packages (nil: none)
	importer func(*types.Func, *Fact) bool

	mu             sync.Mutex            // guards imported and releaseMethods
	releaseMethods map[types.Type]string // cache of ReleaseMethod
}

// NewOracle returns an oracle over dirs, importing facts with importer.
func NewOracle(dirs Directives, importer func(*types.Func, *Fact) bool) *Oracle {
	return &Oracle{
		dirs:     dirs,
		local:    make(map[*types.Func]*Fact),
		imported: make(map[*types.Func]*Fact),
		importer: importer,
	}
}

// Dir returns the directives of fn, or nil.
func (o *Oracle) Dir(fn *types.Func) *contract.Func {
	if fn == nil || o.dirs == nil {
		return nil
	}
	return o.dirs.Func(fn.Origin())
}

// Fact returns what was inferred about fn, or nil.
func (o *Oracle) Fact(fn *types.Func) *Fact {
	if fn == nil {
		return nil
	}
	fn = fn.Origin()
	if f, ok := o.local[fn]; ok {
		return f
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if f, ok := o.imported[fn]; ok {
		return f
	}
	var f *Fact
	if fn.Pkg() != nil && o.importer != nil {
		f = new(Fact)
		if !o.importer(fn, f) {
			f = nil
		}
	}
	o.imported[fn] = f
	return f
}

// IsSnapshot reports whether t is a snapshot type or a pointer to one.
func (o *Oracle) IsSnapshot(t types.Type) bool {
	return o.dirs != nil && t != nil && o.dirs.IsSnapshot(t)
}

// Acquires reports whether fn's first result is a resource the caller must release.
func (o *Oracle) Acquires(fn *types.Func) bool {
	if d := o.Dir(fn); d != nil && d.Acquire {
		return true
	}
	f := o.Fact(fn)
	return f != nil && f.Acquirer
}

// Releases reports whether calling fn releases parameter i (-1: the receiver).
func (o *Oracle) Releases(fn *types.Func, i int) bool {
	if d := o.Dir(fn); d != nil {
		if i == -1 && d.Release {
			return true
		}
	}
	f := o.Fact(fn)
	return f != nil && slices.Contains(f.Releases, i)
}

// Takes reports whether fn takes over the obligation to release parameter i.
func (o *Oracle) Takes(fn *types.Func, i int) bool {
	if o.Releases(fn, i) {
		return true
	}
	if d := o.Dir(fn); d != nil && slices.Contains(d.Takes, paramName(fn, i)) {
		return true
	}
	f := o.Fact(fn)
	return f != nil && slices.Contains(f.Takes, i)
}

// Writes reports whether fn writes through parameter i (-1: the receiver).
func (o *Oracle) Writes(fn *types.Func, i int) bool {
	if fn == nil {
		return false
	}
	if d := o.Dir(fn); d != nil && slices.Contains(d.Writes, paramName(fn, i)) {
		return true
	}
	f := o.Fact(fn)
	return f != nil && slices.Contains(f.Writes, i)
}

// View reports whether fn's first result aliases its receiver's memory.
func (o *Oracle) View(fn *types.Func) bool {
	d := o.Dir(fn)
	return d != nil && d.View
}

// Mutates reports whether fn changes its receiver's state.
func (o *Oracle) Mutates(fn *types.Func) bool {
	d := o.Dir(fn)
	return d != nil && (d.Mutates || d.Appends)
}

// ReleaseMethod returns the name of a method of t (or *t) that releases its
// receiver, or "".
func (o *Oracle) ReleaseMethod(t types.Type) string {
	if t == nil {
		return ""
	}
	o.mu.Lock()
	name, ok := o.releaseMethods[t]
	o.mu.Unlock()
	if ok {
		return name
	}
	cands := []types.Type{t}
	if _, ok := types.Unalias(t).(*types.Pointer); !ok && !types.IsInterface(t) {
		cands = append(cands, types.NewPointer(t))
	}
search:
	for _, c := range cands {
		ms := types.NewMethodSet(c)
		for i := range ms.Len() {
			fn, ok := ms.At(i).Obj().(*types.Func)
			if ok && o.Releases(fn.Origin(), -1) {
				name = fn.Name()
				break search
			}
		}
	}
	o.mu.Lock()
	if o.releaseMethods == nil {
		o.releaseMethods = make(map[types.Type]string)
	}
	o.releaseMethods[t] = name
	o.mu.Unlock()
	return name
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
