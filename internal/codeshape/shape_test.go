package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	maxFileLines = 800
	maxFuncLines = 80
)

// TestShape walks the module's hand-written Go files and reports every file
// and function over the limits.
func TestShape(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || isModule(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		checked++
		rel, _ := filepath.Rel(root, path)
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
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d files under %s; the walk is not seeing the repository", checked, root)
	}
}

// isModule reports whether dir holds a go.mod of its own: a nested module
// (a tool's separate build) is not part of this one.
func isModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}
