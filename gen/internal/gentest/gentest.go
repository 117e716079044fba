// Package gentest holds what the tests of gen and gen/report share: the
// golden packages and files (one -update flag rewrites them) and the
// one-file packages their fuzz targets build. It imports
// nothing of gen, so that gen's own tests can use it.
package gentest

import (
	"bytes"
	"flag"
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

// update is the -update flag of every test binary that imports gentest:
// go test ./gen/... -update rewrites the golden files of gen and
// gen/report alike.
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// Golden compares got with the file at path, or rewrites the file under
// -update.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
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

// LoadOne loads the golden package testdata/src/name with load (gen.Load),
// where testdata is gen's ("./testdata") seen from the test's folder,
// failing t unless it is one package.
func LoadOne[P any](t testing.TB, load func(dir string, patterns ...string) ([]P, error), testdata, name string) P {
	t.Helper()
	pkgs, err := load("", testdata+"/src/"+name)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("loaded %d packages for %s, want 1", len(pkgs), name)
	}
	return pkgs[0]
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
