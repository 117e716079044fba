package stcleanup

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/ctrlflow"

	"github.com/gpustate/gpustate/analyzers/internal/analysisutil"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
	"github.com/gpustate/gpustate/analyzers/stownership"
)

//go:embed doc.go
var doc string

// Analyzer reports acquired resources that are not released on every path.
var Analyzer = New(stownership.Analyzer)

// New returns the analyzer reading the leaks found by own, an analyzer made
// by stownership.New.
func New(own *analysis.Analyzer) *analysis.Analyzer {
	return analysisutil.Checker("stcleanup", doc, func(pass *analysis.Pass) (any, error) { return run(pass, own) }, own, ctrlflow.Analyzer)
}

// run reports the leaks the obligation analysis found. The analysis runs
// in stownership, once per package, because inferring which functions are
// acquirers and which take their parameters is the same analysis: a
// function's leaks are the obligations still live at an exit, its acquirer
// fact the obligation it returns. Packages that neither declare directives
// nor import a package that does are skipped before any function is looked
// at.
func run(pass *analysis.Pass, own *analysis.Analyzer) (any, error) {
	res := pass.ResultOf[own].(*stownership.Result)
	if !res.Dirs.Active() {
		return nil, nil
	}
	for _, l := range res.Leaks {
		if !res.Withheld(resultType(pass, l.Call, l.Result)) {
			report(pass, res.Oracle, l)
		}
	}
	return nil, nil
}

// resultType returns the type of result i of an acquiring call: the
// resource.
func resultType(pass *analysis.Pass, call *ast.CallExpr, i int) types.Type {
	t := pass.TypesInfo.TypeOf(call)
	if tup, ok := t.(*types.Tuple); ok && tup.Len() > 0 {
		t = tup.At(min(i, tup.Len()-1)).Type()
	}
	return t
}

// report reports one leak, with the exit it leaks through or the statement
// that overwrites it, and where a deferred release is right, its fix.
func report(pass *analysis.Pass, o *ownership.Oracle, l stownership.Leak) {
	t := resultType(pass, l.Call, l.Result)
	typ := ownership.TypeName(t)
	rel := o.ReleaseMethod(t)
	if rel != "" && releaseTakesArgs(t, rel) {
		rel = "" // w.release(dev): the message cannot write the call
	}
	by := l.Fn.Name()
	d := analysis.Diagnostic{Pos: l.Call.Pos(), End: l.Call.End()}
	switch l.Kind {
	case stownership.LeakBlank:
		// _, err := acquire(): on success the resource is held by nobody.
		if rel != "" {
			d.Message = fmt.Sprintf("%s acquired by %s is discarded: _ drops it when the call succeeds; assign it to a variable and call its %s method after the error check", typ, by, rel)
		} else {
			d.Message = fmt.Sprintf("%s acquired by %s is discarded: _ drops it when the call succeeds; assign it to a variable and release it after the error check", typ, by)
		}
	case stownership.LeakDiscarded:
		if rel != "" {
			d.Message = fmt.Sprintf("%s acquired by %s is discarded; assign it and call its %s method when done", typ, by, rel)
		} else {
			d.Message = fmt.Sprintf("%s acquired by %s is discarded; assign it and release it when done", typ, by)
		}
	case stownership.LeakOverwritten:
		d.Message = fmt.Sprintf("%s acquired by %s is overwritten before it is released; release it first", typ, by)
		d.Related = []analysis.RelatedInformation{related(pass, l.At, "overwritten here")}
	case stownership.LeakExit:
		switch {
		case l.BesideError && l.Holder != nil && rel != "":
			d.Message = fmt.Sprintf("%s acquired by %s is returned beside a non-nil error, and callers discard results on error; call %s.%s() before that return and return nil in its place", typ, by, l.Holder.Name(), rel)
		case l.BesideError:
			d.Message = fmt.Sprintf("%s acquired by %s is returned beside a non-nil error, and callers discard results on error; release it before that return and return nil in its place", typ, by)
		case l.Escapes && l.Holder != nil && rel != "":
			// Kept on the success path (stored in a map, returned): a
			// deferred release would release what is kept.
			d.Message = fmt.Sprintf("%s acquired by %s is not released on every path; it is kept on another path, so call %s.%s() before the return that leaks it, not in a defer", typ, by, l.Holder.Name(), rel)
		case l.Escapes:
			d.Message = fmt.Sprintf("%s acquired by %s is not released on every path; it is kept on another path, so release it before the return that leaks it, not in a defer", typ, by)
		case l.Holder != nil && rel != "" && !acquiredInLoop(pass, l.Call):
			d.Message = fmt.Sprintf("%s acquired by %s is not released on every path; add defer %s.%s()", typ, by, l.Holder.Name(), rel)
		default:
			d.Message = fmt.Sprintf("%s acquired by %s is not released on every path; release it before each return", typ, by)
		}
		d.Related = []analysis.RelatedInformation{related(pass, l.At, "this return leaks it")}
		if l.BesideError {
			break
		}
		if fix := deferFix(pass, l, rel); fix != nil {
			d.SuggestedFixes = []analysis.SuggestedFix{*fix}
		}
	}
	pass.Report(d)
}

// releaseTakesArgs reports whether the method name of t (or *t) takes
// arguments.
func releaseTakesArgs(t types.Type, name string) bool {
	var pkg *types.Package
	u := types.Unalias(t)
	if p, ok := u.(*types.Pointer); ok {
		u = types.Unalias(p.Elem())
	}
	if n, ok := u.(*types.Named); ok {
		pkg = n.Obj().Pkg()
	}
	obj, _, _ := types.LookupFieldOrMethod(t, true, pkg, name)
	fn, ok := obj.(*types.Func)
	return ok && fn.Signature().Params().Len() > 0
}

// related points at the exit a resource leaks through, or the statement
// that overwrites it. The CFG's implicit return at the end of a body is
// synthetic: its position is the closing brace and its end may lie beyond
// the file.
func related(pass *analysis.Pass, n ast.Node, msg string) analysis.RelatedInformation {
	pos, end := n.Pos(), n.End()
	if pass.Fset.File(pos) != pass.Fset.File(end) {
		end = pos
	}
	return analysis.RelatedInformation{Pos: pos, End: end, Message: msg}
}
