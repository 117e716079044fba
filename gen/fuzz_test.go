package gen

import (
	"bytes"
	"go/ast"
	"go/format"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
)

// FuzzGenerate feeds arbitrary directive lines and field declarations
// through the contract parser and, when it accepts them, through the
// renderer: whatever the input, stategen answers with diagnostics, a
// refusal naming the state type, or gofmt'd Go; it never panics.
func FuzzGenerate(f *testing.F) {
	f.Add("//state:contract\n//state:growth append bound=64\n//state:owner session", "A []int32 `state:\"width=2\"`\nB []uint8")
	f.Add("//state:contract purpose=\"x\"\n//state:growth mutable bound=4*K\n//state:owner step\n//state:snapshot none", "Cells [][4]float64")
	f.Add("//state:contract\n//state:growth append bound=unbounded reason=\"drained\"\n//state:owner process\n//state:branch isolated merge=fastforward\n//state:rollback descendants=keep\n//state:checkpoint every=8 keep=2", "Events []Token")
	f.Add("//state:contract\n//state:growth append bound=8\n//state:owner s\n//state:branch isolated merge=unsupported\n//state:cleanup on=end", "x, y []int64 `state:\"width=3\"`")
	f.Add("//state:contract\n//state:growth\n//state:owner", "A string")
	f.Add("//state:contract\n//state:growth mutable bound=1<<62\n//state:owner s", "A []int64 `state:\"width=1024\"`")
	f.Fuzz(func(t *testing.T, directives, fields string) {
		p := fuzzPackage(directives, fields)
		if p == nil {
			return
		}
		files, err := p.Generate()
		if len(p.Contracts.Diagnostics) > 0 {
			if err == nil || files != nil {
				t.Fatalf("generated %d files despite diagnostics", len(files))
			}
			return
		}
		if err != nil {
			// Not a contract mistake: a shape the renderer refuses
			// (no fields, a generic type). It must say so, not panic.
			if !strings.Contains(err.Error(), "state type") {
				t.Fatalf("unexplained refusal: %v", err)
			}
			return
		}
		for _, gf := range files {
			out, err := format.Source(gf.Content)
			if err != nil {
				t.Fatalf("%s does not parse: %v\n%s", gf.Name, err, gf.Content)
			}
			if !bytes.Equal(out, gf.Content) {
				t.Fatalf("%s is not gofmt'd", gf.Name)
			}
		}
	})
}

// fuzzPackage type-checks a one-file package declaring the state type T with
// the given directive lines and fields (and a constant K and a type Token
// they may use) and wraps it as gen does; nil when the source does not
// parse. Type errors are kept: the contract parser must cope with them.
func fuzzPackage(directives, fields string) *Package {
	src := "package p\n\nconst K = 16\n\ntype Token uint32\n\n// T is fuzzed.\n//\n" + directives + "\ntype T struct {\n" + fields + "\n}\n"
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		return nil
	}
	info := &types.Info{
		Types: make(map[ast.Expr]types.TypeAndValue),
		Defs:  make(map[*ast.Ident]types.Object),
		Uses:  make(map[*ast.Ident]types.Object),
	}
	conf := types.Config{Importer: importer.Default(), Error: func(error) {}}
	pkg, _ := conf.Check("example.com/p", fset, []*ast.File{file}, info)
	return NewPackage(".", fset, []*ast.File{file}, pkg, info)
}
