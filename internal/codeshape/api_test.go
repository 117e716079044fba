package codeshape

import (
	"go/ast"
	"go/types"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The runtime's three packages with an API: what users name, what
// generated code names, and the store behind both.
const (
	statePath = "github.com/gpustate/gpustate/runtime/state"
	implPath  = "github.com/gpustate/gpustate/runtime/state/stateimpl"
	storePath = "github.com/gpustate/gpustate/runtime/state/internal/store"
)

var apiPaths = []string{statePath, implPath, storePath}

// apiUse is what the repository names of the runtime's API, per package
// path, keyed as docs write it: "NewPool", "Pool", "ErrBound",
// "Head.Append" (a method, by its receiver's type name), "Layout.Columns"
// (a field).
type apiUse struct {
	pkgs      map[string]*types.Package  // the three packages, as their importers see them
	outside   map[string]map[string]bool // named by a package other than the one that declares it, tests included
	generated map[string]map[string]bool // named by stategen's output (files marked generated)
}

var (
	apiOnce sync.Once
	apiSeen *apiUse
	apiErr  string
)

// loadAPIUse type-checks every package of the module that imports one of
// the runtime's API packages, with their tests, and the golden packages of
// gen (under gen/testdata/src, which ./... leaves out), and records which
// of their exported names each one uses. A call through an interface
// (generated helpers read a head or a snapshot through one, and
// runtime/state reaches the store through one) uses the method of every
// type of the three packages that implements the interface.
func loadAPIUse(t *testing.T) *apiUse {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	if testing.Short() {
		t.Skip("type-checks the module's users of runtime/state; not in -short")
	}
	apiOnce.Do(func() { apiSeen, apiErr = collectAPIUse() })
	if apiErr != "" {
		t.Fatal(apiErr)
	}
	return apiSeen
}

func collectAPIUse() (*apiUse, string) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err.Error()
	}
	patterns := []string{"./..."}
	golden, _ := filepath.Glob(filepath.Join(root, "gen", "testdata", "src", "*"))
	for _, dir := range golden {
		patterns = append(patterns, "./"+filepath.ToSlash(strings.TrimPrefix(dir, root+string(filepath.Separator))))
	}
	// First which packages import the API at all: type-checking only those
	// keeps the test to seconds.
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedImports, Dir: root, Tests: true}
	listed, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err.Error()
	}
	users := slices.Clone(apiPaths) // each reaches the others: state the store through interfaces
	for _, p := range listed {
		// An external test package (p_test) loads with p's pattern.
		path := strings.TrimSuffix(p.PkgPath, "_test")
		for _, api := range apiPaths {
			if _, ok := p.Imports[api]; ok && !slices.Contains(users, path) {
				users = append(users, path)
			}
		}
	}
	if len(users) < 10 {
		return nil, "found only " + strings.Join(users, ", ") + " importing runtime/state: the load is not seeing the module"
	}
	cfg.Mode = packages.NeedName | packages.NeedImports | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax | packages.NeedFiles | packages.NeedDeps
	pkgs, err := packages.Load(cfg, users...)
	if err != nil {
		return nil, err.Error()
	}
	u := &apiUse{pkgs: map[string]*types.Package{}, outside: map[string]map[string]bool{}, generated: map[string]map[string]bool{}}
	for _, api := range apiPaths {
		u.outside[api], u.generated[api] = map[string]bool{}, map[string]bool{}
	}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if slices.Contains(apiPaths, p.PkgPath) && p.ID == p.PkgPath && p.Types != nil { // not a test variant
			u.pkgs[p.PkgPath] = p.Types
		}
	})
	for _, api := range apiPaths {
		if u.pkgs[api] == nil {
			return nil, "the load has no package " + api
		}
	}
	for _, p := range pkgs {
		if p.Types == nil || strings.HasSuffix(p.PkgPath, ".test") { // a test main names every test
			continue
		}
		for _, f := range p.Syntax {
			recordUses(u, strings.TrimSuffix(p.PkgPath, "_test"), p.TypesInfo, f, ast.IsGenerated(f))
		}
	}
	return u, ""
}

// exportedFuncs returns the exported functions of pkg and the exported
// methods of its exported named types.
func exportedFuncs(pkg *types.Package) map[string]bool {
	out := map[string]bool{}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Func:
			out[name] = true
		case *types.TypeName:
			if obj.IsAlias() {
				continue
			}
			named, ok := obj.Type().(*types.Named)
			if !ok {
				continue
			}
			for m := range named.Methods() {
				if m.Exported() {
					out[name+"."+m.Name()] = true
				}
			}
		}
	}
	return out
}

// recordUses adds to u what f, a file of package path, names of the API.
func recordUses(u *apiUse, path string, info *types.Info, f *ast.File, generated bool) {
	add := func(api, key string) {
		if api == path {
			return // the package's own use, or its tests'
		}
		u.outside[api][key] = true
		if generated {
			u.generated[api][key] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if api, key := apiKey(info.Uses[n]); key != "" {
				add(api, key)
			}
		case *ast.SelectorExpr:
			sel := info.Selections[n]
			if sel == nil || sel.Kind() != types.MethodVal {
				return true
			}
			iface, ok := sel.Recv().Underlying().(*types.Interface)
			if !ok {
				return true
			}
			for _, api := range apiPaths {
				for _, key := range implementers(u.pkgs[api], iface, sel.Obj().Name()) {
					add(api, key)
				}
			}
		}
		return true
	})
}

// apiKey names obj as docs write it when it is an exported object of one
// of the API packages: that package's path and "Pool", "Head.Append",
// "Layout.Columns"; else "".
func apiKey(obj types.Object) (string, string) {
	if obj == nil || obj.Pkg() == nil || !slices.Contains(apiPaths, obj.Pkg().Path()) || !obj.Exported() {
		return "", ""
	}
	api := obj.Pkg().Path()
	switch obj := obj.(type) {
	case *types.Func:
		if recv := obj.Signature().Recv(); recv != nil {
			return api, typeName(recv.Type()) + "." + obj.Name()
		}
	case *types.Var:
		if obj.IsField() {
			return api, fieldOwner(obj) + "." + obj.Name()
		}
	}
	if obj.Parent() != obj.Pkg().Scope() {
		return "", ""
	}
	return api, obj.Name()
}

// typeName returns the name of t or of what t points to.
func typeName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return t.String()
}

// fieldOwner returns the name of the struct type of runtime/state that
// declares field v.
func fieldOwner(v *types.Var) string {
	scope := v.Pkg().Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		st, ok := tn.Type().Underlying().(*types.Struct)
		if !ok {
			continue
		}
		for f := range st.Fields() {
			if f == v {
				return name
			}
		}
	}
	return "?"
}

// implementers returns "T.name" for every exported named type T of pkg
// whose pointer implements iface.
func implementers(pkg *types.Package, iface *types.Interface, name string) []string {
	var keys []string
	scope := pkg.Scope()
	for _, tn := range scope.Names() {
		obj, ok := scope.Lookup(tn).(*types.TypeName)
		if !ok || !obj.Exported() || obj.IsAlias() {
			continue
		}
		if types.Implements(types.NewPointer(obj.Type()), iface) {
			keys = append(keys, tn+"."+name)
		}
	}
	return keys
}

// TestExportsHaveCallersOutside lists the exported functions and methods
// of the runtime's API packages (runtime/state, its stateimpl and its
// internal store) that nothing outside their own package calls: not
// generated code, not the examples, commands, tools or statemetrics, not
// another package's tests. Each is either unexported, removed, or made
// reachable where a user needs it. The fmt and errors protocols (String,
// Error) are called through their interfaces.
func TestExportsHaveCallersOutside(t *testing.T) {
	u := loadAPIUse(t)
	var unused []string
	for _, api := range apiPaths {
		for name := range exportedFuncs(u.pkgs[api]) {
			if u.outside[api][name] || strings.HasSuffix(name, ".String") || strings.HasSuffix(name, ".Error") {
				continue
			}
			unused = append(unused, api+": "+name)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("exported with no caller outside the package (unexport or remove them, or reach them from generated code):\n\t%s", strings.Join(unused, "\n\t"))
	}
}
