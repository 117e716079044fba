package ownership

import (
	"go/ast"
	"go/types"
	"slices"
	"sync"

	"github.com/gpustate/gpustate/contract"
)

// Directives is what the oracle needs from the directives analyzer's result.
type Directives interface {
	Active() bool
	Func(fn *types.Func) *contract.Func
	IsSnapshot(t types.Type) bool
}

// Oracle answers what a call does to its operands, from the function
// directives and from the facts inferred in this package and imported from
// others. Once the analyzer that built it has returned it, its methods may
// be called concurrently.
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

// Callee is the package's Callee, except that a call of an interface
// method whose facts are declared is Static: the method carries directives
// (in the interface's declaration or on //state:extern lines), or its
// interface declares a release method, so that its other methods are known
// to do nothing to their operands' ownership (docs/DIRECTIVES.md).
func (o *Oracle) Callee(info *types.Info, call *ast.CallExpr) (*types.Func, CalleeKind, ast.Expr) {
	fn, kind, recv := Callee(info, call)
	if kind == Dynamic && fn != nil && recv != nil && fn.Signature().Recv() != nil {
		if t := fn.Signature().Recv().Type(); !isTypeParam(t) && (o.Dir(fn) != nil || o.ReleaseMethod(t) != "") {
			kind = Static
		}
	}
	return fn, kind, recv
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

// Acquires reports whether a result of fn is a resource the caller must release.
func (o *Oracle) Acquires(fn *types.Func) bool {
	if d := o.Dir(fn); d != nil && d.Acquire {
		return true
	}
	f := o.Fact(fn)
	return f != nil && (f.Acquirer || len(f.Results) > 0)
}

// AcquiredResults returns the indices of fn's results that are each a new
// resource (//state:acquire N..., else the first), or nil.
func (o *Oracle) AcquiredResults(fn *types.Func) []int {
	if d := o.Dir(fn); d != nil && d.Acquire {
		return d.AcquiredResults()
	}
	f := o.Fact(fn)
	if f == nil {
		return nil
	}
	var rs []int
	if f.Acquirer {
		rs = append(rs, 0)
	}
	return append(rs, f.Results...)
}

// Releaser returns the index of the result of fn that releases what it
// acquires (a returned func()), declared or inferred, or -1.
func (o *Oracle) Releaser(fn *types.Func) int {
	if d := o.Dir(fn); d != nil && d.Releaser > 0 {
		return d.Releaser - 1
	}
	if f := o.Fact(fn); f != nil && f.Releaser > 0 {
		return f.Releaser - 1
	}
	return -1
}

// Child returns the parameter (-1: the receiver) that fn's first result
// belongs to (//state:child), or -2.
func (o *Oracle) Child(fn *types.Func) int {
	d := o.Dir(fn)
	if d == nil || d.Child == "" {
		return -2
	}
	if d.Child == "recv" {
		return -1
	}
	sig := fn.Signature()
	for i := range sig.Params().Len() {
		if sig.Params().At(i).Name() == d.Child {
			return i
		}
	}
	return -2
}

// Valid reports whether fn reports whether its receiver holds a resource
// (//state:valid).
func (o *Oracle) Valid(fn *types.Func) bool {
	d := o.Dir(fn)
	return d != nil && d.Valid
}

// ErrMap reports whether fn returns a nil error exactly when its error
// argument is nil (//state:errmap, or inferred).
func (o *Oracle) ErrMap(fn *types.Func) bool {
	if d := o.Dir(fn); d != nil && d.ErrMap {
		return true
	}
	f := o.Fact(fn)
	return f != nil && f.ErrMap
}

// TakesOnSuccess reports whether fn takes parameter i only when its error
// result is nil (//state:takes NAME onsuccess).
func (o *Oracle) TakesOnSuccess(fn *types.Func, i int) bool {
	d := o.Dir(fn)
	return d != nil && len(d.TakesOnSuccess) > 0 && slices.Contains(d.TakesOnSuccess, paramName(fn, i))
}

// Releases reports whether calling fn releases parameter i (-1: the
// receiver): a release method, a //state:frees parameter, or inferred.
func (o *Oracle) Releases(fn *types.Func, i int) bool {
	if d := o.Dir(fn); d != nil {
		if i == -1 && d.Release {
			return true
		}
		if i >= 0 && len(d.Frees) > 0 && slices.Contains(d.Frees, paramName(fn, i)) {
			return true
		}
	}
	f := o.Fact(fn)
	return f != nil && slices.Contains(f.Releases, i)
}

// Disposes reports whether calling fn releases parameter i, or calls on it
// a method of its interface or type-parameter type that may be its release
// (see Fact.Disposes).
func (o *Oracle) Disposes(fn *types.Func, i int) bool {
	if o.Releases(fn, i) {
		return true
	}
	f := o.Fact(fn)
	return f != nil && slices.Contains(f.Disposes, i)
}

// ReleasesArg reports whether calling fn releases an argument of type t
// bound to parameter i: fn releases the parameter, or disposes of it (see
// Fact.Disposes) and t's release method is a method of the parameter's
// type.
func (o *Oracle) ReleasesArg(fn *types.Func, i int, t types.Type) bool {
	if o.Releases(fn, i) {
		return true
	}
	if fn == nil || !o.Disposes(fn, i) {
		return false
	}
	name := o.ReleaseMethod(t)
	p := ParamVar(fn.Signature(), i)
	if name == "" || p == nil {
		return false
	}
	pt := p.Type()
	if fn.Signature().Variadic() && i == fn.Signature().Params().Len()-1 {
		if s, ok := pt.Underlying().(*types.Slice); ok {
			pt = s.Elem()
		}
	}
	if tp, ok := types.Unalias(pt).(*types.TypeParam); ok {
		pt = tp.Constraint()
	}
	iface, ok := pt.Underlying().(*types.Interface)
	if !ok {
		return false
	}
	for m := range iface.Methods() {
		if m.Name() == name && MayDispose(m) {
			return true
		}
	}
	return false
}

// MayDispose reports whether fn, a method of an interface or type
// parameter, may be a release: it takes no arguments and returns nothing
// or an error.
func MayDispose(fn *types.Func) bool {
	if fn == nil {
		return false
	}
	sig := fn.Signature()
	if sig.Params().Len() != 0 {
		return false
	}
	res := sig.Results()
	return res.Len() == 0 || res.Len() == 1 && types.Identical(res.At(0).Type(), types.Universe.Lookup("error").Type())
}

// keeps lists the functions of the standard library that keep an argument
// beyond the call, by parameter: handing a resource to them is an escape
// (docs/analyzers/stcleanup.md). A finalizer or cleanup is not a release: the
// resource waits for the garbage collector, and statevet stays silent.
var keeps = map[string][]int{
	"(*sync.Map).Store":               {1},
	"(*sync.Map).LoadOrStore":         {1},
	"(*sync.Map).Swap":                {1},
	"(*sync.Map).CompareAndSwap":      {2},
	"(*sync.Pool).Put":                {0},
	"(*sync/atomic.Value).Store":      {0},
	"(*sync/atomic.Value).Swap":       {0},
	"(*sync/atomic.Pointer[T]).Store": {0},
	"(*sync/atomic.Pointer[T]).Swap":  {0},
	"runtime.SetFinalizer":            {0},
	"runtime.AddCleanup":              {0, 2},
	"context.WithValue":               {2},
}

// keeperPkgs are the packages of the functions in keeps.
var keeperPkgs = map[string]bool{"sync": true, "sync/atomic": true, "runtime": true, "context": true}

// Takes reports whether fn takes over the obligation to release parameter i.
func (o *Oracle) Takes(fn *types.Func, i int) bool {
	if o.Releases(fn, i) {
		return true
	}
	if fn != nil && fn.Pkg() != nil && keeperPkgs[fn.Pkg().Path()] && slices.Contains(keeps[fn.Origin().FullName()], i) {
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
	if DeviceDst(fn, i) {
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
// receiver, one without arguments where there is one, or "".
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
	// A release without arguments first (Close), then one that takes
	// some (w.release(dev)).
search:
	for _, withArgs := range []bool{false, true} {
		for _, c := range cands {
			ms := types.NewMethodSet(c)
			for i := range ms.Len() {
				fn, ok := ms.At(i).Obj().(*types.Func)
				if ok && (fn.Signature().Params().Len() > 0) == withArgs && o.Releases(fn.Origin(), -1) {
					name = fn.Name()
					break search
				}
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
