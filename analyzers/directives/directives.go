package directives

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/types"
	"reflect"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/gpustate/gpustate/analyzers/internal/analysisutil"
	"github.com/gpustate/gpustate/contract"
)

//go:embed doc.go
var doc string

// Analyzer parses //state: directives and exports them as facts. Its result
// is a *Result.
var Analyzer = &analysis.Analyzer{
	Name:       "directives",
	Doc:        analysisutil.MustExtractDoc(doc, "directives"),
	URL:        "https://pkg.go.dev/github.com/gpustate/gpustate/analyzers/directives",
	Run:        run,
	ResultType: reflect.TypeFor[*Result](),
	FactTypes: []analysis.Fact{
		(*ContractFact)(nil),
		(*FuncFact)(nil),
		(*SnapshotFact)(nil),
		(*PackageFact)(nil),
		(*ExternFact)(nil),
	},
}

// ContractFact is the contract of a state type, exported on its
// *types.TypeName. Positions are cleared: they mean nothing in another package.
type ContractFact struct{ Contract contract.Contract }

// FuncFact holds the function directives of a func or method, exported on
// its *types.Func.
type FuncFact struct{ Func contract.Func }

// SnapshotFact marks a snapshot type, exported on its *types.TypeName.
type SnapshotFact struct{ Type string }

// PackageFact marks a package that declares directives or imports, directly
// or not, a package that does.
type PackageFact struct {
	Declares bool // the package itself declares directives
}

// ExternFact holds the //state:extern lines that hold in a package: its own
// and those of the packages it imports, directly or not, one entry per
// target with the union of their directives, sorted by name; positions are
// cleared. Every package that sees extern lines exports it, because drivers
// such as go vet give a package the package facts of its direct imports
// only.
type ExternFact struct{ Externs []contract.Extern }

func (*ContractFact) AFact() {}
func (*FuncFact) AFact()     {}
func (*SnapshotFact) AFact() {}
func (*PackageFact) AFact()  {}
func (*ExternFact) AFact()   {}

func (f *ContractFact) String() string {
	c := &f.Contract
	return fmt.Sprintf("contract %s growth=%s valid=%t", c.Type, c.Growth, c.Valid)
}

func (f *FuncFact) String() string {
	fn := &f.Func
	var b strings.Builder
	b.WriteString("directives")
	for _, x := range []struct {
		on   bool
		verb string
	}{{fn.Acquire, "acquire"}, {fn.Release, "release"}, {fn.Mutates && !fn.Appends, "mutates"}, {fn.Appends, "appends"}, {fn.View, "view"}, {fn.Valid, "valid"}, {fn.ErrMap, "errmap"}} {
		if x.on {
			b.WriteString(" " + x.verb)
		}
	}
	for _, n := range fn.Results {
		fmt.Fprintf(&b, " result=%d", n)
	}
	if fn.Releaser > 0 {
		fmt.Fprintf(&b, " releaser=%d", fn.Releaser-1)
	}
	for _, n := range fn.Takes {
		b.WriteString(" takes=" + n)
	}
	for _, n := range fn.TakesOnSuccess {
		b.WriteString(" takes=" + n + "(onsuccess)")
	}
	for _, n := range fn.Frees {
		b.WriteString(" frees=" + n)
	}
	if fn.Child != "" {
		b.WriteString(" child=" + fn.Child)
	}
	for _, n := range fn.Writes {
		b.WriteString(" writes=" + n)
	}
	return b.String()
}

func (f *SnapshotFact) String() string { return "snapshot " + f.Type }

func (f *ExternFact) String() string {
	var b strings.Builder
	b.WriteString("extern")
	for i := range f.Externs {
		e := &f.Externs[i]
		b.WriteString(" " + e.Name + ":" + strings.TrimPrefix((&FuncFact{Func: e.Func}).String(), "directives "))
	}
	return b.String()
}

func (f *PackageFact) String() string {
	if f.Declares {
		return "directives declared"
	}
	return "directives imported"
}

// Result is what the directives analyzer knows about one package: its own
// directives, and through facts those of the packages it imports. Its
// methods may be called concurrently.
type Result struct {
	pass      *analysis.Pass
	active    bool
	pkg       *contract.Package
	funcs     map[*types.Func]*contract.Func
	contracts map[*types.TypeName]*contract.Contract
	snapshots map[*types.TypeName]bool
	externs   *externs // nil: no extern lines hold here
}

// Active reports whether the package declares directives or imports a
// package that does. When it is false, analyzers return at once.
func (r *Result) Active() bool { return r.active }

// Package returns this package's parse: contracts, snapshot types, function
// directives and diagnostics. It is empty, never nil, for an inactive package.
func (r *Result) Package() *contract.Package { return r.pkg }

// Func returns the function directives of fn, declared in this package or
// imported through facts, joined with the //state:extern lines that hold
// here and name fn (matched by contract.ExternName), or nil when it has
// none. For an instance of a generic func or method, it answers for the
// generic declaration. For an interface method, it answers the directives
// of the interface's declaration, which hold for calls through it.
func (r *Result) Func(fn *types.Func) *contract.Func {
	if !r.active || fn == nil {
		return nil
	}
	fn = fn.Origin()
	f := r.declared(fn)
	if r.externs.empty() {
		return f
	}
	return r.externs.join(fn, f)
}

// declared returns the directives of fn's own declaration, or nil.
func (r *Result) declared(fn *types.Func) *contract.Func {
	if f, ok := r.funcs[fn]; ok {
		return f
	}
	if fn.Pkg() == nil || fn.Pkg() == r.pass.Pkg {
		return nil
	}
	var fact FuncFact
	if r.pass.ImportObjectFact(fn, &fact) {
		return &fact.Func
	}
	return nil
}

// Contract returns the contract of the state type tn, declared in this
// package or imported through facts, or nil when tn is not a state type.
// Contracts with errors are returned too: check Valid.
func (r *Result) Contract(tn *types.TypeName) *contract.Contract {
	if !r.active || tn == nil {
		return nil
	}
	if c, ok := r.contracts[tn]; ok {
		return c
	}
	if tn.Pkg() == nil || tn.Pkg() == r.pass.Pkg {
		return nil
	}
	var fact ContractFact
	if r.pass.ImportObjectFact(tn, &fact) {
		return &fact.Contract
	}
	return nil
}

// IsSnapshot reports whether t, or *t, is a snapshot type (a type whose doc
// comment holds //state:snapshot), declared here or imported.
func (r *Result) IsSnapshot(t types.Type) bool {
	if !r.active || t == nil {
		return false
	}
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	tn := named.Origin().Obj()
	if r.snapshots[tn] {
		return true
	}
	if tn.Pkg() == nil || tn.Pkg() == r.pass.Pkg {
		return false
	}
	var fact SnapshotFact
	return r.pass.ImportObjectFact(tn, &fact)
}

// run parses the package's directives and exports them as facts.
//
// Fast path: a package none of whose comments contains "state:" and none of
// whose imports carries a PackageFact has nothing to say; run returns an
// inactive Result without parsing anything beyond that byte scan. Otherwise
// it parses the files that mention "state:" with contract.ParsePackage,
// exports a fact on every state type, snapshot type and func or interface
// method with directives (positions cleared), a PackageFact when the package
// declares directives or any import has the fact, and an ExternFact when
// //state:extern lines hold here (its own, or those of its imports).
func run(pass *analysis.Pass) (any, error) {
	r := &Result{pass: pass, pkg: new(contract.Package)}
	var importers []*types.Package // direct imports with directives
	for _, imp := range pass.Pkg.Imports() {
		if pass.ImportPackageFact(imp, new(PackageFact)) {
			importers = append(importers, imp)
		}
	}
	imported := len(importers) > 0
	if !imported && !mentionsState(pass.Files) {
		return r, nil
	}

	r.pkg = contract.ParsePackage(pass.Fset, pass.Files, pass.Pkg, pass.TypesInfo)
	declares := len(r.pkg.Contracts)+len(r.pkg.Funcs)+len(r.pkg.Snapshots)+len(r.pkg.Externs)+len(r.pkg.Diagnostics) > 0
	r.active = declares || imported
	if !r.active {
		return r, nil
	}
	pass.ExportPackageFact(&PackageFact{Declares: declares})
	r.externs = gatherExterns(pass, importers, r.pkg.Externs)

	r.funcs = make(map[*types.Func]*contract.Func)
	r.contracts = make(map[*types.TypeName]*contract.Contract)
	r.snapshots = make(map[*types.TypeName]bool)
	for _, c := range r.pkg.Contracts {
		if obj := c.Object(); obj != nil {
			r.contracts[obj] = c
			fact := &ContractFact{Contract: *c}
			fact.Contract.Pos = 0
			fact.Contract.Fields = append([]contract.Field(nil), c.Fields...)
			if c.Checkpoint != nil {
				ck := *c.Checkpoint
				fact.Contract.Checkpoint = &ck
			}
			pass.ExportObjectFact(obj, fact)
		}
	}
	for _, f := range r.pkg.Funcs {
		if obj := f.Object(); obj != nil {
			r.funcs[obj] = f
			fact := &FuncFact{Func: *f}
			fact.Func.Pos = 0
			fact.Func.Takes = append([]string(nil), f.Takes...)
			fact.Func.Writes = append([]string(nil), f.Writes...)
			fact.Func.Frees = append([]string(nil), f.Frees...)
			fact.Func.TakesOnSuccess = append([]string(nil), f.TakesOnSuccess...)
			fact.Func.Results = append([]int(nil), f.Results...)
			pass.ExportObjectFact(obj, fact)
		}
	}
	for _, s := range r.pkg.Snapshots {
		if obj := s.Object(); obj != nil {
			r.snapshots[obj] = true
			pass.ExportObjectFact(obj, &SnapshotFact{Type: s.Type})
		}
	}
	return r, nil
}

// mentionsState is the cheap byte scan of the fast path: whether any comment
// of any file contains "state:".
func mentionsState(files []*ast.File) bool {
	for _, f := range files {
		for _, g := range f.Comments {
			for _, c := range g.List {
				if strings.Contains(c.Text, "state:") {
					return true
				}
			}
		}
	}
	return false
}
