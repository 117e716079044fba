// Package gentest holds what the tests of gen and gen/report share: golden
// files and the one-file packages their fuzz targets build. It imports
// nothing of gen, so that gen's own tests can use it.
package gentest

import (
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Golden compares got with the file at path, or rewrites the file when
// update is set (the tests' -update flag).
func Golden(t testing.TB, update bool, path string, got []byte) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what is written now (run go test -update and review the diff):\n%s", path, FirstDiff(want, got))
	}
}

// FirstDiff describes the first line where golden and generated differ.
func FirstDiff(golden, generated []byte) string {
	al, bl := strings.Split(string(golden), "\n"), strings.Split(string(generated), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n  golden:    " + x + "\n  generated: " + y
		}
	}
	return "(no line differs)"
}

// A Source is a type-checked one-file package.
type Source struct {
	Fset *token.FileSet
	File *ast.File
	Pkg  *types.Package
	Info *types.Info
}

// FuzzSource type-checks a one-file package declaring the state type T
// with the given directive lines and fields (and a constant K and a type
// Token they may use); false when the source does not parse. Type errors
// are kept: the contract parser must cope with them.
func FuzzSource(directives, fields string) (Source, bool) {
	src := "package p\n\nconst K = 16\n\ntype Token uint32\n\n// T is fuzzed.\n//\n" + directives + "\ntype T struct {\n" + fields + "\n}\n"
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		return Source{}, false
	}
	info := &types.Info{
		Types: make(map[ast.Expr]types.TypeAndValue),
		Defs:  make(map[*ast.Ident]types.Object),
		Uses:  make(map[*ast.Ident]types.Object),
	}
	conf := types.Config{Importer: importer.Default(), Error: func(error) {}}
	pkg, _ := conf.Check("example.com/p", fset, []*ast.File{file}, info)
	return Source{fset, file, pkg, info}, true
}
