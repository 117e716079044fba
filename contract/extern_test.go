package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// gpuSrc is a third-party GPU binding: the package extern lines name.
const gpuSrc = `package gpu

type Backend interface {
	NewContext() Context
	Name() string
}

type Closer interface{ Close() error }

type Context interface {
	Closer
	Layer(i int) Tensor
	Forward(ts ...Tensor) Tensor
}

type Tensor interface{ Bytes() []byte }

type Pool struct{}

func (p *Pool) Put(b []byte, n int) {}
func (p Pool) Len() int            { return 0 }

func Open(dev int) (*Pool, error)     { return nil, nil }
func Launch(dst []float32, n int)     {}
func Sync()                           {}
func unexported() *Pool               { return nil }

var Default = &Pool{}
`

// hubSrc imports gpu, so gpu is an indirect dependency of p.
const hubSrc = `package hub

import "example.com/gpu"

var P *gpu.Pool
`

// parseExtern type-checks src as package p, which may import
// "example.com/gpu" and "hub", and parses its directives.
func parseExtern(t *testing.T, src string) (*token.FileSet, *Package) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := pkgImporter{}
	for _, dep := range []struct{ path, src string }{{"example.com/gpu", gpuSrc}, {"hub", hubSrc}} {
		f, err := parser.ParseFile(fset, dep.path+".go", dep.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		pkg, err := (&types.Config{Importer: pkgs}).Check(dep.path, fset, []*ast.File{f}, nil)
		if err != nil {
			t.Fatal(err)
		}
		pkgs[dep.path] = pkg
	}
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	conf := types.Config{Importer: pkgs, Error: func(error) {}}
	info := &types.Info{Defs: make(map[*ast.Ident]types.Object), Types: make(map[ast.Expr]types.TypeAndValue)}
	pkg, _ := conf.Check("p", fset, []*ast.File{f}, info)
	return fset, ParsePackage(fset, []*ast.File{f}, pkg, info)
}

// TestInterfaceMethods checks that directives on the methods of an
// interface type are parsed and checked like those of a func declaration.
func TestInterfaceMethods(t *testing.T) {
	src := `package p

type Tensor interface{ Data() []float32 }

// Backend opens contexts.
type Backend interface {
	// NewContext opens a context the caller must close.
	//
	//state:acquire
	NewContext() Context

	//state:takes t
	//state:writes dst
	Keep(t Tensor, dst []float32)

	//state:release // a method of a plain interface is a method
	Close() error

	//state:acquire
	Nothing()

	//state:writes n
	Count(n int)

	//state:extern acquire example.com/gpu.Open
	Other() Context
}

type Context interface {
	//state:view
	Layer(i int) Tensor
	//state:appends
	Grow(n int) error
}
`
	fset, p := parseExtern(t, src)
	got := map[string]Func{}
	for _, f := range p.Funcs {
		if f.Object() == nil {
			t.Errorf("%s has no object", f.Name)
		}
		c := *f
		c.Pos, c.obj = 0, nil
		got[f.Name] = c
	}
	want := map[string]Func{
		"Backend.NewContext": {Name: "Backend.NewContext", Acquire: true},
		"Backend.Keep":       {Name: "Backend.Keep", Takes: []string{"t"}, Writes: []string{"dst"}},
		"Backend.Close":      {Name: "Backend.Close", Release: true},
		"Context.Layer":      {Name: "Context.Layer", View: true},
		"Context.Grow":       {Name: "Context.Grow", Mutates: true, Appends: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("funcs:\n got %+v\nwant %+v", got, want)
	}
	wantDiags := []string{
		"19: stcontract: //state:acquire on interface method Backend.Nothing: it returns nothing",
		"22: stcontract: //state:writes n on interface method Backend.Count: parameter n has type int",
		"25: stcontract: //state:extern is a line of its own, outside any doc comment, and here it is in the doc comment of interface method Backend.Other",
	}
	checkDiags(t, diags(fset, p), wantDiags)
}

// checkDiags checks that got holds, in order, one diagnostic starting with
// each of want.
func checkDiags(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d diagnostics, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("diagnostic %d:\n got %s\nwant %s...", i, got[i], want[i])
		}
	}
}

// TestExtern checks extern lines that hold: resolved in a direct or
// indirect dependency, or naming a package the package does not import.
func TestExtern(t *testing.T) {
	src := `package p

import "hub"

var _ = hub.P

//state:extern acquire example.com/gpu.Backend.NewContext
//state:extern release example.com/gpu.Context.Close // promoted from Closer
//state:extern view example.com/gpu.Context.Layer
//state:extern takes b example.com/gpu.(*Pool).Put
//state:extern writes dst example.com/gpu.Launch
//state:extern acquire example.com/gpu.Open

func f() {
	//state:extern acquire github.com/ollama/ollama/ml.Backend.NewContext
	//state:extern release gopkg.in/yaml.v3.Node.Close
}
`
	fset, p := parseExtern(t, src)
	checkDiags(t, diags(fset, p), nil)
	type rec struct {
		name, verb string
		resolved   bool
	}
	var got []rec
	for _, e := range p.Externs {
		got = append(got, rec{e.Name, externVerbOf(&e.Func), e.Resolved})
		if e.Resolved != (e.Func.Object() != nil) {
			t.Errorf("%s: resolved %t but object %v", e.Name, e.Resolved, e.Func.Object())
		}
	}
	want := []rec{
		{"example.com/gpu.Backend.NewContext", "acquire", true},
		{"example.com/gpu.Closer.Close", "release", true},
		{"example.com/gpu.Context.Layer", "view", true},
		{"example.com/gpu.Pool.Put", "takes", true},
		{"example.com/gpu.Launch", "writes", true},
		{"example.com/gpu.Open", "acquire", true},
		{"github.com/ollama/ollama/ml.Backend.NewContext", "acquire", false},
		{"gopkg.in/yaml.v3.Node.Close", "release", false},
	}
	if !slices.Equal(got, want) {
		t.Errorf("externs:\n got %v\nwant %v", got, want)
	}
	if e := p.Externs[3]; !slices.Equal(e.Func.Takes, []string{"b"}) || e.Func.Name != "example.com/gpu.(*Pool).Put" {
		t.Errorf("takes line: %+v", e.Func)
	}
}

// TestExternErrors checks every finding of an extern line, at its token.
func TestExternErrors(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       string // "col: message prefix"
	}{
		{"no args", "//state:extern", "1: //state:extern needs a directive and the full name"},
		{"verb only", "//state:extern acquire", "1: //state:extern acquire needs the full name"},
		{"unknown verb", "//state:extern aquire example.com/gpu.Open", `16: unknown directive "aquire" in //state:extern; did you mean acquire?`},
		{"far verb", "//state:extern frobnicate example.com/gpu.Open", `16: unknown directive "frobnicate" in //state:extern; use one of acquire`},
		{"type verb", "//state:extern growth example.com/gpu.Open", "16: //state:extern carries a function directive"},
		{"key=value", "//state:extern acquire x=y example.com/gpu.Open", `24: //state:extern takes a directive, parameter names and a full name, not key=value; remove "x=y"`},
		{"malformed", "//state:extern acquire example.com/gpu.(*Pool.Put", `24: malformed full name "example.com/gpu.(*Pool.Put" in //state:extern`},
		{"no package", "//state:extern acquire Open", `24: malformed full name "Open" in //state:extern: it names no package`},
		{"takes without name", "//state:extern takes example.com/gpu.(*Pool).Put", "16: //state:extern takes needs a parameter name"},
		{"acquire with name", "//state:extern acquire b example.com/gpu.Open", `24: //state:extern acquire takes no parameter names; remove "b"`},
		{"release on func", "//state:extern release example.com/gpu.Sync", "16: //state:extern release applies to a method (it releases its receiver"},
		{"release on unknown func", "//state:extern release other.com/x.Free", "16: //state:extern release applies to a method, and other.com/x.Free names a plain func"},
		{"view on func", "//state:extern view example.com/gpu.Open", "16: //state:extern view applies to a method"},
		{"acquire of nothing", "//state:extern acquire example.com/gpu.Sync", "16: //state:extern acquire on example.com/gpu.Sync: it returns nothing"},
		{"no func", "//state:extern acquire example.com/gpu.Opne", "40: //state:extern names no func Opne in example.com/gpu; did you mean Open?"},
		{"far func", "//state:extern acquire example.com/gpu.Allocate", "40: //state:extern names no func Allocate in example.com/gpu; the nearest existing name is Launch"},
		{"unexported", "//state:extern acquire example.com/gpu.unexportd", ""},
		{"no type", "//state:extern release example.com/gpu.Contxt.Close", "40: //state:extern names no type Contxt in example.com/gpu; did you mean Context?"},
		{"no method", "//state:extern release example.com/gpu.Context.Clsoe", "48: //state:extern names no method of Context Clsoe in example.com/gpu; did you mean Close?"},
		{"type not func", "//state:extern acquire example.com/gpu.Pool", "40: example.com/gpu.Pool names type gpu.Pool, not a func"},
		{"var not func", "//state:extern acquire example.com/gpu.Default", "40: example.com/gpu.Default names var Default *Pool, not a func"},
		{"pointer interface", "//state:extern release example.com/gpu.(*Context).Close", "40: Context is an interface, whose methods are named example.com/gpu.Context.Close"},
		{"takes no param", "//state:extern takes buf example.com/gpu.(*Pool).Put", "22: //state:extern takes buf names no parameter of example.com/gpu.(*Pool).Put; the parameters are b, n"},
		{"takes near param", "//state:extern takes nn example.com/gpu.(*Pool).Put", "22: //state:extern takes nn names no parameter of example.com/gpu.(*Pool).Put; did you mean n?"},
		{"takes no params", "//state:extern takes x example.com/gpu.Sync", "22: //state:extern takes x names no parameter: example.com/gpu.Sync has no named parameters"},
		{"writes not writable", "//state:extern writes n example.com/gpu.Launch", "23: //state:extern writes n on example.com/gpu.Launch: parameter n has type int"},
		{"repeated", "//state:extern acquire example.com/gpu.Open\n//state:extern acquire example.com/gpu.Open", "1: repeated //state:extern acquire for example.com/gpu.Open (first at line 7)"},
		{"durable", "//state:extern durable example.com/gpu.Open", "1: the extern line claims durability"},
		{"look-alike", "// state:extern acquire example.com/gpu.Open", "1: // state:extern has a space after //"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "package p\n\nimport \"hub\"\n\nvar _ = hub.P\n\n" + tc.line + "\n"
			fset, p := parseExtern(t, src)
			var got []string
			for _, d := range p.Diagnostics {
				pos := fset.Position(d.Pos)
				if d.Analyzer != StContract || pos.Line < 7 || !d.End.IsValid() || d.End < d.Pos {
					t.Errorf("bad diagnostic %+v", d)
				}
				got = append(got, strconv.Itoa(pos.Column)+": "+d.Message)
			}
			if tc.want == "" {
				checkDiags(t, got, nil)
				return
			}
			checkDiags(t, got, []string{tc.want})
		})
	}
}

// TestExternName checks the names call sites are matched by.
func TestExternName(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "gpu.go", gpuSrc+"\ntype Box[T any] struct{}\n\nfunc (b *Box[T]) Get() T { var z T; return z }\n\nfunc local() { type L struct{}; _ = L{} }\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := new(types.Config).Check("example.com/gpu", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(typ, name string) *types.Func {
		if typ == "" {
			return pkg.Scope().Lookup(name).(*types.Func)
		}
		obj, _, _ := types.LookupFieldOrMethod(pkg.Scope().Lookup(typ).Type(), true, pkg, name)
		return obj.(*types.Func)
	}
	for _, tc := range []struct{ typ, name, want string }{
		{"", "Open", "example.com/gpu.Open"},
		{"Pool", "Put", "example.com/gpu.Pool.Put"},
		{"Pool", "Len", "example.com/gpu.Pool.Len"},
		{"Backend", "NewContext", "example.com/gpu.Backend.NewContext"},
		{"Context", "Close", "example.com/gpu.Closer.Close"},
		{"Box", "Get", "example.com/gpu.Box.Get"},
	} {
		if got := ExternName(lookup(tc.typ, tc.name)); got != tc.want {
			t.Errorf("ExternName(%s.%s) = %q, want %q", tc.typ, tc.name, got, tc.want)
		}
	}
	if got := ExternName(nil); got != "" {
		t.Errorf("ExternName(nil) = %q", got)
	}
}

// FuzzExternLines parses arbitrary free-standing extern lines, and
// interface methods with directives, with and without type information:
// diagnostics or records, never a panic.
func FuzzExternLines(f *testing.F) {
	for _, s := range []string{
		"acquire example.com/gpu.Open",
		"release example.com/gpu.(*Pool).Close\ntakes b n example.com/gpu.(*Pool).Put",
		"writes dst gopkg.in/yaml.v3.Launch\nview a/b%2ec.T.M",
		"aquire x.F\nrelease\n\ntakes x=y a.F\nacquire a/.F\nacquire a.(*T.M\nacquire a.b.c.d",
		"acquire fmt.Println\nrelease p.Iface.M\nacquire p.(*Iface).M\nwrites s p.F",
		"durable x.F\nextern extern x.F\ngrowth append x.F\nacquire \"quoted\" x.F",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lines string) {
		var b strings.Builder
		b.WriteString("package p\n\ntype Iface interface {\n")
		for _, l := range strings.Split(lines, "\n") {
			b.WriteString("\t//state:" + strings.ReplaceAll(l, "\r", "") + "\n\tM" + strconv.Itoa(b.Len()) + "(s []int) int\n")
		}
		b.WriteString("}\n\nfunc F(s []int) {}\n\n")
		for _, l := range strings.Split(lines, "\n") {
			b.WriteString("//state:extern " + strings.ReplaceAll(l, "\r", "") + "\n\n")
		}
		checkSource(t, b.String())
	})
}
