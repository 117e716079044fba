package directives

import (
	"go/types"
	"slices"
	"sort"
	"sync"

	"golang.org/x/tools/go/analysis"

	"github.com/gpustate/gpustate/contract"
)

// externs are the //state:extern lines that hold in a package, joined per
// target and keyed by contract.ExternName.
type externs struct {
	byName map[string]*contract.Func

	mu     sync.Mutex
	joined map[*types.Func]*contract.Func // cache of join, nil values included
}

func (x *externs) empty() bool { return x == nil || len(x.byName) == 0 }

// join returns the directives of fn, f from its declaration (or nil), with
// those of the extern lines that name it.
func (x *externs) join(fn *types.Func, f *contract.Func) *contract.Func {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g, ok := x.joined[fn]; ok {
		return g
	}
	g := f
	if e := x.byName[contract.ExternName(fn)]; e != nil {
		g = e
		if f != nil {
			g = mergeFunc(f, e)
		}
	}
	x.joined[fn] = g
	return g
}

// gatherExterns joins the extern lines of the package (own) with those that
// hold in the direct imports with directives (importers), and exports the
// result as the package's ExternFact when there are any: the lines of a
// package hold in every package that imports it, directly or not.
func gatherExterns(pass *analysis.Pass, importers []*types.Package, own []*contract.Extern) *externs {
	by := make(map[string]*contract.Func)
	add := func(name string, f *contract.Func) {
		if prev := by[name]; prev != nil {
			by[name] = mergeFunc(prev, f)
			return
		}
		by[name] = mergeFunc(f, f)
	}
	for _, imp := range importers {
		var ef ExternFact
		if pass.ImportPackageFact(imp, &ef) {
			for i := range ef.Externs {
				add(ef.Externs[i].Name, &ef.Externs[i].Func)
			}
		}
	}
	for _, e := range own {
		add(e.Name, &e.Func)
	}
	if len(by) == 0 {
		return nil
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	fact := &ExternFact{Externs: make([]contract.Extern, len(names))}
	for i, n := range names {
		f := mergeFunc(by[n], by[n])
		f.Name, f.Pos = n, 0
		fact.Externs[i] = contract.Extern{Name: n, Func: *f}
	}
	pass.ExportPackageFact(fact)
	return &externs{byName: by, joined: make(map[*types.Func]*contract.Func)}
}

// mergeFunc returns a new record with the directives of a and b; its name,
// position and object are a's.
func mergeFunc(a, b *contract.Func) *contract.Func {
	c := *a
	c.Acquire = a.Acquire || b.Acquire
	c.Release = a.Release || b.Release
	c.Mutates = a.Mutates || b.Mutates
	c.Appends = a.Appends || b.Appends
	c.View = a.View || b.View
	c.Takes = union(a.Takes, b.Takes)
	c.Writes = union(a.Writes, b.Writes)
	c.Frees = union(a.Frees, b.Frees)
	c.TakesOnSuccess = union(a.TakesOnSuccess, b.TakesOnSuccess)
	c.Results = unionInts(a.Results, b.Results)
	c.Releaser = max(a.Releaser, b.Releaser)
	if c.Child == "" {
		c.Child = b.Child
	}
	c.Valid = a.Valid || b.Valid
	c.ErrMap = a.ErrMap || b.ErrMap
	return &c
}

// union returns the names of a followed by those of b not in a, in a new
// slice (nil when both are empty).
func union(a, b []string) []string {
	var out []string
	for _, s := range slices.Concat(a, b) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// unionInts returns the indices of a followed by those of b not in a, in a
// new slice (nil when both are empty).
func unionInts(a, b []int) []int {
	var out []int
	for _, n := range slices.Concat(a, b) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
