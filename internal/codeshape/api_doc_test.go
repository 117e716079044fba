package codeshape

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The heads of the two Go blocks of docs/INTERNALS.md that list the
// runtime's API, one block per audience.
const (
	generatedBlock = "package stateimpl // what generated code names"
	userBlock      = "package state // what users name"
)

// TestInternalsListsTheGeneratedAPI checks docs/INTERNALS.md's lists of
// the runtime's API against the code, so that they cannot drift. The block
// of what generated code names holds exactly what stategen's output names
// of stateimpl and of the store it aliases (gen's golden files, the
// examples' generated files, and every name gen's renderer qualifies, for
// the contracts no golden file has), every field it sets, and every name
// stateimpl exports; the block of what users name holds exactly
// runtime/state's exported API; and every field either block lists exists.
func TestInternalsListsTheGeneratedAPI(t *testing.T) {
	u := loadAPIUse(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "INTERNALS.md"))
	if err != nil {
		t.Fatal(err)
	}
	gen, genFields := docBlock(t, string(doc), generatedBlock)
	user, userFields := docBlock(t, string(doc), userBlock)
	store, impl, state := u.pkgs[storePath], u.pkgs[implPath], u.pkgs[statePath]

	generated := map[string]bool{}
	generatedFields := map[string]bool{}
	for _, api := range []string{implPath, storePath} {
		for name := range u.generated[api] {
			if isField(store, name) {
				generatedFields[name] = true
			} else {
				generated[name] = true
			}
		}
	}
	for _, name := range rendererNames(t) {
		if impl.Scope().Lookup(name) != nil {
			generated[name] = true
		}
	}
	for name := range exportedNames(impl) {
		generated[name] = true
	}
	addTypesOf(store, generated, generatedFields)
	diff(t, "what generated code names", generated, fmt.Sprintf("docs/INTERNALS.md's block %q", generatedBlock), gen)
	for name := range generatedFields {
		if !genFields[name] {
			t.Errorf("generated code sets %s; the block %q does not list it", name, generatedBlock)
		}
	}
	for name := range genFields {
		if !isField(store, name) {
			t.Errorf("docs/INTERNALS.md lists the field %s, which the store does not export", name)
		}
	}
	diff(t, "what runtime/state exports", exportedNames(state), fmt.Sprintf("docs/INTERNALS.md's block %q", userBlock), user)
	for name := range userFields {
		if !isField(state, name) {
			t.Errorf("docs/INTERNALS.md lists the field %s, which runtime/state does not export", name)
		}
	}
}

// addTypesOf adds to names the types of runtime/state that the values it
// holds and fields have, which the code that names them names too
// (state.Append is a Growth), then, for every type in names, the
// constants of that type (Mandatory, the zero Retention, which generated
// code leaves out) and its String and Error methods.
func addTypesOf(pkg *types.Package, names, fields map[string]bool) {
	addNamed := func(t types.Type) {
		for {
			switch u := t.(type) {
			case *types.Pointer:
				t = u.Elem()
				continue
			case *types.Slice:
				t = u.Elem()
				continue
			}
			break
		}
		if n, ok := t.(*types.Named); ok && n.Obj().Pkg() == pkg && n.Obj().Exported() {
			names[n.Obj().Name()] = true
		}
	}
	scope := pkg.Scope()
	for name := range names {
		if obj := scope.Lookup(name); obj != nil {
			if _, ok := obj.(*types.TypeName); !ok {
				addNamed(obj.Type())
			}
		}
	}
	for name := range fields {
		typ, field, _ := strings.Cut(name, ".")
		if obj, _, _ := types.LookupFieldOrMethod(scope.Lookup(typ).Type(), false, pkg, field); obj != nil {
			addNamed(obj.Type())
		}
	}
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if c, ok := obj.(*types.Const); ok && c.Exported() {
			if n, ok := c.Type().(*types.Named); ok && names[n.Obj().Name()] {
				names[name] = true
			}
		}
		if tn, ok := obj.(*types.TypeName); ok && names[name] && !tn.IsAlias() {
			if n, ok := tn.Type().(*types.Named); ok {
				for m := range n.Methods() {
					if m.Name() == "String" || m.Name() == "Error" {
						names[name+"."+m.Name()] = true
					}
				}
			}
		}
	}
}

// diff reports the names one set has and the other lacks, both ways.
func diff(t *testing.T, whatA string, a map[string]bool, whatB string, b map[string]bool) {
	t.Helper()
	var onlyA, onlyB []string
	for name := range a {
		if !b[name] {
			onlyA = append(onlyA, name)
		}
	}
	for name := range b {
		if !a[name] {
			onlyB = append(onlyB, name)
		}
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	if len(onlyA) > 0 {
		t.Errorf("in %s, not in %s: %s", whatA, whatB, strings.Join(onlyA, ", "))
	}
	if len(onlyB) > 0 {
		t.Errorf("in %s, not in %s: %s", whatB, whatA, strings.Join(onlyB, ", "))
	}
}

// docBlock parses the Go block of doc that starts with head and returns
// the names it declares ("Pool", "NewPool", "Head.Append", "ErrBound") and,
// apart, the fields of the struct types it declares ("Layout.Columns").
// The block must be Go: functions without bodies, as assembly's are.
func docBlock(t *testing.T, doc, head string) (names, fields map[string]bool) {
	t.Helper()
	_, block, ok := strings.Cut(doc, "```go\n"+head+"\n")
	if !ok {
		t.Fatalf("docs/INTERNALS.md has no Go block starting %q", head)
	}
	block, _, _ = strings.Cut(block, "```")
	f, err := parser.ParseFile(token.NewFileSet(), "INTERNALS.md", head+"\n"+block, 0)
	if err != nil {
		t.Fatalf("docs/INTERNALS.md, the block %q: %v", head, err)
	}
	names, fields = map[string]bool{}, map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				name = recvName(d.Recv.List[0].Type) + "." + name
			}
			names[name] = true
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					names[spec.Name.Name] = true
					if st, ok := spec.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							for _, n := range fl.Names {
								fields[spec.Name.Name+"."+n.Name] = true
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	return names, fields
}

// recvName returns the type name of a receiver expression: T, *T, *T[P].
func recvName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

// exportedNames returns every exported package-level name of pkg and every
// exported method of its exported named types.
func exportedNames(pkg *types.Package) map[string]bool {
	out := exportedFuncs(pkg)
	for _, name := range pkg.Scope().Names() {
		if token.IsExported(name) {
			out[name] = true
		}
	}
	return out
}

// isField reports whether name ("Layout.Columns") is an exported field of
// a struct type of pkg.
func isField(pkg *types.Package, name string) bool {
	typ, field, ok := strings.Cut(name, ".")
	if !ok {
		return false
	}
	tn, ok := pkg.Scope().Lookup(typ).(*types.TypeName)
	if !ok {
		return false
	}
	st, ok := tn.Type().Underlying().(*types.Struct)
	if !ok {
		return false
	}
	for f := range st.Fields() {
		if f.Name() == field && f.Exported() {
			return true
		}
	}
	return false
}

// rendererNames returns the names gen's renderer qualifies as literals
// (st("Reconstructable")): what generated code names for contracts that no
// golden file holds.
func rendererNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "gen", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if fn, ok := call.Fun.(*ast.Ident); !ok || fn.Name != "st" {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if name, err := strconv.Unquote(lit.Value); err == nil {
					names = append(names, name)
				}
			}
			return true
		})
	}
	if len(names) < 10 {
		t.Fatalf("found %d names gen's renderer qualifies; the scan is not seeing it", len(names))
	}
	return names
}

// TestUserDocIsShort holds runtime/state's documentation, all a user reads
// besides the generated handles' own, to 400 lines of go doc -all: what
// only generated code needs lives in stateimpl.
func TestUserDocIsShort(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command("go", "doc", "-all", "./runtime/state")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go doc -all ./runtime/state: %v", err)
	}
	if n := strings.Count(string(out), "\n"); n > 400 {
		t.Errorf("go doc -all ./runtime/state prints %d lines, want at most 400", n)
	}
}
