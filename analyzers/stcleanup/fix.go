package stcleanup

import (
	"fmt"
	"go/ast"
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/ctrlflow"
	"golang.org/x/tools/go/ast/astutil"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
	"github.com/gpustate/gpustate/analyzers/stownership"
)

// deferFix returns the fix that inserts defer x.Release() after the
// acquire's error check (or right after the acquire when the acquirer has
// no error result). It offers none where a deferred release would be wrong:
// when the resource escapes on some path, when it is acquired in a loop or
// held in something other than a plain variable, or when the statement
// after the acquire is not the error check.
func deferFix(pass *analysis.Pass, l stownership.Leak, rel string) *analysis.SuggestedFix {
	if rel == "" || l.Escapes || l.Holder == nil || l.Def == nil {
		return nil
	}
	assign, ok := l.Def.(*ast.AssignStmt)
	if !ok || len(assign.Rhs) != 1 {
		return nil
	}
	list, k := enclosingList(pass, assign)
	if list == nil {
		return nil
	}
	after := ast.Node(assign)
	if stownership.HasErrorResult(l.Fn) {
		check := errorCheck(pass, assign, list[k+1:])
		if check == nil {
			return nil
		}
		after = check
	}
	return insertLineAfter(pass, after, assign, fmt.Sprintf("defer %s.%s()", l.Holder.Name(), rel))
}

// enclosingList returns the statement list that holds assign directly, and
// assign's index in it; nil when assign is not directly in a block or a
// case, or when it is inside a loop of its function.
func enclosingList(pass *analysis.Pass, assign *ast.AssignStmt) ([]ast.Stmt, int) {
	var file *ast.File
	for _, f := range pass.Files {
		if f.FileStart <= assign.Pos() && assign.Pos() < f.FileEnd {
			file = f
		}
	}
	if file == nil {
		return nil, -1
	}
	path, _ := astutil.PathEnclosingInterval(file, assign.Pos(), assign.End())
	if len(path) < 2 || path[0] != ast.Node(assign) || inLoop(path[1:]) {
		return nil, -1
	}
	var list []ast.Stmt
	switch p := path[1].(type) {
	case *ast.BlockStmt:
		list = p.List
	case *ast.CaseClause:
		list = p.Body
	case *ast.CommClause:
		list = p.Body
	}
	for i, s := range list {
		if s == ast.Stmt(assign) {
			return list, i
		}
	}
	return nil, -1
}

// acquiredInLoop reports whether the acquiring call is inside a loop of its
// function: a deferred release there would run only at the function's
// exit, so the advice is a release before each return.
func acquiredInLoop(pass *analysis.Pass, call *ast.CallExpr) bool {
	for _, f := range pass.Files {
		if f.FileStart <= call.Pos() && call.Pos() < f.FileEnd {
			path, _ := astutil.PathEnclosingInterval(f, call.Pos(), call.End())
			return len(path) > 1 && inLoop(path[1:])
		}
	}
	return false
}

// inLoop reports whether the enclosing nodes of a statement, innermost
// first, put it in a loop of its own function. A statement outside any
// function is treated as in a loop: no fix applies there.
func inLoop(path []ast.Node) bool {
	for _, n := range path {
		switch n.(type) {
		case *ast.ForStmt, *ast.RangeStmt:
			return true
		case *ast.FuncDecl, *ast.FuncLit:
			return false
		}
	}
	return true
}

// errorCheck returns the statement that checks the acquire's error when it
// is the first of rest: if err != nil { ... } with no init and no else,
// whose body does not fall through to the statement after the if. Only the
// plain check counts: a predicate such as isTransient(err) may let a nil
// result through.
func errorCheck(pass *analysis.Pass, assign *ast.AssignStmt, rest []ast.Stmt) *ast.IfStmt {
	errVar := dataflow.VarOf(pass.TypesInfo, assign.Lhs[len(assign.Lhs)-1])
	if errVar == nil || len(rest) == 0 {
		return nil
	}
	check, ok := rest[0].(*ast.IfStmt)
	if !ok || check.Init != nil || check.Else != nil || !terminates(pass, check.Body) {
		return nil
	}
	cmp, ok := ast.Unparen(check.Cond).(*ast.BinaryExpr)
	if !ok || cmp.Op != token.NEQ || dataflow.VarOf(pass.TypesInfo, cmp.X) != errVar || !dataflow.IsNil(pass.TypesInfo, cmp.Y) {
		return nil
	}
	return check
}

// insertLineAfter returns the fix that inserts text on a line of its own
// after the statement after (and any comment that ends its line), indented
// like the statement at. It offers none when after ends the file.
func insertLineAfter(pass *analysis.Pass, after, at ast.Node, text string) *analysis.SuggestedFix {
	tf := pass.Fset.File(after.End())
	line := tf.Line(after.End())
	if line >= tf.LineCount() {
		return nil
	}
	indent := strings.Repeat("\t", pass.Fset.Position(at.Pos()).Column-1)
	pos := tf.LineStart(line + 1)
	return &analysis.SuggestedFix{
		Message: "add " + text,
		TextEdits: []analysis.TextEdit{{
			Pos:     pos,
			End:     pos,
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
		if ownership.BuiltinName(pass.TypesInfo, call) == "panic" {
			return true
		}
		fn, kind, _ := ownership.Callee(pass.TypesInfo, call)
		cfgs := pass.ResultOf[ctrlflow.Analyzer].(*ctrlflow.CFGs)
		return kind == ownership.Static && cfgs.NoReturn(fn)
	}
	return false
}
