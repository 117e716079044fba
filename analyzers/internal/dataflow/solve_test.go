package dataflow_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"slices"
	"testing"

	"golang.org/x/tools/go/cfg"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
)

// parseFunc type-checks src, a file declaring func f, and returns f's
// declaration, its CFG and the type information.
func parseFunc(t *testing.T, src string) (*ast.FuncDecl, *cfg.CFG, *types.Info) {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "f.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Types: make(map[ast.Expr]types.TypeAndValue), Defs: make(map[*ast.Ident]types.Object), Uses: make(map[*ast.Ident]types.Object)}
	if _, err := new(types.Config).Check("p", fset, []*ast.File{file}, info); err != nil {
		t.Fatal(err)
	}
	var fd *ast.FuncDecl
	for _, d := range file.Decls {
		if d, ok := d.(*ast.FuncDecl); ok && d.Name.Name == "f" {
			fd = d
		}
	}
	return fd, cfg.New(fd.Body, func(*ast.CallExpr) bool { return true }), info
}

// assigned is the may-problem "which variables may have been assigned"
// (union at joins), refined along branches by what their conditions prove:
// a variable proved nil is dropped.
func assigned(info *types.Info, conds map[ast.Expr]bool) *dataflow.Problem[[]string] {
	union := func(a, b []string) []string {
		out := slices.Clone(a)
		for _, s := range b {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		slices.Sort(out)
		return out
	}
	return &dataflow.Problem[[]string]{
		Join:  union,
		Equal: slices.Equal[[]string],
		Transfer: func(b *cfg.Block, in []string) []string {
			for _, n := range b.Nodes {
				if as, ok := n.(*ast.AssignStmt); ok {
					for _, l := range as.Lhs {
						if v := dataflow.VarOf(info, l); v != nil {
							in = union(in, []string{v.Name()})
						}
					}
				}
			}
			return in
		},
		Edge: func(b *cfg.Block, succ int, out []string) []string {
			cond := dataflow.BranchCond(b, conds)
			if cond == nil {
				return out
			}
			imp := dataflow.Imply(info, cond, succ == 0)
			return slices.DeleteFunc(slices.Clone(out), func(s string) bool {
				return slices.ContainsFunc(imp.Nil, func(v *types.Var) bool { return v.Name() == s })
			})
		},
	}
}

func TestSolve(t *testing.T) {
	fd, g, info := parseFunc(t, `package p

func f(n int) {
	var p *int
	for i := 0; i < n; i++ {
		p = new(int)
	}
	if p == nil {
		return
	}
	q := p
	_ = q
}`)
	ins, ok := dataflow.Solve(g, assigned(info, dataflow.Conds(fd.Body)))
	if !ok {
		t.Fatal("Solve did not converge")
	}
	// The state on entry to the block of the return under p == nil, and
	// to the block after the if.
	checked := 0
	for _, b := range g.Blocks {
		if !b.Live || len(b.Nodes) == 0 {
			continue
		}
		switch n := b.Nodes[0].(type) {
		case *ast.ReturnStmt:
			checked++
			if want := []string{"i"}; !slices.Equal(ins[b.Index], want) {
				t.Errorf("at the return: %v, want %v (p proved nil)", ins[b.Index], want)
			}
		case *ast.AssignStmt:
			if id, ok := n.Lhs[0].(*ast.Ident); ok && id.Name == "q" {
				checked++
				if want := []string{"i", "p"}; !slices.Equal(ins[b.Index], want) {
					t.Errorf("at q := p: %v, want %v", ins[b.Index], want)
				}
			}
		}
	}
	if checked != 2 {
		t.Errorf("checked %d blocks, want 2 (the return and q := p)", checked)
	}
}

// TestSolveAbandons checks that a problem that never converges (a counter
// around a loop) is abandoned rather than iterated forever.
func TestSolveAbandons(t *testing.T) {
	_, g, _ := parseFunc(t, `package p

func f(n int) {
	for n > 0 {
		n--
	}
}`)
	p := &dataflow.Problem[int]{
		Join:     func(a, b int) int { return max(a, b) },
		Equal:    func(a, b int) bool { return a == b },
		Transfer: func(_ *cfg.Block, in int) int { return in + 1 },
	}
	if _, ok := dataflow.Solve(g, p); ok {
		t.Error("Solve reported convergence of a problem whose states grow forever")
	}
}

func TestImply(t *testing.T) {
	fd, _, info := parseFunc(t, `package p

func isBusy(err error) bool { return err != nil }

func f(a, b *int, ok bool, err error) {
	if !(a == nil || b != nil) && ok && isBusy(err) {
	}
}`)
	cond := fd.Body.List[0].(*ast.IfStmt).Cond
	names := func(vs []*types.Var) []string {
		var s []string
		for _, v := range vs {
			s = append(s, v.Name())
		}
		return s
	}
	imp := dataflow.Imply(info, cond, true)
	if got := names(imp.NonNil); !slices.Equal(got, []string{"a", "err"}) {
		t.Errorf("true: NonNil = %v, want [a err]", got)
	}
	if got := names(imp.Nil); !slices.Equal(got, []string{"b"}) {
		t.Errorf("true: Nil = %v, want [b]", got)
	}
	if got := names(imp.True); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("true: True = %v, want [ok]", got)
	}
	// A false conjunction proves nothing about its operands.
	if imp := dataflow.Imply(info, cond, false); len(imp.NonNil)+len(imp.Nil)+len(imp.True)+len(imp.False) != 0 {
		t.Errorf("false: %+v, want nothing", imp)
	}
}

// TestImplyWith checks the null tests of handles that are not pointers (a
// comparison with the zero value, a valid method) and the check of an
// error through an error mapper; Imply without hooks sees none of them.
func TestImplyWith(t *testing.T) {
	fd, _, info := parseFunc(t, `package p

type Tex uint32
type Desc struct{ n int }

func (t Tex) Valid() bool { return t != 0 }
func mapErr(err error) error { return err }

func f(t, u Tex, d Desc, name string, err error) {
	if !t.Valid() || u == 0 || d == (Desc{}) || name == "" || mapErr(err) != nil {
	}
}`)
	cond := fd.Body.List[0].(*ast.IfStmt).Cond
	h := &dataflow.Hooks{
		Valid: func(call *ast.CallExpr) ast.Expr {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Valid" {
				return sel.X
			}
			return nil
		},
		ErrArg: func(call *ast.CallExpr) ast.Expr {
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "mapErr" {
				return call.Args[0]
			}
			return nil
		},
	}
	names := func(vs []*types.Var) []string {
		var s []string
		for _, v := range vs {
			s = append(s, v.Name())
		}
		return s
	}
	// The disjunction false: t valid, u, d and name not zero, err nil.
	imp := dataflow.ImplyWith(info, cond, false, h)
	if got := names(imp.NonNil); !slices.Equal(got, []string{"t", "u", "d", "name"}) {
		t.Errorf("false: NonNil = %v, want [t u d name]", got)
	}
	if got := names(imp.Nil); !slices.Equal(got, []string{"err"}) {
		t.Errorf("false: Nil = %v, want [err]", got)
	}
	if imp := dataflow.Imply(info, cond, false); len(imp.NonNil)+len(imp.Nil) != 0 {
		t.Errorf("Imply without hooks: %+v, want nothing", imp)
	}
}
