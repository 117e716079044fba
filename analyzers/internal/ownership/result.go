package ownership

import (
	"go/ast"
	"go/types"
	"slices"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/ctrlflow"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/cfg"

	"github.com/gpustate/gpustate/analyzers/directives"
	"github.com/gpustate/gpustate/contract"
)

// Result is what the dataflow analyzers share about one package.
type Result struct {
	// Dirs answers for the directives: the directives analyzer's result.
	Dirs Directives
	// Oracle answers what calls do, from directives and facts (complete
	// only when Dirs.Active() and Infer has run). The analyzers that read
	// the result may call it concurrently.
	Oracle *Oracle
	// Funcs are the package's function bodies with their CFGs, in source
	// order; nil when the package is inactive.
	Funcs []*Func
}

// Func is one function body of the package.
type Func struct {
	Node ast.Node         // *ast.FuncDecl or *ast.FuncLit
	Obj  *types.Func      // the declared function; nil for a literal
	Sig  *types.Signature // its type
	CFG  *cfg.CFG         // its control-flow graph
}

// Body returns the function's body.
func (f *Func) Body() *ast.BlockStmt {
	switch n := f.Node.(type) {
	case *ast.FuncDecl:
		return n.Body
	case *ast.FuncLit:
		return n.Body
	}
	return nil
}

// Build returns the result for pass's package over dirs, with the writes
// facts of its functions inferred and, when dirs are active, its function
// bodies collected. The analyzer running pass must require the inspect and
// ctrlflow analyzers and declare *Fact among its fact types.
func Build(pass *analysis.Pass, dirs Directives) *Result {
	o := NewOracle(dirs, func(fn *types.Func, f *Fact) bool {
		return pass.ImportObjectFact(fn, f)
	})
	res := &Result{Dirs: dirs, Oracle: o}
	insp := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	inferWrites(pass.TypesInfo, o, insp)
	inferErrMaps(pass.TypesInfo, o, insp)
	if dirs.Active() {
		res.Funcs = collectFuncs(pass, insp)
	}
	return res
}

// collectFuncs returns the package's function bodies that have a type and
// a CFG, in source order.
func collectFuncs(pass *analysis.Pass, insp *inspector.Inspector) []*Func {
	cfgs := pass.ResultOf[ctrlflow.Analyzer].(*ctrlflow.CFGs)
	var funcs []*Func
	for n := range insp.PreorderSeq((*ast.FuncDecl)(nil), (*ast.FuncLit)(nil)) {
		f := &Func{Node: n}
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Body == nil {
				continue
			}
			fn, ok := pass.TypesInfo.Defs[n.Name].(*types.Func)
			if !ok {
				continue
			}
			f.Obj = fn
			f.Sig, _ = fn.Type().(*types.Signature)
			f.CFG = cfgs.FuncDecl(n)
		case *ast.FuncLit:
			tv, ok := pass.TypesInfo.Types[n]
			if !ok {
				continue
			}
			f.Sig, _ = tv.Type.(*types.Signature)
			f.CFG = cfgs.FuncLit(n)
		}
		if f.Sig != nil && f.CFG != nil {
			funcs = append(funcs, f)
		}
	}
	return funcs
}

// Export exports what was inferred about the functions other packages can
// call (methods of unexported types too: they may be promoted).
func (r *Result) Export(pass *analysis.Pass) {
	for fn, f := range r.Oracle.local {
		if fn.Pkg() != pass.Pkg || !(fn.Exported() || fn.Signature().Recv() != nil) {
			continue
		}
		if ex := exported(fn, f); !ex.empty() {
			pass.ExportObjectFact(fn, ex)
		}
	}
}

// exported returns the part of f worth a fact. Facts travel with every
// downstream package, so writes are kept only for parameters that can hold
// a view of a snapshot: slices, and arrays and structs of slices (a pointer
// receiver that sets its own fields is a write nobody asks about across
// packages).
func exported(fn *types.Func, f *Fact) *Fact {
	ex := &Fact{Acquirer: f.Acquirer, Takes: f.Takes, Releases: f.Releases, ErrMap: f.ErrMap, Releaser: f.Releaser, Results: f.Results}
	if !slices.Equal(f.Disposes, f.Releases) {
		ex.Disposes = f.Disposes // the common case, equal, travels as Releases alone
	}
	for _, p := range f.Writes {
		if v := ParamVar(fn.Signature(), p); v != nil && holdsSlice(v.Type()) {
			ex.Writes = append(ex.Writes, p)
		}
	}
	return ex
}

// holdsSlice reports whether a value of type t holds a slice.
func holdsSlice(t types.Type) bool {
	switch u := t.Underlying().(type) {
	case *types.Slice:
		return true
	case *types.Array:
		return holdsSlice(u.Elem())
	case *types.Struct:
		for f := range u.Fields() {
			if holdsSlice(f.Type()) {
				return true
			}
		}
	case *types.Interface:
		if tp, ok := types.Unalias(t).(*types.TypeParam); ok {
			return sliceOrPointerTypeParam(tp)
		}
	}
	return false
}

// Withheld reports whether findings about values of type t are withheld
// because the state type they belong to has contract errors: stcontract
// reports those, and nothing else is said about the type (no cascades).
// A type belongs to the state type T when it is T, or the handle TState
// or snapshot TSnapshot that stategen generates next to it.
func (r *Result) Withheld(t types.Type) bool {
	d, ok := r.Dirs.(*directives.Result)
	if !ok || t == nil {
		return false
	}
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := types.Unalias(t).(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return false
	}
	obj := named.Origin().Obj()
	invalid := func(tn *types.TypeName) bool {
		c := d.Contract(tn)
		return c != nil && !c.Valid
	}
	if invalid(obj) {
		return true
	}
	// Or the type is the head or snapshot generated for such a state type.
	_, _, ok = contract.GeneratedFor(obj.Name(), func(typ string) bool {
		tn, ok := obj.Pkg().Scope().Lookup(typ).(*types.TypeName)
		return ok && invalid(tn)
	})
	return ok
}
