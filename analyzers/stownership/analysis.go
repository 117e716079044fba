package stownership

import (
	"go/ast"
	"go/types"
	"reflect"
	"slices"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/ctrlflow"
	"golang.org/x/tools/go/analysis/passes/inspect"

	"github.com/gpustate/gpustate/analyzers/directives"
	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
)

// Analyzer infers the acquirer, takes, releases and writes facts of the
// plain Go functions of a package (package ownership) and runs the
// obligation analysis that the first three and stcleanup's findings come
// from, once per package. It reports nothing: stcleanup reports the leaks
// of its Result, and stalias and streleased read its oracle and function
// bodies.
var Analyzer = New(nil)

// New returns an ownership analyzer. dirs, when not nil, replaces the
// directives of every package: the precision tests declare the os
// package's files a resource to run the analyses over code that has no
// directives of its own. The dataflow analyzers have constructors that
// take the ownership analyzer they read (stcleanup.New, stalias.New,
// streleased.New).
func New(dirs ownership.Directives) *analysis.Analyzer {
	return &analysis.Analyzer{
		Name:       "stownership",
		Doc:        "infer ownership and aliasing facts of plain Go functions for the statevet dataflow analyzers",
		URL:        "https://pkg.go.dev/github.com/gpustate/gpustate/analyzers/stownership",
		Run:        func(pass *analysis.Pass) (any, error) { return run(pass, dirs) },
		ResultType: reflect.TypeFor[*Result](),
		FactTypes:  []analysis.Fact{(*ownership.Fact)(nil)},
		Requires:   []*analysis.Analyzer{directives.Analyzer, inspect.Analyzer, ctrlflow.Analyzer},
	}
}

// Result is the result of the analyzer: what the dataflow analyzers share
// about the package, with the facts inferred in it, and the leaks
// stcleanup reports.
type Result struct {
	*ownership.Result
	Leaks []Leak // in order of acquiring call
}

// run infers the facts of the package's functions.
//
// Writes are found for every package by a flow-insensitive scan of each
// body (ownership.Build). Then, only when the package declares directives
// or imports one that does, each function that calls an acquirer or a
// releaser, or has a parameter of a type with a release method, gets the
// obligation analysis, seeded with its candidate parameters: a function
// that returns an outstanding resource as its first result is an acquirer,
// and one that discharges a parameter on every path takes (or releases)
// it. Declarations are analyzed callees first (ownership.Infer), function
// literals once at the end; the leaks found with the final facts are
// stcleanup's findings.
func run(pass *analysis.Pass, override ownership.Directives) (any, error) {
	var dirs ownership.Directives = pass.ResultOf[directives.Analyzer].(*directives.Result)
	if override != nil {
		dirs = override
	}
	res := &Result{Result: ownership.Build(pass, dirs)}
	if dirs.Active() {
		res.Leaks = findLeaks(pass.TypesInfo, res.Result)
	}
	res.Export(pass)
	return res, nil
}

// findLeaks runs the obligation analysis over the package's functions: the
// declarations through res.Infer, which turns their summaries into facts,
// then the function literals with the final facts. It returns the leaks of
// each function's last analysis, in order of acquiring call. Returning from
// main.main ends the process, which frees everything (the lostcancel rule):
// its leaks are dropped.
func findLeaks(info *types.Info, res *ownership.Result) []Leak {
	results := make(map[*ownership.Func]*funcResult)
	res.Infer(info, func(f *ownership.Func) *ownership.Summary {
		r := analyzeFunc(info, res.Oracle, f)
		results[f] = r
		if r == nil {
			return nil
		}
		return &r.Summary
	})
	for _, f := range res.Funcs {
		if f.Obj == nil {
			results[f] = analyzeFunc(info, res.Oracle, f)
		}
	}
	var leaks []Leak
	for _, f := range res.Funcs {
		if r := results[f]; r != nil && !isMainMain(f.Obj) {
			leaks = append(leaks, r.leaks...)
		}
	}
	slices.SortStableFunc(leaks, func(a, b Leak) int { return int(a.Call.Pos() - b.Call.Pos()) })
	return leaks
}

// analyzeFunc runs the obligation analysis over f with the oracle's
// current facts: its acquiring calls, and for a declaration its candidate
// parameters. It returns nil when there is nothing to track or the analysis
// gave up.
func analyzeFunc(info *types.Info, o *ownership.Oracle, f *ownership.Func) *funcResult {
	in := &funcInput{Info: info, Oracle: o, CFG: f.CFG, Node: f.Node, Body: f.Body(), Sig: f.Sig, Results: namedResults(f.Sig)}
	var released []*types.Var
	in.Sites, released = prewalk(info, o, in.Body)
	if f.Obj != nil {
		in.Seeds = candidateParams(o, f.Sig, released)
	}
	if len(in.Sites) == 0 && len(in.Seeds) == 0 {
		return nil
	}
	r, ok := analyzeBody(in)
	if !ok {
		return nil
	}
	return r
}

// namedResults returns the result variables of sig when they are named.
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

// candidateParams returns the parameters of a function whose release or
// hand-off is worth inferring: those of a type with a release method (or
// a slice of one), and those the body visibly releases or hands to a
// taker.
func candidateParams(o *ownership.Oracle, sig *types.Signature, released []*types.Var) []int {
	var seeds []int
	consider := func(i int, v *types.Var) {
		if v == nil || v.Name() == "" || v.Name() == "_" {
			return
		}
		t := v.Type()
		if s, ok := t.Underlying().(*types.Slice); ok {
			t = s.Elem() // a slice of resources: variadic, or a list kept or closed
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

// isMainMain reports whether fn is the main function of a main package.
func isMainMain(fn *types.Func) bool {
	return fn != nil && fn.Name() == "main" && fn.Pkg() != nil && fn.Pkg().Name() == "main" && fn.Signature().Recv() == nil
}

// prewalk lists the acquiring calls of a body, without entering nested
// literals, and the variables that the body, literals included, releases
// or hands to a taker, and those ranged over by a loop whose value variable
// is among them: the parameters among them are worth seeding.
func prewalk(info *types.Info, o *ownership.Oracle, body *ast.BlockStmt) (sites []*ast.CallExpr, released []*types.Var) {
	if body == nil {
		return
	}
	rangedBy := make(map[*types.Var]*types.Var) // range value -> what the loop ranges over
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.RangeStmt:
			if val, ok := n.Value.(*ast.Ident); ok {
				if v, ok := info.Defs[val].(*types.Var); ok {
					rangedBy[v] = dataflow.Root(info, n.X)
				}
			}
		case *ast.FuncLit:
			ast.Inspect(n.Body, func(m ast.Node) bool {
				if call, ok := m.(*ast.CallExpr); ok {
					released = appendReleased(info, o, call, released)
				}
				return true
			})
			return false
		case *ast.CallExpr:
			fn, kind, _ := o.Callee(info, n)
			if kind == ownership.Static && o.Acquires(fn) {
				sites = append(sites, n)
			}
			released = appendReleased(info, o, n, released)
		}
		return true
	})
	for _, v := range released {
		if x := rangedBy[v]; x != nil {
			released = append(released, x)
		}
	}
	return
}

// appendReleased appends to out the roots of the operands that call
// releases or hands to a taker, or, for an interface method that may be a
// release, its receiver.
func appendReleased(info *types.Info, o *ownership.Oracle, call *ast.CallExpr, out []*types.Var) []*types.Var {
	fn, kind, recv := o.Callee(info, call)
	if kind == ownership.Dynamic && recv != nil && mayRelease(o, fn) {
		if v := dataflow.Root(info, recv); v != nil {
			out = append(out, v)
		}
		return out
	}
	if fn == nil {
		return out
	}
	if recv != nil && o.Takes(fn, -1) {
		if v := dataflow.Root(info, recv); v != nil {
			out = append(out, v)
		}
	}
	for j, arg := range call.Args {
		if o.Takes(fn, ownership.ParamIndex(fn, j)) {
			if v := dataflow.Root(info, arg); v != nil {
				out = append(out, v)
			}
		}
	}
	return out
}
