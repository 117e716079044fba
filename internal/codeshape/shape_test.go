package codeshape

import (
	"go/ast"
	"go/token"
	"testing"
)

const (
	maxFileLines = 800
	maxFuncLines = 80
)

// TestShape walks the module's hand-written Go files and reports every file
// and function over the limits.
func TestShape(t *testing.T) {
	walkSource(t, func(rel string, fset *token.FileSet, f *ast.File) {
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s: %d lines, over %d: split it by idea", rel, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			ast.Inspect(decl, func(n ast.Node) bool {
				var body *ast.BlockStmt
				name := "a function literal"
				switch n := n.(type) {
				case *ast.FuncDecl:
					body, name = n.Body, n.Name.Name
				case *ast.FuncLit:
					body = n.Body
				}
				if body != nil {
					from, to := fset.Position(n.Pos()), fset.Position(body.End())
					if lines := to.Line - from.Line + 1; lines > maxFuncLines {
						t.Errorf("%s:%d: %s is %d lines, over %d: name its steps", rel, from.Line, name, lines, maxFuncLines)
					}
				}
				return true
			})
		}
	})
}
