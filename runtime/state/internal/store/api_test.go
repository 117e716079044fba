package store_test

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

const statePath = "github.com/gpustate/gpustate/runtime/state/internal/store"

// apiUse is what the rest of the repository names of runtime/state, keyed
// as docs write it: "NewPool", "Pool", "ErrBound", "Head.Append" (a method,
// by its receiver's type name), "Layout.Columns" (a field).
type apiUse struct {
	pkg       *types.Package  // runtime/state, as its importers see it
	exported  map[string]bool // every exported function and method of the package
	outside   map[string]bool // named by a package other than runtime/state, tests included
	generated map[string]bool // named by stategen's output (files marked generated)
}

var (
	apiOnce sync.Once
	apiSeen *apiUse
	apiErr  string
)

// loadAPIUse type-checks every package of the module that imports
// runtime/state, with their tests, and the golden packages of gen (under
// gen/testdata/src, which ./... leaves out), and records which of the
// package's exported names each one uses. A call through an interface
// (generated helpers read a head or a snapshot through one) uses the method
// of every type of runtime/state that implements the interface.
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
	// First which packages import runtime/state at all: type-checking only
	// those keeps the test to seconds.
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedImports, Dir: root, Tests: true}
	listed, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err.Error()
	}
	var users []string
	for _, p := range listed {
		// An external test package (p_test) loads with p's pattern.
		path := strings.TrimSuffix(p.PkgPath, "_test")
		if _, ok := p.Imports[statePath]; ok && path != statePath && !slices.Contains(users, path) {
			users = append(users, path)
		}
	}
	if len(users) < 10 {
		return nil, "found only " + strings.Join(users, ", ") + " importing runtime/state: the load is not seeing the module"
	}
	cfg.Mode = packages.NeedName | packages.NeedImports | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax | packages.NeedFiles
	pkgs, err := packages.Load(cfg, users...)
	if err != nil {
		return nil, err.Error()
	}
	u := &apiUse{exported: map[string]bool{}, outside: map[string]bool{}, generated: map[string]bool{}}
	var state *types.Package
	for _, p := range pkgs {
		if p.Types == nil || isStateItself(p.PkgPath) {
			continue
		}
		for _, imp := range p.Types.Imports() {
			if imp.Path() == statePath {
				state = imp
			}
		}
		for _, f := range p.Syntax {
			recordUses(u, p.TypesInfo, f, ast.IsGenerated(f))
		}
	}
	if state == nil {
		return nil, "no package imports runtime/state"
	}
	u.pkg = state
	for name := range exportedFuncs(state) {
		u.exported[name] = true
	}
	return u, ""
}

// isStateItself reports whether path is runtime/state or its external test
// package: their uses are not callers from outside.
func isStateItself(path string) bool {
	return path == statePath || path == statePath+"_test"
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

// recordUses adds to u what f names of runtime/state.
func recordUses(u *apiUse, info *types.Info, f *ast.File, generated bool) {
	add := func(key string) {
		u.outside[key] = true
		if generated {
			u.generated[key] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if key := apiKey(info.Uses[n]); key != "" {
				add(key)
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
			for _, key := range implementers(sel.Obj().Pkg(), iface, sel.Obj().Name()) {
				add(key)
			}
		}
		return true
	})
}

// apiKey names obj as docs write it when it is an exported object of
// runtime/state: "Pool", "Head.Append", "Layout.Columns"; else "".
func apiKey(obj types.Object) string {
	if obj == nil || obj.Pkg() == nil || obj.Pkg().Path() != statePath || !obj.Exported() {
		return ""
	}
	switch obj := obj.(type) {
	case *types.Func:
		if recv := obj.Signature().Recv(); recv != nil {
			return typeName(recv.Type()) + "." + obj.Name()
		}
	case *types.Var:
		if obj.IsField() {
			return fieldOwner(obj) + "." + obj.Name()
		}
	}
	if obj.Parent() != obj.Pkg().Scope() {
		return ""
	}
	return obj.Name()
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

// implementers returns "T.name" for every named type T of runtime/state
// whose pointer implements iface, where pkg is the package that calls the
// interface's method; it looks runtime/state up among pkg's imports.
func implementers(pkg *types.Package, iface *types.Interface, name string) []string {
	var keys []string
	for _, imp := range pkgImports(pkg) {
		if imp.Path() != statePath {
			continue
		}
		scope := imp.Scope()
		for _, tn := range scope.Names() {
			obj, ok := scope.Lookup(tn).(*types.TypeName)
			if !ok || !obj.Exported() || obj.IsAlias() {
				continue
			}
			if types.Implements(types.NewPointer(obj.Type()), iface) {
				keys = append(keys, tn+"."+name)
			}
		}
	}
	return keys
}

func pkgImports(pkg *types.Package) []*types.Package {
	if pkg == nil {
		return nil
	}
	return pkg.Imports()
}

// TestExportsHaveCallersOutside lists the exported functions and methods
// of runtime/state that nothing outside the package calls: not generated
// code, not the examples, commands, tools or statemetrics, not another
// package's tests. Each is either unexported, removed, or made reachable
// where a user needs it. The fmt and errors protocols (String, Error) are
// called through their interfaces.
func TestExportsHaveCallersOutside(t *testing.T) {
	u := loadAPIUse(t)
	var unused []string
	for name := range u.exported {
		if u.outside[name] || strings.HasSuffix(name, ".String") || strings.HasSuffix(name, ".Error") {
			continue
		}
		unused = append(unused, name)
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("exported by runtime/state with no caller outside the package (unexport or remove them, or reach them from generated code):\n\t%s", strings.Join(unused, "\n\t"))
	}
}
