package gen

import (
	"bytes"
	"go/ast"
	"go/format"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/gen/internal/gentest"
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

// fuzzPackage wraps gentest's fuzzed one-file package as gen does; nil
// when the source does not parse.
func fuzzPackage(directives, fields string) *Package {
	src, ok := gentest.FuzzSource(directives, fields)
	if !ok {
		return nil
	}
	return NewPackage(".", src.Fset, []*ast.File{src.File}, src.Pkg, src.Info)
}
