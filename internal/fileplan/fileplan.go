// Package fileplan measures how a package's files depend on one another:
// it orders the files bottom-up so that as few dependencies as it can find
// run from a file to one placed above it (a plan), and lists the arrows that
// still run back up. docs/INTERNALS.md keeps runtime/state's count low; the
// codeshape tests hold it there.
//
// A file depends on another when it names a package-level declaration (a
// function, type, variable, constant, method or struct field) declared
// there. Each ordered pair of files counts once. Test files are left out.
package fileplan

import (
	"fmt"
	"go/types"
	"math/rand"
	"path/filepath"
	"sort"

	"golang.org/x/tools/go/packages"
)

// Plan is a package's files bottom-up and the dependencies between them.
type Plan struct {
	Files  []string // base names, bottom-up
	Arrows []Arrow  // every dependency between two files
	Back   []Arrow  // the arrows from a file to one above it
}

// Arrow is one file's dependency on another.
type Arrow struct {
	From, To string
	Via      string // one name the dependency goes through
}

// Load type-checks the package in dir and plans its non-test files.
func Load(dir string) (*Plan, error) {
	files, edges, err := load(dir)
	if err != nil {
		return nil, err
	}
	return build(files, edges), nil
}

func build(files []string, edges []edge) *Plan {
	order := plan(len(files), edges)
	p := &Plan{}
	for _, f := range order {
		p.Files = append(p.Files, files[f])
	}
	for _, e := range edges {
		p.Arrows = append(p.Arrows, Arrow{files[e.from], files[e.to], e.via})
	}
	for _, e := range backArrows(order, edges) {
		p.Back = append(p.Back, Arrow{files[e.from], files[e.to], e.via})
	}
	return p
}

type edge struct {
	from, to int
	via      string // one name the dependency goes through
}

// load type-checks the package in dir and returns its non-test files and
// the dependencies between them.
func load(dir string) ([]string, []edge, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo, Dir: dir}
	pkgs, err := packages.Load(cfg, ".")
	if err != nil {
		return nil, nil, err
	}
	if len(pkgs) != 1 {
		return nil, nil, fmt.Errorf("%s: want one package, found %d", dir, len(pkgs))
	}
	p := pkgs[0]
	if len(p.Errors) > 0 {
		return nil, nil, p.Errors[0]
	}
	index := map[string]int{}
	var files []string
	for _, f := range p.Syntax {
		name := filepath.Base(p.Fset.File(f.Pos()).Name())
		index[name] = len(files)
		files = append(files, name)
	}
	fileOf := func(obj types.Object) (int, bool) {
		if obj == nil || obj.Pkg() != p.Types || !obj.Pos().IsValid() {
			return 0, false
		}
		i, ok := index[filepath.Base(p.Fset.Position(obj.Pos()).Filename)]
		return i, ok
	}
	seen := map[[2]int]string{}
	for id, obj := range p.TypesInfo.Uses {
		if !packageLevel(p.Types, obj) {
			continue
		}
		to, ok := fileOf(obj)
		if !ok {
			continue
		}
		from := index[filepath.Base(p.Fset.Position(id.Pos()).Filename)]
		if from == to {
			continue
		}
		k := [2]int{from, to}
		if v, ok := seen[k]; !ok || obj.Name() < v {
			seen[k] = obj.Name()
		}
	}
	var edges []edge
	for k, via := range seen {
		edges = append(edges, edge{k[0], k[1], via})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].from != edges[j].from {
			return edges[i].from < edges[j].from
		}
		return edges[i].to < edges[j].to
	})
	return files, edges, nil
}

// packageLevel reports whether obj is declared at package level: in the
// package scope, or a method or a struct field.
func packageLevel(pkg *types.Package, obj types.Object) bool {
	switch o := obj.(type) {
	case *types.Func:
		return o.Parent() == pkg.Scope() || o.Type().(*types.Signature).Recv() != nil
	case *types.Var:
		return o.IsField() || o.Parent() == pkg.Scope()
	case *types.TypeName, *types.Const:
		return obj.Parent() == pkg.Scope()
	}
	return false
}

// plan orders n files bottom-up, a file's dependencies below it where it
// can: a greedy order (Eades, Lin and Smyth) from several random starts,
// each improved by moving one file at a time to its best place.
func plan(n int, edges []edge) []int {
	dep := make([][]bool, n) // dep[a][b]: a depends on b
	for i := range dep {
		dep[i] = make([]bool, n)
	}
	for _, e := range edges {
		dep[e.from][e.to] = true
	}
	cost := func(order []int) int {
		c := 0
		for i := range order {
			for j := i + 1; j < len(order); j++ {
				if dep[order[i]][order[j]] {
					c++ // a file below depends on one above
				}
			}
		}
		return c
	}
	rng := rand.New(rand.NewSource(1))
	var best []int
	bestCost := -1
	for try := 0; try < 64; try++ {
		order := greedy(n, dep, rng, try == 0)
		improve(order, cost)
		if c := cost(order); bestCost < 0 || c < bestCost {
			best, bestCost = append([]int(nil), order...), c
		}
	}
	return best
}

// greedy builds the order from the bottom: it places a sink (a file that
// needs nothing still unplaced) when there is one, else the file whose
// dependents most outnumber its dependencies; ties break at random except
// on the first try.
func greedy(n int, dep [][]bool, rng *rand.Rand, first bool) []int {
	left := make([]bool, n)
	for i := range left {
		left[i] = true
	}
	var order []int
	for remaining := n; remaining > 0; {
		pick, pickScore := -1, 0
		perm := rng.Perm(n)
		if first {
			for i := range perm {
				perm[i] = i
			}
		}
		for _, v := range perm {
			if !left[v] {
				continue
			}
			out, in := 0, 0
			for u := 0; u < n; u++ {
				if left[u] && u != v {
					if dep[v][u] {
						out++
					}
					if dep[u][v] {
						in++
					}
				}
			}
			score := in - out
			if out == 0 {
				score = n * n // a sink: nothing left below it is needed
			}
			if pick < 0 || score > pickScore {
				pick, pickScore = v, score
			}
		}
		left[pick] = false
		remaining--
		order = append(order, pick)
	}
	return order
}

// improve moves single files to the place that lowers cost most, until no
// move helps.
func improve(order []int, cost func([]int) int) {
	for changed := true; changed; {
		changed = false
		for i := range order {
			c := cost(order)
			v := order[i]
			rest := append(append([]int(nil), order[:i]...), order[i+1:]...)
			bestAt, bestCost := i, c
			for at := 0; at <= len(rest); at++ {
				try := append(append(append([]int(nil), rest[:at]...), v), rest[at:]...)
				if tc := cost(try); tc < bestCost {
					bestAt, bestCost = at, tc
				}
			}
			if bestCost < c {
				copy(order, append(append(append([]int(nil), rest[:bestAt]...), v), rest[bestAt:]...))
				changed = true
			}
		}
	}
}

// backArrows lists the dependencies from a file to one above it in order.
func backArrows(order []int, edges []edge) []edge {
	at := make([]int, len(order))
	for i, f := range order {
		at[f] = i
	}
	var back []edge
	for _, e := range edges {
		if at[e.from] < at[e.to] {
			back = append(back, e)
		}
	}
	return back
}
