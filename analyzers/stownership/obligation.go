package stownership

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"

	"golang.org/x/tools/go/cfg"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
	"github.com/gpustate/gpustate/analyzers/internal/ownership"
)

// The obligation analysis of one function body.
//
// Each acquiring call of the body, and each seeded parameter (one whose
// release or hand-off is being inferred), is an obligation. A forward
// may-dataflow over the body's CFG tracks, per obligation, whether the
// resource may still be outstanding and which local variables may hold it.
// Releases, stores, returns and hand-offs to takers discharge it; an
// obligation still live at a return leaks through it, and one whose last
// holder is overwritten is lost. A final pass replays each block from its
// fixed point and records where that happens.

// LeakKind says how an acquired resource is lost.
type LeakKind int

// The ways a resource leaks.
const (
	LeakExit        LeakKind = iota // still held when the function returns
	LeakDiscarded                   // the result was never kept
	LeakBlank                       // the result was assigned to _ and its error kept (_, err := acquire())
	LeakOverwritten                 // its last holder was overwritten before a release
)

// A Leak is an acquired resource that is not released on some path.
type Leak struct {
	Call   *ast.CallExpr // the acquiring call
	Fn     *types.Func   // the function it calls
	Result int           // the index of the acquired result
	Kind   LeakKind
	// BesideError reports that the exit returns the resource beside a
	// non-nil error, which callers discard.
	BesideError bool
	At          ast.Node   // the return it leaks through, or the overwriting statement; nil when discarded
	Holder      *types.Var // the variable the acquire assigned, when one did
	// Def is the statement that assigned the acquired value to Holder, and
	// Escapes reports whether the value escapes (is returned, stored or
	// handed on) on some path: a deferred release is then wrong.
	Def     ast.Stmt
	Escapes bool
}

// funcResult is what the obligation analysis learns about one function:
// its leaks, and the summary its ownership facts are made of (Takes and
// Releases among the seeded parameters).
type funcResult struct {
	ownership.Summary
	leaks []Leak
}

// funcInput is one function body to analyze.
type funcInput struct {
	Info    *types.Info
	Oracle  *ownership.Oracle
	CFG     *cfg.CFG
	Node    ast.Node         // *ast.FuncDecl or *ast.FuncLit
	Body    *ast.BlockStmt   // its body
	Sig     *types.Signature // its type
	Seeds   []int            // parameters (-1: receiver) to test for takes/releases
	Sites   []*ast.CallExpr  // the acquiring calls in the body (from prewalk)
	Results []*types.Var     // named results, or nil
}

// discharge strengths: how firmly an event ends an obligation.
const (
	weak    = iota // a reference inside a bigger escaping expression, a closure, an unknown call
	store          // the whole value stored, returned, sent or handed to a taker
	dispose        // given to an interface or type-parameter method that may be its release
	release        // released
)

// obligation describes one tracked resource: an acquire site, or a seeded
// parameter whose release or hand-off is being inferred.
type obligation struct {
	call     *ast.CallExpr
	fn       *types.Func
	result   int  // the index of the acquired result
	param    int  // seeded parameter index, when call is nil
	minLevel int  // weakest discharge that ends it: weak for acquires
	errRes   bool // the acquiring function has a trailing error result
}

// obl is the abstract state of one obligation at a program point.
// live means the resource may be outstanding; holders are the local
// variables that may hold it and errs the error variables whose non-nil
// value means it was never acquired. Joins are unions, so every
// imprecision makes a release or an escape easier to see, never harder:
// the analysis errs toward silence.
//
// nils are the error variables known to be nil on every path where the
// obligation is live (var err error; err = nil), so that a later
// if err != nil, which cannot hold on those paths, does not make the
// resource leak there (values merged at a join, as at a phi).
//
// olds are the variables that may still hold a resource of an earlier run
// of the same acquiring call (a loop that keeps each snapshot in a second
// variable, last = v): when the last of them is overwritten, that earlier
// resource is lost.
type obl struct {
	live          bool
	holders       uint64
	olds          uint64
	errs          uint64
	nils          uint64
	nonnils       uint64 // error variables known non-nil where live
	taken         uint64 // error variables whose nil value means a takes-onsuccess callee took it
	trues, falses uint64 // boolean variables known true (false) where live
}

// ostate is the state at a program point: one obl per obligation, then
// one slot that is not an obligation (see newEntry).
type ostate []obl

// cleanup is the analysis of one body: its obligations, the variables it
// indexes, what it caches about the body, and, in the final pass, what it
// records.
type cleanup struct {
	in       *funcInput
	info     *types.Info
	o        *ownership.Oracle
	obls     []obligation
	siteID   map[*ast.CallExpr]int
	vars     map[*types.Var]int
	nvars    int
	overflow bool
	conds    map[ast.Expr]bool
	rangeOf  map[ast.Expr]*ast.RangeStmt // range key and value expressions, and X
	commSend map[*ast.SendStmt]bool      // sends that are cases of a select
	free     map[*ast.FuncLit]uint64     // cache: holders referenced in a literal
	litRel   map[*ast.FuncLit]uint64     // cache: variables a literal releases
	errType  types.Type
	errVars  uint64 // indexed variables of type error
	hooks    *dataflow.Hooks

	// onSuccess maps a call with a //state:takes NAME onsuccess parameter
	// to the error variable its assignment sets; pending are the
	// holders handed to such calls in the statement being evaluated, with
	// that variable, applied once the assignment is done.
	onSuccess map[*ast.CallExpr]*types.Var
	pending   []pendingTake
	fresh     map[*types.Var]bool // local pointers only ever set to a new struct (&T{}, new(T))
	// collecting is set while the right-hand side of an assignment to a
	// local variable is evaluated: acquiring calls in its composite
	// literals go to litSites, held by the variable.
	collecting bool
	litSites   []int
	// dropOnErr are the named results that a deferred closure sets to nil
	// when the error result is not nil: on such a return they hand
	// nothing back.
	dropOnErr []int

	// recording, in the final pass only
	record    bool
	exitAt    map[int]ast.Node
	lostAt    map[int]ast.Node
	discarded map[int]bool
	blank     map[int]bool     // discarded to _ with the error kept
	besideAt  map[int]ast.Node // returned beside a non-nil error there
	escaped   map[int]bool
	defs      map[int]ast.Stmt
	holderOf  map[int]*types.Var
	acquirer  bool
	acquired  []int // results after the first that are acquired too
	releaser  int   // a returned func() releasing the first result: its index plus one
	besideNow []int // obligations returned beside a non-nil error, while a return is evaluated
	seedFail  map[int]bool
}

// analyzeBody runs the obligation analysis over one function body. It
// reports false when the analysis gave up (too many variables, no
// convergence): the function then reports nothing and proves nothing.
func analyzeBody(in *funcInput) (*funcResult, bool) {
	if in.Body == nil || in.CFG == nil {
		return &funcResult{}, true
	}
	c := newCleanup(in)
	entry, ok := c.obligations()
	if !ok {
		return &funcResult{}, false
	}
	if len(c.obls) == 0 {
		return &funcResult{}, true
	}
	c.scanBody()
	ins, ok := dataflow.Solve(in.CFG, c.problem(entry))
	if !ok || c.overflow {
		return &funcResult{}, false
	}
	c.replay(ins)
	if c.overflow {
		return &funcResult{}, false
	}
	return c.result(), true
}

// newCleanup returns the analysis of one body, with nothing indexed yet.
func newCleanup(in *funcInput) *cleanup {
	c := &cleanup{
		in:       in,
		info:     in.Info,
		o:        in.Oracle,
		siteID:   make(map[*ast.CallExpr]int),
		vars:     make(map[*types.Var]int),
		rangeOf:  make(map[ast.Expr]*ast.RangeStmt),
		commSend: make(map[*ast.SendStmt]bool),
		free:     make(map[*ast.FuncLit]uint64),
		litRel:   make(map[*ast.FuncLit]uint64),
		errType:  errorType,

		onSuccess: make(map[*ast.CallExpr]*types.Var),
		fresh:     make(map[*types.Var]bool),
	}
	c.hooks = &dataflow.Hooks{
		ErrArg: c.errMapArg,
		Valid: func(call *ast.CallExpr) ast.Expr {
			if fn, _, recv := c.o.Callee(c.info, call); fn != nil && recv != nil && len(call.Args) == 0 && c.o.Valid(fn) {
				return recv
			}
			return nil
		},
	}
	return c
}

// errMapArg returns the error argument of a call of an error mapper
// (//state:errmap, declared or inferred), or nil.
func (c *cleanup) errMapArg(call *ast.CallExpr) ast.Expr {
	fn, kind, _ := c.o.Callee(c.info, call)
	if kind != ownership.Static || fn == nil || !c.o.ErrMap(fn) {
		return nil
	}
	for _, a := range call.Args {
		if types.Identical(c.info.TypeOf(a), errorType) {
			return a
		}
	}
	return nil
}

// pendingTake is a hand-off to a //state:takes NAME onsuccess parameter:
// the holders m are taken when err is nil.
type pendingTake struct {
	m   uint64
	err *types.Var
}

// obligations creates the obligations of the acquiring calls, then two of
// each seeded parameter (one discharged by a store, one only by a
// release), and returns the state on entry: the calls' not yet live, the
// parameters' live and held by the parameter. It reports false when a
// parameter cannot be indexed.
func (c *cleanup) obligations() (ostate, bool) {
	in := c.in
	for _, call := range in.Sites {
		fn, _, _ := c.o.Callee(c.info, call)
		c.siteID[call] = len(c.obls)
		results := c.o.AcquiredResults(fn)
		if len(results) == 0 {
			results = []int{0}
		}
		// One obligation per acquired result (//state:acquire 0 1: an
		// image and its memory), consecutive.
		for _, r := range results {
			c.obls = append(c.obls, obligation{call: call, fn: fn, result: r, minLevel: weak, errRes: HasErrorResult(fn)})
		}
	}
	entry := make(ostate, len(c.obls), len(c.obls)+3*len(in.Seeds)+1)
	for _, p := range in.Seeds {
		v := ownership.ParamVar(in.Sig, p)
		if v == nil {
			continue
		}
		b := c.bit(v)
		if b == 0 {
			return nil, false
		}
		c.obls = append(c.obls, obligation{param: p, minLevel: store}, obligation{param: p, minLevel: release})
		entry = append(entry, obl{live: true, holders: b}, obl{live: true, holders: b})
		if disposable(v.Type()) {
			c.obls = append(c.obls, obligation{param: p, minLevel: dispose})
			entry = append(entry, obl{live: true, holders: b})
		}
	}
	return entry, true
}

// sameCall returns the obligations of the acquiring call of obligation id:
// one per acquired result, consecutive.
func (c *cleanup) sameCall(id int) []int {
	first := c.siteID[c.obls[id].call]
	end := first
	for end < len(c.obls) && c.obls[end].call == c.obls[id].call {
		end++
	}
	ids := make([]int, 0, end-first)
	for j := first; j < end; j++ {
		ids = append(ids, j)
	}
	return ids
}

// scanBody finds the branch conditions of the body and the parts of its
// range statements.
func (c *cleanup) scanBody() {
	c.conds = dataflow.Conds(c.in.Body)
	ast.Inspect(c.in.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.RangeStmt:
			if n.Key != nil {
				c.rangeOf[n.Key] = n
			}
			if n.Value != nil {
				c.rangeOf[n.Value] = n
			}
			c.rangeOf[n.X] = n
		case *ast.CommClause:
			if send, ok := n.Comm.(*ast.SendStmt); ok {
				c.commSend[send] = true
			}
		case *ast.AssignStmt:
			if len(n.Rhs) == 1 {
				c.noteOnSuccess(n.Lhs, n.Rhs[0])
			}
			c.noteFresh(n.Lhs, n.Rhs)
		case *ast.ValueSpec:
			lhs := make([]ast.Expr, len(n.Names))
			for i, id := range n.Names {
				lhs[i] = id
			}
			if len(n.Values) == 1 {
				c.noteOnSuccess(lhs, n.Values[0])
			}
			c.noteFresh(lhs, n.Values)
		case *ast.UnaryExpr:
			if n.Op == token.AND {
				if v := c.localVar(n.X); v != nil {
					c.fresh[v] = false // its address is taken: it may change behind our back
				}
			}
		case *ast.DeferStmt:
			if lit, ok := ast.Unparen(n.Call.Fun).(*ast.FuncLit); ok {
				c.noteDrops(lit)
			}
		}
		return true
	})
}

// noteDrops records the named results that a deferred closure sets to nil
// under a check that the error result is not nil:
// defer func() { if err != nil { out = nil } }().
func (c *cleanup) noteDrops(lit *ast.FuncLit) {
	res := c.in.Results
	if len(res) < 2 || !types.Identical(res[len(res)-1].Type(), errorType) {
		return
	}
	errRes := res[len(res)-1]
	for _, s := range lit.Body.List {
		ifs, ok := s.(*ast.IfStmt)
		if !ok || ifs.Init != nil || !slices.Contains(dataflow.Imply(c.info, ifs.Cond, true).NonNil, errRes) {
			continue
		}
		for _, b := range ifs.Body.List {
			as, ok := b.(*ast.AssignStmt)
			if !ok || len(as.Lhs) != len(as.Rhs) {
				continue
			}
			for i, l := range as.Lhs {
				v := dataflow.VarOf(c.info, l)
				if j := slices.Index(res, v); j >= 0 && j < len(res)-1 && dataflow.IsNil(c.info, as.Rhs[i]) && c.releasesEach(ifs.Body.List, v) < 0 {
					c.dropOnErr = append(c.dropOnErr, j)
				}
			}
		}
	}
}

// noteOnSuccess maps a call assigned to lhs that hands a parameter to a
// //state:takes NAME onsuccess callee to the error variable it sets.
func (c *cleanup) noteOnSuccess(lhs []ast.Expr, rhs ast.Expr) {
	call, ok := ast.Unparen(rhs).(*ast.CallExpr)
	if !ok {
		return
	}
	fn, kind, _ := c.o.Callee(c.info, call)
	if kind != ownership.Static || fn == nil {
		return
	}
	d := c.o.Dir(fn)
	if d == nil || len(d.TakesOnSuccess) == 0 {
		return
	}
	if v := c.localVar(lhs[len(lhs)-1]); v != nil && types.Identical(v.Type(), errorType) {
		c.onSuccess[call] = v
	}
}

// noteFresh records which local pointer variables are only ever assigned
// a new struct (&T{...} or new(T)): a store into a field through one stays
// in the function (see fieldOfLocal).
func (c *cleanup) noteFresh(lhs, rhs []ast.Expr) {
	for i, l := range lhs {
		v := c.localVar(l)
		if v == nil {
			continue
		}
		if _, ok := v.Type().Underlying().(*types.Pointer); !ok {
			continue
		}
		fresh := len(lhs) == len(rhs) && isNew(c.info, rhs[i]) && !c.isParam(v)
		if prev, seen := c.fresh[v]; seen {
			fresh = fresh && prev
		}
		c.fresh[v] = fresh
	}
}

// isParam reports whether v is a parameter or the receiver of the analyzed
// function (a named result starts nil).
func (c *cleanup) isParam(v *types.Var) bool {
	sig := c.in.Sig
	if sig.Recv() == v {
		return true
	}
	for p := range sig.Params().Variables() {
		if p == v {
			return true
		}
	}
	return false
}

// isNew reports whether e is &T{...} or new(T).
func isNew(info *types.Info, e ast.Expr) bool {
	switch x := ast.Unparen(e).(type) {
	case *ast.UnaryExpr:
		_, ok := ast.Unparen(x.X).(*ast.CompositeLit)
		return x.Op == token.AND && ok
	case *ast.CallExpr:
		return ownership.BuiltinName(info, x) == "new"
	}
	return false
}

// problem returns the dataflow problem of the body from entry. The last
// slot of a state is not an obligation: its nils are the error variables
// known nil on every path to the point, inherited by new obligations.
func (c *cleanup) problem(entry ostate) *dataflow.Problem[ostate] {
	entry = append(entry, obl{live: true})
	return &dataflow.Problem[ostate]{
		Entry:  entry,
		Bottom: make(ostate, len(c.obls)+1),
		Join:   join,
		Equal:  func(a, b ostate) bool { return slices.Equal(a, b) },
		Transfer: func(b *cfg.Block, in ostate) ostate {
			st := slices.Clone(in)
			c.block(st, b)
			return st
		},
		Edge: c.edge,
	}
}

// block applies the nodes of b to the state. The CFG evaluates every
// case of a select before choosing one: a send happens, and what it sends
// escapes, only in the block of its own case.
func (c *cleanup) block(st ostate, b *cfg.Block) {
	if b.Kind == cfg.KindSelectCaseBody {
		if cc, ok := b.Stmt.(*ast.CommClause); ok {
			if send, ok := cc.Comm.(*ast.SendStmt); ok {
				c.escape(st, send.Value)
			}
		}
	}
	for _, n := range b.Nodes {
		c.node(st, n)
	}
}

// join is the union of two states: an obligation is live where it is live
// on either side, held by the holders of both, and knows only what both
// know.
func join(a, b ostate) ostate {
	r := make(ostate, len(a))
	for i := range a {
		switch {
		case !a[i].live:
			r[i] = b[i]
		case !b[i].live:
			r[i] = a[i]
		default:
			r[i] = obl{
				live:    true,
				holders: a[i].holders | b[i].holders,
				olds:    a[i].olds | b[i].olds,
				errs:    a[i].errs | b[i].errs,
				nils:    a[i].nils & b[i].nils,
				nonnils: a[i].nonnils & b[i].nonnils,
				taken:   a[i].taken | b[i].taken,
				trues:   a[i].trues & b[i].trues,
				falses:  a[i].falses & b[i].falses,
			}
		}
	}
	return r
}

// replay is the final pass: it runs each live block from its fixed point,
// recording where obligations leak, are lost, discarded or escape.
func (c *cleanup) replay(ins []ostate) {
	c.record = true
	c.exitAt = make(map[int]ast.Node)
	c.lostAt = make(map[int]ast.Node)
	c.discarded = make(map[int]bool)
	c.blank = make(map[int]bool)
	c.besideAt = make(map[int]ast.Node)
	c.escaped = make(map[int]bool)
	c.defs = make(map[int]ast.Stmt)
	c.holderOf = make(map[int]*types.Var)
	c.seedFail = make(map[int]bool)
	for _, b := range c.in.CFG.Blocks {
		if !b.Live {
			continue
		}
		st := slices.Clone(ins[b.Index])
		if len(st) == 0 {
			st = make(ostate, len(c.obls)+1)
		}
		c.block(st, b)
	}
}

// result turns what the final pass recorded into the function's leaks and
// the parameters it takes or releases on every path.
func (c *cleanup) result() *funcResult {
	res := &funcResult{Summary: ownership.Summary{Acquirer: c.acquirer}}
	if c.acquirer {
		res.Releaser = c.releaser
	}
	res.Results = c.acquired
	for id, ob := range c.obls {
		if ob.call == nil {
			if !c.seedFail[id] {
				switch ob.minLevel {
				case release:
					res.Releases = append(res.Releases, ob.param)
				case dispose:
					res.Disposes = append(res.Disposes, ob.param)
				default:
					res.Takes = append(res.Takes, ob.param)
				}
			}
			continue
		}
		l := Leak{Call: ob.call, Fn: ob.fn, Result: ob.result, Holder: c.holderOf[id], Def: c.defs[id], Escapes: c.escaped[id]}
		switch {
		case c.blank[id]:
			l.Kind = LeakBlank
		case c.discarded[id]:
			l.Kind = LeakDiscarded
		case c.lostAt[id] != nil:
			l.Kind, l.At = LeakOverwritten, c.lostAt[id]
		case c.exitAt[id] != nil:
			l.Kind, l.At = LeakExit, c.exitAt[id]
			l.BesideError = c.besideAt[id] == l.At
		default:
			continue
		}
		res.leaks = append(res.leaks, l)
	}
	return res
}

// errorType is the predeclared error type.
var errorType = types.Universe.Lookup("error").Type()

// HasErrorResult reports whether fn has two or more results, the last of
// type error.
func HasErrorResult(fn *types.Func) bool {
	if fn == nil {
		return false
	}
	sig, ok := fn.Type().(*types.Signature)
	if !ok || sig.Results().Len() < 2 {
		return false
	}
	t := sig.Results().At(sig.Results().Len() - 1).Type()
	return types.Identical(t, errorType)
}
