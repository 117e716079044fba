package stcleanup

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/ctrlflow"
	"golang.org/x/tools/go/ast/astutil"

	"github.com/gpustate/gpustate/analyzers/internal/analysisutil"
	"github.com/gpustate/gpustate/analyzers/internal/flow"
)

//go:embed doc.go
var doc string

// Analyzer reports acquired resources that are not released on every path.
var Analyzer = &analysis.Analyzer{
	Name:     "stcleanup",
	Doc:      analysisutil.MustExtractDoc(doc, "stcleanup"),
	URL:      "https://pkg.go.dev/github.com/gpustate/gpustate/analyzers/stcleanup",
	Run:      run,
	Requires: []*analysis.Analyzer{flow.Analyzer, ctrlflow.Analyzer},
}

// run reports the leaks the flow analyzer found. The obligation analysis
// itself runs there (package flow, Cleanup), because inferring which
// functions are acquirers and which take their parameters is the same
// analysis: a function's leaks are the obligations still live at an exit,
// its acquirer fact the obligation it returns. Packages that neither declare
// directives nor import a package that does are skipped before any
// function is looked at.
func run(pass *analysis.Pass) (any, error) {
	res := pass.ResultOf[flow.Analyzer].(*flow.Result)
	if !res.Dirs.Active() {
		return nil, nil
	}
	for _, l := range res.Leaks {
		if !res.Withheld(resultType(pass, l.Call)) {
			report(pass, res.Oracle, l)
		}
	}
	return nil, nil
}

// resultType returns the type of the resource an acquiring call returns.
func resultType(pass *analysis.Pass, call *ast.CallExpr) types.Type {
	t := pass.TypesInfo.TypeOf(call)
	if tup, ok := t.(*types.Tuple); ok && tup.Len() > 0 {
		t = tup.At(0).Type()
	}
	return t
}

func report(pass *analysis.Pass, o *flow.Oracle, l flow.Leak) {
	t := resultType(pass, l.Call)
	typ := flow.TypeName(t)
	rel := o.ReleaseMethod(t)
	by := l.Fn.Name()
	d := analysis.Diagnostic{Pos: l.Call.Pos(), End: l.Call.End()}
	switch l.Kind {
	case flow.LeakDiscarded:
		if rel != "" {
			d.Message = fmt.Sprintf("%s acquired by %s is discarded; assign it and call its %s method when done", typ, by, rel)
		} else {
			d.Message = fmt.Sprintf("%s acquired by %s is discarded; assign it and release it when done", typ, by)
		}
	case flow.LeakOverwritten:
		d.Message = fmt.Sprintf("%s acquired by %s is overwritten before it is released; release it first", typ, by)
		d.Related = []analysis.RelatedInformation{related(pass, l.At, "overwritten here")}
	case flow.LeakExit:
		if l.Holder != nil && rel != "" {
			d.Message = fmt.Sprintf("%s acquired by %s is not released on every path; add defer %s.%s()", typ, by, l.Holder.Name(), rel)
		} else {
			d.Message = fmt.Sprintf("%s acquired by %s is not released on every path; release it before each return", typ, by)
		}
		d.Related = []analysis.RelatedInformation{related(pass, l.At, "this return leaks it")}
		if fix := deferFix(pass, l, rel); fix != nil {
			d.SuggestedFixes = []analysis.SuggestedFix{*fix}
		}
	}
	pass.Report(d)
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

// deferFix returns the fix that inserts defer x.Release() after the
// acquire's error check (or right after the acquire when the acquirer has
// no error result). It offers none where a deferred release would be wrong:
// when the resource escapes on some path, when it is acquired in a loop or
// held in something other than a plain variable, or when the statement
// after the acquire is not the error check.
func deferFix(pass *analysis.Pass, l flow.Leak, rel string) *analysis.SuggestedFix {
	if rel == "" || l.Escapes || l.Holder == nil || l.Def == nil {
		return nil
	}
	assign, ok := l.Def.(*ast.AssignStmt)
	if !ok || len(assign.Rhs) != 1 {
		return nil
	}
	var file *ast.File
	for _, f := range pass.Files {
		if f.FileStart <= assign.Pos() && assign.Pos() < f.FileEnd {
			file = f
		}
	}
	if file == nil {
		return nil
	}
	path, _ := astutil.PathEnclosingInterval(file, assign.Pos(), assign.End())
	if len(path) < 2 || path[0] != ast.Node(assign) {
		return nil
	}
	for _, n := range path[1:] {
		switch n.(type) {
		case *ast.ForStmt, *ast.RangeStmt:
			return nil
		case *ast.FuncDecl, *ast.FuncLit:
			goto found
		}
	}
	return nil
found:
	var list []ast.Stmt
	switch p := path[1].(type) {
	case *ast.BlockStmt:
		list = p.List
	case *ast.CaseClause:
		list = p.Body
	case *ast.CommClause:
		list = p.Body
	default:
		return nil
	}
	k := -1
	for i, s := range list {
		if s == ast.Stmt(assign) {
			k = i
		}
	}
	if k < 0 {
		return nil
	}
	after := ast.Node(assign)
	sig, _ := l.Fn.Type().(*types.Signature)
	if sig != nil && sig.Results().Len() > 1 && types.Identical(sig.Results().At(sig.Results().Len()-1).Type(), types.Universe.Lookup("error").Type()) {
		errVar := flow.VarOf(pass.TypesInfo, assign.Lhs[len(assign.Lhs)-1])
		if errVar == nil || k+1 >= len(list) {
			return nil
		}
		check, ok := list[k+1].(*ast.IfStmt)
		if !ok || check.Init != nil || check.Else != nil || !terminates(pass, check.Body) {
			return nil
		}
		// Only the plain check, err != nil: a predicate such as
		// isTransient(err) may let a nil result through.
		cmp, ok := ast.Unparen(check.Cond).(*ast.BinaryExpr)
		if !ok || cmp.Op != token.NEQ || flow.VarOf(pass.TypesInfo, cmp.X) != errVar || !isNil(pass.TypesInfo, cmp.Y) {
			return nil
		}
		after = check
	}
	// Insert on a line of its own after the statement (and any comment
	// that ends its line).
	tf := pass.Fset.File(after.End())
	line := tf.Line(after.End())
	if line >= tf.LineCount() {
		return nil
	}
	indent := strings.Repeat("\t", pass.Fset.Position(assign.Pos()).Column-1)
	text := fmt.Sprintf("defer %s.%s()", l.Holder.Name(), rel)
	at := tf.LineStart(line + 1)
	return &analysis.SuggestedFix{
		Message: "add " + text,
		TextEdits: []analysis.TextEdit{{
			Pos:     at,
			End:     at,
			NewText: []byte(indent + text + "\n"),
		}},
	}
}

// terminates reports whether a block ends in a return, a branch, or a call
// that never returns (panic, log.Fatal, t.Fatal), so that the statement
// after the if runs only when the check failed.
func terminates(pass *analysis.Pass, b *ast.BlockStmt) bool {
	if len(b.List) == 0 {
		return false
	}
	switch s := b.List[len(b.List)-1].(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.BranchStmt:
		return s.Tok != token.FALLTHROUGH
	case *ast.ExprStmt:
		call, ok := ast.Unparen(s.X).(*ast.CallExpr)
		if !ok {
			return false
		}
		if flow.BuiltinName(pass.TypesInfo, call) == "panic" {
			return true
		}
		fn, kind, _ := flow.Callee(pass.TypesInfo, call)
		cfgs := pass.ResultOf[ctrlflow.Analyzer].(*ctrlflow.CFGs)
		return kind == flow.Static && cfgs.NoReturn(fn)
	}
	return false
}

func isNil(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	return ok && tv.IsNil()
}
