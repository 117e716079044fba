package ownership

import (
	"go/ast"
	"go/types"
	"slices"
)

// Summary is what an analysis of one function body says about its
// ownership: whether it returns, as its first result, a resource it acquired
// and still holds, and which of its parameters (-1: the receiver) it
// releases, or releases or keeps, on every path.
type Summary struct {
	Acquirer bool
	Releaser int   // the index, plus one, of a returned func() that releases the first result; 0: none
	Takes    []int // released or kept on every path
	Releases []int // released on every path
	Disposes []int // released, or given to a method that may be the release, on every path
	Results  []int // results after the first that are acquired too
}

// maxRounds bounds the inference of facts that depend on each other
// within a package (a wrapper of a wrapper).
const maxRounds = 4

// Infer computes the acquirer, takes and releases facts of the package's
// function declarations with analyze, which summarizes one body with the
// oracle's current facts (nil: nothing to say). Writes facts are kept.
//
// Declarations are analyzed callees first (a postorder of the package's
// static call graph), so a wrapper's fact is known before its callers are
// looked at; only a function whose callee's fact changed after it was
// analyzed (a cycle) is analyzed again. The last call of analyze for each
// declaration therefore saw the final facts of its callees. Function
// literals produce no facts: Infer does not analyze them.
func (r *Result) Infer(info *types.Info, analyze func(*Func) *Summary) {
	var decls []*Func
	for _, f := range r.Funcs {
		if f.Obj != nil {
			decls = append(decls, f)
		}
	}
	callees := staticCallees(info, decls)
	order := postorder(decls, callees)
	seq := 0
	analyzedAt := make(map[*Func]int)
	changedAt := make(map[*types.Func]int)
	for round := 0; round < maxRounds; round++ {
		again := false
		for _, f := range order {
			if round > 0 && !stale(f, callees, analyzedAt, changedAt) {
				continue
			}
			again = true
			seq++
			analyzedAt[f] = seq
			if s := analyze(f); s != nil && r.Oracle.merge(f.Obj, s) {
				seq++
				changedAt[f.Obj] = seq
			}
		}
		if !again {
			break
		}
	}
}

// staticCallees returns, for each declaration, the functions its body
// calls statically, each once, in order of first call.
func staticCallees(info *types.Info, decls []*Func) map[*Func][]*types.Func {
	callees := make(map[*Func][]*types.Func)
	for _, f := range decls {
		seen := make(map[*types.Func]bool)
		ast.Inspect(f.Body(), func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if fn, kind, _ := Callee(info, call); kind == Static && !seen[fn] {
					seen[fn] = true
					callees[f] = append(callees[f], fn)
				}
			}
			return true
		})
		// A function returning a struct that wraps a resource is an
		// acquirer when the struct has a release method (stcleanup): the
		// methods of its first result's type come first.
		for _, m := range resultMethods(f.Sig) {
			if !seen[m] {
				seen[m] = true
				callees[f] = append(callees[f], m)
			}
		}
	}
	return callees
}

// resultMethods returns the methods without arguments of the named type
// of sig's first result (through a pointer): the candidates for its
// release method.
func resultMethods(sig *types.Signature) []*types.Func {
	if sig == nil || sig.Results().Len() == 0 {
		return nil
	}
	t := types.Unalias(sig.Results().At(0).Type())
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	n, ok := t.(*types.Named)
	if !ok {
		return nil
	}
	if _, ok := n.Underlying().(*types.Struct); !ok {
		return nil
	}
	var ms []*types.Func
	for m := range n.Origin().Methods() {
		if m.Signature().Params().Len() == 0 {
			ms = append(ms, m)
		}
	}
	return ms
}

// postorder returns decls in a postorder of the package's call graph:
// callees before their callers, except along cycles.
func postorder(decls []*Func, callees map[*Func][]*types.Func) []*Func {
	byObj := make(map[*types.Func]*Func, len(decls))
	for _, f := range decls {
		byObj[f.Obj] = f
	}
	var order []*Func
	visited := make(map[*Func]bool)
	var visit func(f *Func)
	visit = func(f *Func) {
		if visited[f] {
			return
		}
		visited[f] = true
		for _, g := range callees[f] {
			if gf := byObj[g]; gf != nil {
				visit(gf)
			}
		}
		order = append(order, f)
	}
	for _, f := range decls {
		visit(f)
	}
	return order
}

// stale reports whether a callee's fact changed after f was last analyzed.
func stale(f *Func, callees map[*Func][]*types.Func, analyzedAt map[*Func]int, changedAt map[*types.Func]int) bool {
	for _, g := range callees[f] {
		if changedAt[g] > analyzedAt[f] {
			return true
		}
	}
	return false
}

// merge adds what s says about fn to fn's fact, and reports whether the
// fact changed. Facts only grow: a function once found to take a parameter
// keeps taking it, which bounds the rounds of Infer.
func (o *Oracle) merge(fn *types.Func, s *Summary) bool {
	fact := o.local[fn]
	if fact == nil {
		fact = new(Fact)
	}
	next := &Fact{
		Acquirer: fact.Acquirer || s.Acquirer,
		Takes:    union(fact.Takes, s.Takes, s.Releases),
		Releases: union(fact.Releases, s.Releases),
		Disposes: union(fact.Disposes, s.Disposes, s.Releases),
		Writes:   fact.Writes,
		ErrMap:   fact.ErrMap,
		Releaser: max(fact.Releaser, s.Releaser),
		Results:  union(fact.Results, s.Results),
	}
	if next.Acquirer == fact.Acquirer && next.Releaser == fact.Releaser && slices.Equal(next.Results, fact.Results) && slices.Equal(next.Takes, fact.Takes) && slices.Equal(next.Releases, fact.Releases) && slices.Equal(next.Disposes, fact.Disposes) {
		return false
	}
	o.local[fn] = next
	o.releaseMethods = nil
	return true
}

func union(lists ...[]int) []int {
	var out []int
	for _, l := range lists {
		for _, x := range l {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	slices.Sort(out)
	return out
}
