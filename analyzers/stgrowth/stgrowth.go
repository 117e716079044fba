package stgrowth

import (
	_ "embed"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/ctrlflow"
	"golang.org/x/tools/go/cfg"
	"golang.org/x/tools/go/types/typeutil"

	"github.com/gpustate/gpustate/analyzers/directives"
	"github.com/gpustate/gpustate/analyzers/internal/analysisutil"
	"github.com/gpustate/gpustate/contract"
)

//go:embed doc.go
var doc string

// Analyzer reports state that may grow without a bound.
var Analyzer = analysisutil.Checker("stgrowth", doc, run, directives.Analyzer, ctrlflow.Analyzer)

// run reports the stgrowth diagnostics of the package's parse (package
// contract keeps them only for contracts without stcontract errors), then
// checks every function body, literals on their own, for calls to appends
// methods (known from local directives or imported facts) that run once per
// iteration of a loop, whatever built it (for, range, goto), and drop the
// error result (see checkBody). Inactive packages return at once.
func run(pass *analysis.Pass) (any, error) {
	r := pass.ResultOf[directives.Analyzer].(*directives.Result)
	if !r.Active() {
		return nil, nil
	}
	for _, d := range r.Package().Diagnostics {
		if d.Analyzer == contract.StGrowth {
			analysisutil.Report(pass, d)
		}
	}
	cfgs := pass.ResultOf[ctrlflow.Analyzer].(*ctrlflow.CFGs)
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Body != nil {
					checkBody(pass, r, cfgs.FuncDecl(n), n.Type, n.Body)
				}
			case *ast.FuncLit:
				checkBody(pass, r, cfgs.FuncLit(n), n.Type, n.Body)
			}
			return true
		})
	}
	return nil, nil
}

// appendCall is a call to an appends method that is a statement of its
// own (lhs nil) or the right side of an assignment.
type appendCall struct {
	call *ast.CallExpr
	fn   *types.Func
	lhs  []ast.Expr
	blk  *cfg.Block
	idx  int // the node's index in blk
}

// checkBody reports the appends calls of one body (g its CFG) that lie on a
// cycle of the CFG and drop their error: as an expression statement, by
// assigning it to _, or by assigning it to a local variable that no path
// reads before it is assigned again or the function returns (err =
// s.Append(b) in a loop, never checked).
func checkBody(pass *analysis.Pass, r *directives.Result, g *cfg.CFG, ftype *ast.FuncType, body *ast.BlockStmt) {
	if g == nil {
		return
	}
	var calls []appendCall
	for _, b := range g.Blocks {
		if !b.Live {
			continue
		}
		for i, n := range b.Nodes {
			var call *ast.CallExpr
			var lhs []ast.Expr
			switch n := n.(type) {
			case *ast.ExprStmt:
				call, _ = ast.Unparen(n.X).(*ast.CallExpr)
			case *ast.AssignStmt:
				if len(n.Rhs) == 1 && (n.Tok == token.ASSIGN || n.Tok == token.DEFINE) {
					call, _ = ast.Unparen(n.Rhs[0]).(*ast.CallExpr)
					lhs = n.Lhs
				}
			}
			if call == nil {
				continue
			}
			fn, ok := typeutil.Callee(pass.TypesInfo, call).(*types.Func)
			if !ok {
				continue
			}
			if d := r.Func(fn.Origin()); d == nil || !d.Appends {
				continue
			}
			calls = append(calls, appendCall{call, fn, lhs, b, i})
		}
	}
	if len(calls) == 0 {
		return
	}
	loop := cyclic(g)
	var opaque map[*types.Var]bool
	for _, ac := range calls {
		if !loop[ac.blk.Index] {
			continue
		}
		sig := ac.fn.Signature()
		res := sig.Results()
		for i := 0; i < res.Len(); i++ {
			if !isError(res.At(i).Type()) {
				continue
			}
			switch {
			case ac.lhs == nil:
				report(pass, ac, sig, "")
			case len(ac.lhs) == res.Len():
				id, ok := ast.Unparen(ac.lhs[i]).(*ast.Ident)
				if !ok {
					break
				}
				if id.Name == "_" {
					report(pass, ac, sig, "")
					break
				}
				v, ok := pass.TypesInfo.ObjectOf(id).(*types.Var)
				if !ok || v.Pos() <= body.Pos() || v.Pos() >= body.End() {
					break // a parameter, a result, a global
				}
				if opaque == nil {
					opaque = opaqueVars(pass.TypesInfo, body)
				}
				if !opaque[v] && !readLater(pass.TypesInfo, v, ac.blk, ac.idx+1) {
					report(pass, ac, sig, v.Name())
				}
			}
		}
	}
}

// report reports ac, whose error is dropped: assigned to the variable named
// by, or discarded when by is "".
func report(pass *analysis.Pass, ac appendCall, sig *types.Signature, by string) {
	state := "the state"
	if recv := sig.Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if named, ok := types.Unalias(t).(*types.Named); ok {
			state = named.Obj().Name()
		}
	}
	how := "is discarded"
	if by != "" {
		how = "is assigned to " + by + " but never read"
	}
	pass.ReportRangef(ac.call,
		"error of %s %s inside a loop; when it fails (an append once %s reaches its bound: state.ErrBound; a full pool: state.ErrNoMemory) the loop goes on unaware: check the error",
		fnName(ac.fn, sig, pass.Pkg), how, state)
}

// cyclic returns the indexes of the blocks of g that lie on a cycle: the
// bodies of for and range loops, and of loops built with goto.
func cyclic(g *cfg.CFG) map[int32]bool {
	// Tarjan's strongly connected components, iteratively.
	n := len(g.Blocks)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	loop := make(map[int32]bool)
	next := 0
	type frame struct{ b, succ int }
	for root := range g.Blocks {
		if index[root] >= 0 {
			continue
		}
		frames := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(frames) > 0 {
			f := &frames[len(frames)-1]
			blk := g.Blocks[f.b]
			if f.succ < len(blk.Succs) {
				s := int(blk.Succs[f.succ].Index)
				f.succ++
				if s == f.b {
					loop[int32(s)] = true // a self-loop
				}
				if index[s] < 0 {
					index[s], low[s] = next, next
					next++
					stack = append(stack, s)
					onStack[s] = true
					frames = append(frames, frame{s, 0})
				} else if onStack[s] {
					low[f.b] = min(low[f.b], index[s])
				}
				continue
			}
			b := f.b
			frames = frames[:len(frames)-1]
			if len(frames) > 0 {
				p := frames[len(frames)-1].b
				low[p] = min(low[p], low[b])
			}
			if low[b] == index[b] {
				var comp []int
				for {
					top := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[top] = false
					comp = append(comp, top)
					if top == b {
						break
					}
				}
				if len(comp) > 1 {
					for _, x := range comp {
						loop[int32(x)] = true
					}
				}
			}
		}
	}
	return loop
}

// opaqueVars returns the variables of body whose reads cannot be followed
// block by block: those captured by a function literal, and those whose
// address is taken.
func opaqueVars(info *types.Info, body *ast.BlockStmt) map[*types.Var]bool {
	out := make(map[*types.Var]bool)
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			ast.Inspect(n.Body, func(m ast.Node) bool {
				if id, ok := m.(*ast.Ident); ok {
					if v, ok := info.Uses[id].(*types.Var); ok {
						out[v] = true
					}
				}
				return true
			})
			return false
		case *ast.UnaryExpr:
			if n.Op == token.AND {
				if id, ok := ast.Unparen(n.X).(*ast.Ident); ok {
					if v, ok := info.Uses[id].(*types.Var); ok {
						out[v] = true
					}
				}
			}
		}
		return true
	})
	return out
}

// readLater reports whether some path from node from of block b reads v
// before assigning it again (or the function's exit).
func readLater(info *types.Info, v *types.Var, b *cfg.Block, from int) bool {
	seen := make(map[int32]bool)
	var walk func(b *cfg.Block, from int) bool
	walk = func(b *cfg.Block, from int) bool {
		for _, n := range b.Nodes[from:] {
			reads, kills := access(info, v, n)
			if reads {
				return true
			}
			if kills {
				return false
			}
		}
		for _, s := range b.Succs {
			if !seen[s.Index] {
				seen[s.Index] = true
				if walk(s, 0) {
					return true
				}
			}
		}
		return false
	}
	return walk(b, from)
}

// access reports whether CFG node n reads v, and whether it assigns v
// without reading it.
func access(info *types.Info, v *types.Var, n ast.Node) (reads, kills bool) {
	targets := make(map[*ast.Ident]bool)
	if as, ok := n.(*ast.AssignStmt); ok && (as.Tok == token.ASSIGN || as.Tok == token.DEFINE) {
		for _, l := range as.Lhs {
			if id, ok := ast.Unparen(l).(*ast.Ident); ok && info.ObjectOf(id) == v {
				targets[id] = true
				kills = true
			}
		}
	}
	ast.Inspect(n, func(m ast.Node) bool {
		if reads {
			return false
		}
		if id, ok := m.(*ast.Ident); ok && !targets[id] && info.Uses[id] == v {
			reads = true
		}
		return true
	})
	return reads, kills && !reads
}

func isError(t types.Type) bool {
	return types.Identical(t, types.Universe.Lookup("error").Type())
}

// fnName names fn relative to pkg: "Append", "(*KVCacheState).Append",
// "(*kv.KVCacheState).Append".
func fnName(fn *types.Func, sig *types.Signature, pkg *types.Package) string {
	qual := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Name()
	}
	if recv := sig.Recv(); recv != nil {
		t := types.TypeString(recv.Type(), qual)
		if strings.HasPrefix(t, "*") {
			return "(" + t + ")." + fn.Name()
		}
		return t + "." + fn.Name()
	}
	if fn.Pkg() != nil && fn.Pkg() != pkg {
		return fn.Pkg().Name() + "." + fn.Name()
	}
	return fn.Name()
}
