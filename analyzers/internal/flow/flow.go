// Package flow is the dataflow engine shared by statevet's stcleanup,
// stalias and streleased analyzers, and the analyzer that infers the
// function facts they rely on.
//
// The engine works on the syntactic control-flow graphs of package ctrlflow
// (golang.org/x/tools/go/cfg) rather than on SSA. The CFGs are built anyway
// by the cheapest analyzers a vet run carries (lostcancel needs them), they
// already cut paths at calls that never return (panic, os.Exit, log.Fatal,
// t.Fatal, through ctrlflow's facts), and their nodes are the source's own
// statements, so findings, related positions and suggested fixes point at
// what the user wrote. SSA would give def-use chains and phi nodes for free
// but would cost a whole-package construction in every active package; the
// obligations here are tracked per variable with union joins instead, which
// handles values merged at if/else joins the way a phi does.
//
// The Analyzer of this package reports nothing. It exports a Fact on every
// function whose body shows that it acquires and returns a resource
// (acquirer), releases or keeps a parameter on every path (takes,
// releases), or writes through a parameter (writes), so wrappers and helpers
// in other packages, the standard library included, need no directive.
// Writes are inferred in every package by a single syntactic pass (no CFG);
// everything else only in packages where the directives analyzer is active.
package flow

import (
	"go/ast"
	"go/types"
	"reflect"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/ctrlflow"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"

	"github.com/gpustate/gpustate/analyzers/directives"
)

// Analyzer infers acquirer, takes, releases and writes facts for the plain
// Go functions of a package and returns a *Result for the dataflow analyzers.
var Analyzer = &analysis.Analyzer{
	Name:       "stflow",
	Doc:        "infer ownership and aliasing facts of plain Go functions for the statevet dataflow analyzers",
	URL:        "https://pkg.go.dev/github.com/gpustate/gpustate/analyzers/internal/flow",
	Run:        run,
	ResultType: reflect.TypeFor[*Result](),
	FactTypes:  []analysis.Fact{(*Fact)(nil)},
	Requires:   []*analysis.Analyzer{directives.Analyzer, inspect.Analyzer, ctrlflow.Analyzer},
}

// Result is what the dataflow analyzers share about one package.
type Result struct {
	// Dirs answers for the directives: the directives analyzer's result.
	Dirs Directives
	// Oracle answers what calls do, from directives and facts (complete
	// only when Dirs.Active()). The analyzers that require this one may
	// call it concurrently.
	Oracle *Oracle
	// Funcs are the package's function bodies with their CFGs, in source
	// order; nil when the package is inactive.
	Funcs []*Func
	// Leaks are stcleanup's findings, in source order.
	Leaks []Leak
}

// Func is one function body of the package.
type Func struct {
	Node ast.Node // *ast.FuncDecl or *ast.FuncLit
	Obj  *types.Func
	Sig  *types.Signature
	In   *FuncInput
}

// override, when set (by tests), replaces the directives of every package:
// the precision tests declare the os package's files a resource to run the
// engine over code that has no directives of its own.
var override Directives

// maxRounds bounds the inference of facts that depend on each other
// within a package (a wrapper of a wrapper).
const maxRounds = 4

// run infers the facts of the package's functions.
//
// Writes are found for every package by a flow-insensitive scan of each
// body: which parameters reach an index assignment, a store through a
// pointer, copy, clear or append into a sub-slice, or a parameter of a
// writer, iterated to a fixed point over the package's calls.
//
// Then, only when the package declares directives or imports one that does,
// each function that calls an acquirer or a releaser, or has a parameter of
// a type with a release method, gets the obligation analysis of Cleanup,
// seeded with its candidate parameters: a function that returns an
// outstanding resource as its first result is an acquirer, and one that
// discharges a parameter on every path takes (or releases) it. Functions
// are analyzed callees first (see inferOwnership); the leaks found with the
// final facts are stcleanup's findings.
func run(pass *analysis.Pass) (any, error) {
	var dirs Directives = pass.ResultOf[directives.Analyzer].(*directives.Result)
	if override != nil {
		dirs = override
	}
	o := NewOracle(dirs, func(fn *types.Func, f *Fact) bool {
		return pass.ImportObjectFact(fn, f)
	})
	res := &Result{Dirs: dirs, Oracle: o}
	insp := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)

	inferWrites(pass.TypesInfo, o, insp)

	if dirs.Active() {
		res.Funcs = collectFuncs(pass, insp)
		res.Leaks = inferOwnership(pass, o, res.Funcs)
	}

	// Export what was inferred about functions other packages can call
	// (methods of unexported types too: they may be promoted).
	for fn, f := range o.local {
		if fn.Pkg() != pass.Pkg || !(fn.Exported() || fn.Signature().Recv() != nil) {
			continue
		}
		if ex := exported(fn, f); !ex.empty() {
			pass.ExportObjectFact(fn, ex)
		}
	}
	return res, nil
}

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
			f.In = &FuncInput{CFG: cfgs.FuncDecl(n)}
			f.In.Results = namedResults(f.Sig)
		case *ast.FuncLit:
			tv, ok := pass.TypesInfo.Types[n]
			if !ok {
				continue
			}
			f.Sig, _ = tv.Type.(*types.Signature)
			f.In = &FuncInput{CFG: cfgs.FuncLit(n)}
			f.In.Results = namedResults(f.Sig)
		}
		if f.Sig == nil || f.In.CFG == nil {
			continue
		}
		f.In.Info = pass.TypesInfo
		f.In.Node = n
		f.In.Sig = f.Sig
		funcs = append(funcs, f)
	}
	return funcs
}

func namedResults(sig *types.Signature) []*types.Var {
	if sig == nil || sig.Results().Len() == 0 || sig.Results().At(0).Name() == "" {
		return nil
	}
	var vs []*types.Var
	for v := range sig.Results().Variables() {
		vs = append(vs, v)
	}
	return vs
}

// inferOwnership computes acquirer, takes and releases facts for the
// package's functions, and returns the leaks found with the final facts.
//
// Declarations are analyzed callees first (a postorder of the package's
// static call graph), so a wrapper's fact is known before its callers are
// looked at; only a function whose callee's fact changed after it was
// analyzed (a cycle) is analyzed again. Function literals produce no facts
// and are analyzed once, at the end.
func inferOwnership(pass *analysis.Pass, o *Oracle, funcs []*Func) []Leak {
	var decls, lits []*Func
	byObj := make(map[*types.Func]*Func)
	for _, f := range funcs {
		if f.Obj != nil {
			decls = append(decls, f)
			byObj[f.Obj] = f
		} else {
			lits = append(lits, f)
		}
	}
	callees := make(map[*Func][]*types.Func)
	for _, f := range decls {
		seen := make(map[*types.Func]bool)
		ast.Inspect(funcBody(f.Node), func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if fn, kind, _ := Callee(pass.TypesInfo, call); kind == Static && !seen[fn] {
					seen[fn] = true
					callees[f] = append(callees[f], fn)
				}
			}
			return true
		})
	}
	// Postorder of the local call graph.
	var order []*Func
	visited := make(map[*Func]bool)
	var visit func(f *Func)
	visit = func(f *Func) {
		if visited[f] {
			return
		}
		visited[f] = true
		for _, g := range callees[f] {
			if gf := byObj[g]; gf != nil {
				visit(gf)
			}
		}
		order = append(order, f)
	}
	for _, f := range decls {
		visit(f)
	}

	results := make(map[*Func]*FuncResult)
	analyze := func(f *Func) *FuncResult {
		sites, fl, released := Prewalk(pass.TypesInfo, o, funcBody(f.Node), f.Sig)
		f.In.Oracle = o
		f.In.Sites = sites
		f.In.Lits = fl
		f.In.Seeds = nil
		if f.Obj != nil {
			f.In.Seeds = candidateParams(o, f.Sig, released)
		}
		if len(f.In.Sites) == 0 && len(f.In.Seeds) == 0 {
			return nil
		}
		r, ok := Cleanup(f.In)
		if !ok {
			return nil
		}
		return r
	}
	seq := 0
	analyzedAt := make(map[*Func]int)
	changedAt := make(map[*types.Func]int)
	for round := 0; round < maxRounds; round++ {
		again := false
		for _, f := range order {
			if round > 0 {
				stale := false
				for _, g := range callees[f] {
					stale = stale || changedAt[g] > analyzedAt[f]
				}
				if !stale {
					continue
				}
			}
			again = true
			seq++
			analyzedAt[f] = seq
			r := analyze(f)
			results[f] = r
			if r == nil {
				continue
			}
			fact := o.local[f.Obj]
			if fact == nil {
				fact = new(Fact)
			}
			next := &Fact{
				Acquirer: fact.Acquirer || r.Acquirer,
				Takes:    union(fact.Takes, r.Takes, r.Releases),
				Releases: union(fact.Releases, r.Releases),
				Writes:   fact.Writes,
			}
			if next.Acquirer != fact.Acquirer || !slices.Equal(next.Takes, fact.Takes) || !slices.Equal(next.Releases, fact.Releases) {
				o.local[f.Obj] = next
				o.releaseMethods = nil
				seq++
				changedAt[f.Obj] = seq
			}
		}
		if !again {
			break
		}
	}
	for _, f := range lits {
		results[f] = analyze(f)
	}
	var leaks []Leak
	for _, f := range funcs {
		// Returning from main.main ends the process, which frees
		// everything (the lostcancel rule).
		if r := results[f]; r != nil && !isMainMain(f.Obj) {
			leaks = append(leaks, r.Leaks...)
		}
	}
	slices.SortStableFunc(leaks, func(a, b Leak) int { return int(a.Call.Pos() - b.Call.Pos()) })
	return leaks
}

// candidateParams returns the parameters of a function whose release or
// hand-off is worth inferring: those of a type with a release method, and
// those the body visibly releases or hands to a taker.
func candidateParams(o *Oracle, sig *types.Signature, released []*types.Var) []int {
	var seeds []int
	consider := func(i int, v *types.Var) {
		if v == nil || v.Name() == "" || v.Name() == "_" {
			return
		}
		t := v.Type()
		if s, ok := types.Unalias(t).(*types.Slice); ok && sig.Variadic() && i == sig.Params().Len()-1 {
			t = s.Elem()
		}
		if slices.Contains(released, v) || o.ReleaseMethod(t) != "" {
			seeds = append(seeds, i)
		}
	}
	consider(-1, sig.Recv())
	for i := range sig.Params().Len() {
		consider(i, sig.Params().At(i))
	}
	return seeds
}

func union(lists ...[]int) []int {
	var out []int
	for _, l := range lists {
		for _, x := range l {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	slices.Sort(out)
	return out
}

// exported returns the part of f worth a fact. Facts travel with every
// downstream package, so writes are kept only for parameters that can hold
// a view of a snapshot: slices, and arrays and structs of slices (a pointer
// receiver that sets its own fields is a write nobody asks about across
// packages).
func exported(fn *types.Func, f *Fact) *Fact {
	ex := &Fact{Acquirer: f.Acquirer, Takes: f.Takes, Releases: f.Releases}
	for _, p := range f.Writes {
		if v := paramVar(fn.Signature(), p); v != nil && holdsSlice(v.Type()) {
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
	for _, suffix := range []string{"State", "Snapshot"} {
		if base, ok := strings.CutSuffix(obj.Name(), suffix); ok && base != "" {
			if tn, ok := obj.Pkg().Scope().Lookup(base).(*types.TypeName); ok && invalid(tn) {
				return true
			}
		}
	}
	return false
}

func isMainMain(fn *types.Func) bool {
	return fn != nil && fn.Name() == "main" && fn.Pkg() != nil && fn.Pkg().Name() == "main" && fn.Signature().Recv() == nil
}
