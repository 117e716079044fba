package flow

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"

	"golang.org/x/tools/go/cfg"
)

// LeakKind says how an acquired resource is lost.
type LeakKind int

// The ways a resource leaks.
const (
	LeakExit        LeakKind = iota // still held when the function returns
	LeakDiscarded                   // the result was never kept
	LeakOverwritten                 // its last holder was overwritten before a release
)

// A Leak is an acquired resource that is not released on some path.
type Leak struct {
	Call   *ast.CallExpr // the acquiring call
	Fn     *types.Func   // the function it calls
	Kind   LeakKind
	At     ast.Node   // the return it leaks through, or the overwriting statement; nil when discarded
	Holder *types.Var // the variable the acquire assigned, when one did
	// Def is the statement that assigned the acquired value to Holder, and
	// Escapes reports whether the value escapes (is returned, stored or
	// handed on) on some path: a deferred release is then wrong.
	Def     ast.Stmt
	Escapes bool
}

// FuncResult is what the cleanup analysis learns about one function.
type FuncResult struct {
	Leaks    []Leak
	Acquirer bool  // returns as its first result a resource it acquired and still holds
	Takes    []int // seeded parameters released or kept on every path
	Releases []int // seeded parameters released on every path
}

// FuncInput is one function body to analyze.
type FuncInput struct {
	Info    *types.Info
	Oracle  *Oracle
	CFG     *cfg.CFG
	Node    ast.Node         // *ast.FuncDecl or *ast.FuncLit
	Sig     *types.Signature // its type
	Seeds   []int            // parameters (-1: receiver) to test for takes/releases
	Sites   []*ast.CallExpr  // the acquiring calls in the body (from Prewalk)
	Lits    []*ast.FuncLit   // function literals directly in the body (from Prewalk)
	Results []*types.Var     // named results, or nil
}

// discharge strengths: how firmly an event ends an obligation.
const (
	weak    = iota // a reference inside a bigger escaping expression, a closure, an unknown call
	store          // the whole value stored, returned, sent or handed to a taker
	release        // released
)

// obligation describes one tracked resource: an acquire site, or a seeded
// parameter whose release or hand-off is being inferred.
type obligation struct {
	call     *ast.CallExpr
	fn       *types.Func
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
type obl struct {
	live          bool
	holders       uint64
	errs          uint64
	nils          uint64
	trues, falses uint64 // boolean variables known true (false) where live
}

type ostate []obl

type cleanup struct {
	in       *FuncInput
	info     *types.Info
	o        *Oracle
	obls     []obligation
	siteID   map[*ast.CallExpr]int
	vars     map[*types.Var]int
	nvars    int
	overflow bool
	conds    map[ast.Expr]bool
	rangeOf  map[ast.Expr]*ast.RangeStmt // range key and value expressions, and X
	free     map[*ast.FuncLit]uint64     // cache: holders referenced in a literal
	litRel   map[*ast.FuncLit]uint64     // cache: variables a literal releases
	errType  types.Type
	errVars  uint64 // indexed variables of type error

	// recording, in the final pass only
	record    bool
	exitAt    map[int]ast.Node
	lostAt    map[int]ast.Node
	discarded map[int]bool
	escaped   map[int]bool
	defs      map[int]ast.Stmt
	holderOf  map[int]*types.Var
	acquirer  bool
	seedFail  map[int]bool
}

// Cleanup runs the obligation analysis over one function.
func Cleanup(in *FuncInput) (*FuncResult, bool) {
	c := &cleanup{
		in:      in,
		info:    in.Info,
		o:       in.Oracle,
		siteID:  make(map[*ast.CallExpr]int),
		vars:    make(map[*types.Var]int),
		rangeOf: make(map[ast.Expr]*ast.RangeStmt),
		free:    make(map[*ast.FuncLit]uint64),
		litRel:  make(map[*ast.FuncLit]uint64),
		errType: types.Universe.Lookup("error").Type(),
	}
	body := funcBody(in.Node)
	if body == nil || in.CFG == nil {
		return &FuncResult{}, true
	}
	for _, call := range in.Sites {
		fn, _, _ := Callee(c.info, call)
		c.siteID[call] = len(c.obls)
		c.obls = append(c.obls, obligation{call: call, fn: fn, minLevel: weak, errRes: hasErrorResult(fn)})
	}
	entry := make(ostate, 0, len(in.Sites)+2*len(in.Seeds)+1)
	entry = entry[:len(in.Sites)]
	for _, p := range in.Seeds {
		v := paramVar(in.Sig, p)
		if v == nil {
			continue
		}
		b := c.bit(v)
		if b == 0 {
			return &FuncResult{}, false
		}
		c.obls = append(c.obls, obligation{param: p, minLevel: store}, obligation{param: p, minLevel: release})
		entry = append(entry, obl{live: true, holders: b}, obl{live: true, holders: b})
	}
	if len(c.obls) == 0 {
		return &FuncResult{}, true
	}
	c.conds = Conds(body)
	ast.Inspect(body, func(n ast.Node) bool {
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
		}
		return true
	})
	// The last slot is not an obligation: its nils are the error variables
	// known nil on every path to the point, inherited by new obligations.
	entry = append(entry, obl{live: true})
	bottom := make(ostate, len(c.obls)+1)
	p := &Problem[ostate]{
		Entry:  entry,
		Bottom: bottom,
		Join: func(a, b ostate) ostate {
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
						errs:    a[i].errs | b[i].errs,
						nils:    a[i].nils & b[i].nils,
						trues:   a[i].trues & b[i].trues,
						falses:  a[i].falses & b[i].falses,
					}
				}
			}
			return r
		},
		Equal: func(a, b ostate) bool { return slices.Equal(a, b) },
		Transfer: func(b *cfg.Block, in ostate) ostate {
			st := slices.Clone(in)
			for _, n := range b.Nodes {
				c.node(st, n)
			}
			return st
		},
		Edge: c.edge,
	}
	ins, ok := Solve(in.CFG, p)
	if !ok || c.overflow {
		return &FuncResult{}, false
	}
	// Final pass: replay each reachable block from its fixed point,
	// recording what happens.
	c.record = true
	c.exitAt = make(map[int]ast.Node)
	c.lostAt = make(map[int]ast.Node)
	c.discarded = make(map[int]bool)
	c.escaped = make(map[int]bool)
	c.defs = make(map[int]ast.Stmt)
	c.holderOf = make(map[int]*types.Var)
	c.seedFail = make(map[int]bool)
	for _, b := range in.CFG.Blocks {
		if !b.Live {
			continue
		}
		st := slices.Clone(ins[b.Index])
		if len(st) == 0 {
			st = slices.Clone(bottom)
		}
		for _, n := range b.Nodes {
			c.node(st, n)
		}
	}
	if c.overflow {
		return &FuncResult{}, false
	}
	res := &FuncResult{Acquirer: c.acquirer}
	for id, ob := range c.obls {
		if ob.call == nil {
			if !c.seedFail[id] {
				if ob.minLevel == release {
					res.Releases = append(res.Releases, ob.param)
				} else {
					res.Takes = append(res.Takes, ob.param)
				}
			}
			continue
		}
		l := Leak{Call: ob.call, Fn: ob.fn, Holder: c.holderOf[id], Def: c.defs[id], Escapes: c.escaped[id]}
		switch {
		case c.discarded[id]:
			l.Kind = LeakDiscarded
		case c.lostAt[id] != nil:
			l.Kind, l.At = LeakOverwritten, c.lostAt[id]
		case c.exitAt[id] != nil:
			l.Kind, l.At = LeakExit, c.exitAt[id]
		default:
			continue
		}
		res.Leaks = append(res.Leaks, l)
	}
	return res, true
}

func funcBody(n ast.Node) *ast.BlockStmt {
	switch n := n.(type) {
	case *ast.FuncDecl:
		return n.Body
	case *ast.FuncLit:
		return n.Body
	}
	return nil
}

func hasErrorResult(fn *types.Func) bool {
	if fn == nil {
		return false
	}
	sig, ok := fn.Type().(*types.Signature)
	if !ok || sig.Results().Len() < 2 {
		return false
	}
	t := sig.Results().At(sig.Results().Len() - 1).Type()
	return types.Identical(t, types.Universe.Lookup("error").Type())
}

func paramVar(sig *types.Signature, i int) *types.Var {
	if i == -1 {
		return sig.Recv()
	}
	if i < 0 || i >= sig.Params().Len() {
		return nil
	}
	return sig.Params().At(i)
}

// local reports whether v is a variable of the analyzed function (a
// parameter, result or local), as opposed to a global, a field or a free
// variable of an enclosing function.
func (c *cleanup) local(v *types.Var) bool {
	if v == nil || v.IsField() || v.Pkg() == nil || v.Parent() == v.Pkg().Scope() {
		return false
	}
	return c.in.Node.Pos() <= v.Pos() && v.Pos() < c.in.Node.End()
}

// bit returns the bit of local variable v, indexing it on first use; 0 when
// v is not local or the function has too many tracked variables.
func (c *cleanup) bit(v *types.Var) uint64 {
	if !c.local(v) {
		return 0
	}
	i, ok := c.vars[v]
	if !ok {
		if c.nvars == 64 {
			c.overflow = true
			return 0
		}
		i = c.nvars
		c.vars[v] = i
		c.nvars++
		if types.Identical(v.Type(), c.errType) {
			c.errVars |= 1 << i
		}
	}
	return 1 << i
}

// condBit returns the bit of a boolean variable tested by a condition. Unlike
// bit, it accepts variables of enclosing functions and globals: the function
// does not assign them (that would make them local), so what one branch
// proved about them holds at the next test, unless a call changes them;
// assuming it does not errs toward silence.
func (c *cleanup) condBit(v *types.Var) uint64 {
	if c.local(v) {
		return c.bit(v)
	}
	if v.IsField() {
		return 0
	}
	i, ok := c.vars[v]
	if !ok {
		if c.nvars == 64 {
			c.overflow = true
			return 0
		}
		i = c.nvars
		c.vars[v] = i
		c.nvars++
	}
	return 1 << i
}

// known returns v's bit if v is already indexed (so may hold something).
func (c *cleanup) known(v *types.Var) uint64 {
	if i, ok := c.vars[v]; ok {
		return 1 << i
	}
	return 0
}

func (c *cleanup) localVar(e ast.Expr) *types.Var {
	v := VarOf(c.info, e)
	if v != nil && c.local(v) {
		return v
	}
	return nil
}

func isBlank(e ast.Expr) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && id.Name == "_"
}

// site returns the obligation of an acquiring call e, or -1.
func (c *cleanup) site(e ast.Expr) (*ast.CallExpr, int) {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return nil, -1
	}
	if id, ok := c.siteID[call]; ok {
		return call, id
	}
	return nil, -1
}

// edge refines the state along a conditional edge: an obligation whose
// error variable is proved non-nil was never acquired, one whose holder is
// proved nil holds nothing, and one that contradicts what was known when it
// was acquired (an error variable known nil, a boolean known true or false)
// cannot be on this edge. What the condition proves is then known on it.
func (c *cleanup) edge(b *cfg.Block, succ int, out ostate) ostate {
	cond := BranchCond(b, c.conds)
	if cond == nil {
		return out
	}
	imp := Imply(c.info, cond, succ == 0)
	var nonNil, isNil, isTrue, isFalse uint64
	for _, v := range imp.NonNil {
		nonNil |= c.known(v)
	}
	for _, v := range imp.Nil {
		isNil |= c.known(v)
	}
	for _, v := range imp.True {
		isTrue |= c.condBit(v)
	}
	for _, v := range imp.False {
		isFalse |= c.condBit(v)
	}
	if nonNil|isNil|isTrue|isFalse == 0 {
		return out
	}
	contradicts := func(o obl) bool {
		return o.nils&nonNil != 0 || o.trues&isFalse != 0 || o.falses&isTrue != 0
	}
	if g := out[len(out)-1]; g.live && contradicts(g) {
		return make(ostate, len(out)) // the edge cannot be taken
	}
	st := slices.Clone(out)
	for i := range st {
		o := &st[i]
		if !o.live {
			continue
		}
		if i < len(c.obls) && (o.errs&nonNil != 0 || o.holders&isNil != 0 || contradicts(*o)) {
			*o = obl{}
			continue
		}
		o.nils = o.nils&^nonNil | isNil&c.errVars
		o.trues = o.trues&^isFalse | isTrue
		o.falses = o.falses&^isTrue | isFalse
	}
	return st
}

func (c *cleanup) node(st ostate, n ast.Node) {
	switch n := n.(type) {
	case *ast.AssignStmt:
		if n.Tok == token.DEFINE || n.Tok == token.ASSIGN {
			c.assign(st, n, n.Lhs, n.Rhs)
			return
		}
		for _, e := range n.Lhs {
			c.expr(st, e)
		}
		for _, e := range n.Rhs {
			c.expr(st, e)
		}
	case *ast.ValueSpec:
		lhs := make([]ast.Expr, len(n.Names))
		for i, id := range n.Names {
			lhs[i] = id
		}
		c.assign(st, n, lhs, n.Values)
	case *ast.ReturnStmt:
		c.ret(st, n)
	case *ast.DeferStmt:
		c.call(st, n.Call, false)
		if lit, ok := ast.Unparen(n.Call.Fun).(*ast.FuncLit); ok {
			// The closure runs at exit and sees the variables' values
			// then: whatever they hold when the function returns is
			// released (or kept) by it.
			st[len(st)-1].holders |= c.watch(lit)
		}
	case *ast.GoStmt:
		c.call(st, n.Call, true)
	case *ast.SendStmt:
		c.expr(st, n.Chan)
		c.escape(st, n.Value)
	case *ast.ExprStmt:
		if call, id := c.site(n.X); id >= 0 {
			c.call(st, call, false)
			c.discard(id)
			return
		}
		c.expr(st, n.X)
	case *ast.IncDecStmt:
		c.expr(st, n.X)
	case ast.Expr:
		if rs := c.rangeOf[n]; rs != nil {
			if n == rs.X {
				c.expr(st, n)
				if rangeReleases(c, rs) {
					if v := Root(c.info, rs.X); v != nil {
						c.discharge(st, c.known(v), release)
					}
				}
				return
			}
			if rs.Tok == token.DEFINE || rs.Tok == token.ASSIGN {
				if v := c.localVar(n); v != nil {
					c.kill(st, c.known(v), n)
					return
				}
			}
		}
		c.expr(st, n)
	}
}

// rangeReleases reports whether a range statement releases each element it
// visits: its body starts with, or directly contains, a release of the value
// variable (possibly guarded by a nil check). Such a loop releases the
// ranged-over slice as a whole (the variadic closeAll(xs ...*T) idiom).
func rangeReleases(c *cleanup, rs *ast.RangeStmt) bool {
	val := c.localVar(rs.Value)
	if val == nil {
		return false
	}
	var releases func(list []ast.Stmt) bool
	releases = func(list []ast.Stmt) bool {
		for _, s := range list {
			switch s := s.(type) {
			case *ast.ExprStmt:
				if call, ok := ast.Unparen(s.X).(*ast.CallExpr); ok && c.releasesVar(call, val) {
					return true
				}
			case *ast.AssignStmt:
				if len(s.Rhs) == 1 {
					if call, ok := ast.Unparen(s.Rhs[0]).(*ast.CallExpr); ok && c.releasesVar(call, val) {
						return true
					}
				}
			case *ast.DeferStmt:
				if c.releasesVar(s.Call, val) {
					return true
				}
			case *ast.IfStmt:
				if s.Init == nil && s.Else == nil && releases(s.Body.List) {
					if slices.Contains(Imply(c.info, s.Cond, true).NonNil, val) {
						return true
					}
				}
			}
		}
		return false
	}
	return releases(rs.Body.List)
}

// releasesVar reports whether call releases the value of v.
func (c *cleanup) releasesVar(call *ast.CallExpr, v *types.Var) bool {
	fn, kind, recv := Callee(c.info, call)
	if kind != Static {
		return false
	}
	if recv != nil && Root(c.info, recv) == v && c.o.Releases(fn, -1) {
		return true
	}
	for j, arg := range call.Args {
		if Root(c.info, arg) == v && c.o.Releases(fn, ParamIndex(fn, j)) {
			return true
		}
	}
	return false
}

// assign handles lhs = rhs and lhs := rhs (and var specs) as a parallel
// assignment: every right-hand side is evaluated first, then the left-hand
// variables lose what they held and gain what their right-hand side
// aliases.
func (c *cleanup) assign(st ostate, stmt ast.Node, lhs, rhs []ast.Expr) {
	if len(rhs) == 0 { // var x T: the zero value
		for _, l := range lhs {
			if v := c.localVar(l); v != nil {
				c.kill(st, c.known(v), stmt)
				if types.Identical(v.Type(), c.errType) {
					b := c.bit(v)
					for id := range st {
						if st[id].live {
							st[id].nils |= b
						}
					}
				}
			}
		}
		return
	}
	if len(rhs) == 1 && len(lhs) > 1 {
		if call, id := c.site(rhs[0]); id >= 0 {
			c.call(st, call, false)
			c.lhsUses(st, lhs)
			c.kill(st, c.lhsVars(lhs), stmt)
			c.acquire(st, id, stmt, lhs[0], lhs[len(lhs)-1])
			return
		}
		c.expr(st, rhs[0])
		c.lhsUses(st, lhs)
		c.kill(st, c.lhsVars(lhs), stmt)
		return
	}
	if len(lhs) != len(rhs) {
		return // ill-typed
	}
	sites := make([]int, len(rhs))
	alias := make([]uint64, len(rhs))
	for i, r := range rhs {
		sites[i] = -1
		if call, id := c.site(r); id >= 0 {
			c.call(st, call, false)
			sites[i] = id
			continue
		}
		alias[i] = c.aliasExpr(st, r)
	}
	c.lhsUses(st, lhs)
	// Stores to non-local places: the aliased resources escape.
	for i, l := range lhs {
		if isBlank(l) {
			if sites[i] >= 0 {
				c.discard(sites[i])
			}
			continue
		}
		if c.localVar(l) == nil {
			c.discharge(st, alias[i], store)
		}
	}
	// Local variables: parallel update of every holder set.
	killed := c.lhsVars(lhs)
	var nils uint64
	for i, l := range lhs {
		if v := c.localVar(l); v != nil && nilExpr(c.info, rhs[i]) && types.Identical(v.Type(), c.errType) {
			nils |= c.bit(v)
		}
	}
	for id := range c.obls {
		ob := &st[id]
		if !ob.live {
			continue
		}
		var add uint64
		for i, l := range lhs {
			if alias[i]&ob.holders != 0 {
				if v := c.localVar(l); v != nil {
					add |= c.bit(v)
				}
			}
		}
		old := ob.holders
		ob.holders = ob.holders&^killed | add
		ob.errs &^= killed
		ob.nils = ob.nils&^killed | nils
		ob.trues &^= killed
		ob.falses &^= killed
		if old != 0 && ob.holders == 0 {
			c.lost(st, id, stmt)
		}
	}
	g := &st[len(st)-1]
	g.nils = g.nils&^killed | nils
	g.trues &^= killed
	g.falses &^= killed
	for i, l := range lhs {
		if sites[i] >= 0 && !isBlank(l) {
			c.acquire(st, sites[i], stmt, l, nil)
		}
	}
}

// lhsUses evaluates the operands of non-variable assignment targets (the
// map, slice or pointer being stored into).
func (c *cleanup) lhsUses(st ostate, lhs []ast.Expr) {
	for _, l := range lhs {
		if _, ok := ast.Unparen(l).(*ast.Ident); !ok {
			c.expr(st, l)
		}
	}
}

func (c *cleanup) lhsVars(lhs []ast.Expr) uint64 {
	var m uint64
	for _, l := range lhs {
		if v := c.localVar(l); v != nil {
			m |= c.known(v)
		}
	}
	return m
}

// kill removes the variables in m from every holder set; a resource whose
// last holder is overwritten is lost.
func (c *cleanup) kill(st ostate, m uint64, at ast.Node) {
	if m == 0 {
		return
	}
	g := &st[len(st)-1]
	g.nils &^= m
	g.trues &^= m
	g.falses &^= m
	for id := range c.obls {
		ob := &st[id]
		if !ob.live {
			continue
		}
		old := ob.holders
		ob.holders &^= m
		ob.errs &^= m
		ob.nils &^= m
		ob.trues &^= m
		ob.falses &^= m
		if old != 0 && ob.holders == 0 {
			c.lost(st, id, at)
		}
	}
}

func (c *cleanup) lost(st ostate, id int, at ast.Node) {
	st[id] = obl{}
	if !c.record {
		return
	}
	if c.obls[id].call == nil {
		c.seedFail[id] = true
		return
	}
	if prev := c.lostAt[id]; prev == nil || at.Pos() < prev.Pos() {
		c.lostAt[id] = at
	}
}

func (c *cleanup) discard(id int) {
	if c.record {
		c.discarded[id] = true
	}
}

// acquire starts obligation id, held by the variable l (with error
// variable errLHS, when the callee has an error result).
func (c *cleanup) acquire(st ostate, id int, stmt ast.Node, l, errLHS ast.Expr) {
	if isBlank(l) {
		st[id] = obl{}
		// _, err := Acquire() keeps only the error: the caller expects the
		// call to fail (a test of a bad argument, say), so only a result
		// discarded together with its error is reported.
		if errLHS == nil || isBlank(errLHS) || !c.obls[id].errRes {
			c.discard(id)
		}
		return
	}
	v := c.localVar(l)
	if v == nil {
		st[id] = obl{} // stored straight into a field, global or element
		if c.record {
			c.escaped[id] = true
		}
		return
	}
	g := st[len(st)-1]
	ob := obl{live: true, holders: c.bit(v), nils: g.nils, trues: g.trues, falses: g.falses}
	if errLHS != nil && c.obls[id].errRes {
		if ev := c.localVar(errLHS); ev != nil && types.Identical(ev.Type(), c.errType) {
			ob.errs = c.bit(ev)
		}
	}
	st[id] = ob
	if c.record {
		if s, ok := stmt.(ast.Stmt); ok {
			c.defs[id] = s
		}
		c.holderOf[id] = v
	}
}

// discharge ends the obligations held by the variables in m, where the
// event is at least as strong as the obligation requires.
func (c *cleanup) discharge(st ostate, m uint64, level int) {
	if m == 0 {
		return
	}
	for id := range c.obls {
		if st[id].live && st[id].holders&m != 0 && level >= c.obls[id].minLevel {
			st[id] = obl{}
			if c.record && level != release {
				c.escaped[id] = true
			}
		}
	}
}

// refs returns the known variables referenced anywhere in e, closures included.
func (c *cleanup) refs(e ast.Node) uint64 {
	var m uint64
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if v, ok := c.info.Uses[id].(*types.Var); ok {
				m |= c.known(v)
			}
		}
		return true
	})
	return m
}

// escape evaluates e, whose value leaves the function's variables (stored,
// sent, returned): what e aliases escapes firmly, what it merely mentions
// escapes weakly.
func (c *cleanup) escape(st ostate, e ast.Expr) {
	if call, id := c.site(e); id >= 0 {
		c.call(st, call, false)
		return
	}
	a := c.aliasExpr(st, e)
	c.discharge(st, a, store)
	c.discharge(st, c.escapingRefs(e)&^a, weak)
}

// escapingRefs returns the known variables referenced in e other than as
// operands of calls (a call has already decided what it does with its
// operands) and inside function literals (see capture).
func (c *cleanup) escapingRefs(e ast.Node) uint64 {
	var m uint64
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if v, ok := c.info.Uses[n].(*types.Var); ok {
				m |= c.known(v)
			}
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			if _, kind, _ := Callee(c.info, n); kind == Conversion {
				return true
			}
			// The result of bufio.NewReader(f), gzip.NewReader(f) or
			// wrap(s) may hold its arguments (not its receiver).
			if mayWrap(c.info.TypeOf(n)) {
				for _, a := range n.Args {
					m |= c.escapingRefs(a)
				}
			}
			return false
		}
		return true
	})
	return m
}

// mayWrap reports whether a call result of type t may hold the call's
// arguments: anything but basic values and errors.
func mayWrap(t types.Type) bool {
	switch t := t.(type) {
	case nil:
		return false
	case *types.Tuple:
		for v := range t.Variables() {
			if mayWrap(v.Type()) {
				return true
			}
		}
		return false
	}
	if types.Identical(t, errorType) {
		return false
	}
	_, basic := t.Underlying().(*types.Basic)
	return !basic
}

// aliasExpr evaluates e and returns the variables whose resources e's value
// holds: a variable, a conversion or assertion of one, or a composite
// literal (or its address) containing them.
func (c *cleanup) aliasExpr(st ostate, e ast.Expr) uint64 {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		if v, ok := c.info.Uses[x].(*types.Var); ok {
			return c.known(v)
		}
		return 0
	case *ast.CompositeLit:
		var m uint64
		for _, elt := range x.Elts {
			if kv, ok := elt.(*ast.KeyValueExpr); ok {
				c.expr(st, kv.Key)
				elt = kv.Value
			}
			if _, id := c.site(elt); id >= 0 {
				c.escape(st, elt)
				continue
			}
			m |= c.aliasExpr(st, elt)
		}
		return m
	case *ast.UnaryExpr:
		if lit, ok := ast.Unparen(x.X).(*ast.CompositeLit); ok && x.Op == token.AND {
			return c.aliasExpr(st, lit)
		}
	case *ast.TypeAssertExpr:
		return c.aliasExpr(st, x.X)
	case *ast.CallExpr:
		_, kind, _ := Callee(c.info, x)
		if kind == Conversion && len(x.Args) == 1 {
			return c.aliasExpr(st, x.Args[0])
		}
		if kind != Builtin && mayWrap(c.info.TypeOf(x)) {
			// r := bufio.NewReader(f): r may hold f, so releasing or
			// returning r counts for f. (Only more holders: never a
			// finding more.)
			c.expr(st, e)
			var m uint64
			for _, a := range x.Args {
				if v := Root(c.info, a); v != nil {
					m |= c.known(v)
				}
			}
			return m
		}
	}
	c.expr(st, e)
	return 0
}

// expr evaluates e for its effects on obligations.
func (c *cleanup) expr(st ostate, e ast.Expr) {
	switch x := e.(type) {
	case nil:
		return
	case *ast.Ident, *ast.BasicLit:
		return
	case *ast.FuncLit:
		c.capture(st, x)
		return
	case *ast.CallExpr:
		c.call(st, x, false)
		return
	case *ast.UnaryExpr:
		if x.Op == token.AND {
			c.expr(st, x.X)
			c.discharge(st, c.refs(x.X), weak)
			return
		}
	case *ast.CompositeLit:
		for _, elt := range x.Elts {
			if kv, ok := elt.(*ast.KeyValueExpr); ok {
				c.expr(st, kv.Key)
				elt = kv.Value
			}
			c.escape(st, elt)
		}
		return
	case *ast.SelectorExpr:
		if sel, ok := c.info.Selections[x]; ok && sel.Kind() == types.MethodVal {
			// A method value (s.Release passed to t.Cleanup, say) keeps its receiver.
			c.expr(st, x.X)
			c.discharge(st, c.refs(x.X), weak)
			return
		}
		c.expr(st, x.X)
		return
	}
	ast.Inspect(e, func(n ast.Node) bool {
		if n == e {
			return true
		}
		if sub, ok := n.(ast.Expr); ok {
			c.expr(st, sub)
			return false
		}
		return true
	})
}

// watch indexes and returns the local variables a deferred literal refers to.
func (c *cleanup) watch(lit *ast.FuncLit) uint64 {
	var m uint64
	ast.Inspect(lit.Body, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if v, ok := c.info.Uses[id].(*types.Var); ok && c.local(v) && !isBasic(v.Type()) {
				m |= c.bit(v)
			}
		}
		return true
	})
	return m
}

func isBasic(t types.Type) bool {
	_, ok := t.Underlying().(*types.Basic)
	return ok
}

// capture handles a function literal: the resources it references escape
// into the closure; those it releases count as released.
func (c *cleanup) capture(st ostate, lit *ast.FuncLit) {
	m, ok := c.free[lit]
	if !ok {
		m = c.refs(lit.Body)
		c.free[lit] = m
	}
	if m == 0 {
		return
	}
	rel, ok := c.litRel[lit]
	if !ok {
		ast.Inspect(lit.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				fn, kind, recv := Callee(c.info, call)
				if kind == Static && recv != nil && c.o.Releases(fn, -1) {
					if v := Root(c.info, recv); v != nil {
						rel |= c.known(v)
					}
				}
				if kind == Static {
					for j, arg := range call.Args {
						if c.o.Releases(fn, ParamIndex(fn, j)) {
							if v := Root(c.info, arg); v != nil {
								rel |= c.known(v)
							}
						}
					}
				}
			}
			return true
		})
		c.litRel[lit] = rel
	}
	c.discharge(st, rel, release)
	c.discharge(st, m&^rel, weak)
}

// mayRelease reports whether a dynamic call of method fn could be a
// release: releases take no arguments (Close(), Release(), Free()).
func mayRelease(fn *types.Func) bool {
	if fn == nil {
		return false
	}
	sig, ok := fn.Type().(*types.Signature)
	return ok && sig.Params().Len() == 0
}

// call evaluates a call: releases and takers end obligations, unknown
// callees keep what they are given, and an acquiring call used as an
// operand whose value nobody keeps is discarded. In a go statement
// everything the call is given escapes.
func (c *cleanup) call(st ostate, call *ast.CallExpr, goStmt bool) {
	fn, kind, recv := Callee(c.info, call)
	switch kind {
	case Conversion:
		for _, a := range call.Args {
			c.expr(st, a)
		}
		return
	case Builtin:
		if BuiltinName(c.info, call) == "append" && len(call.Args) > 0 {
			c.expr(st, call.Args[0])
			for _, a := range call.Args[1:] {
				c.escape(st, a)
			}
			return
		}
		for _, a := range call.Args {
			c.expr(st, a)
		}
		return
	}
	if recv != nil {
		if rc, id := c.site(recv); id >= 0 {
			c.call(st, rc, false)
			if !(kind == Static && c.o.Releases(fn, -1)) && kind != Dynamic && !goStmt {
				c.discard(id)
			}
		} else {
			c.expr(st, recv)
			m := c.rootBits(recv)
			switch {
			case goStmt:
				c.discharge(st, c.refs(recv), weak)
			case kind == Static && c.o.Releases(fn, -1):
				c.discharge(st, m, release)
			case kind == Static && c.o.Takes(fn, -1):
				c.discharge(st, m, store)
			case kind == Dynamic:
				// An interface or type-parameter method without
				// arguments (io.Closer's Close, a generic helper's
				// x.Release()) may be the release.
				if mayRelease(fn) {
					c.discharge(st, m, store)
				}
				c.discharge(st, c.refs(recv), weak)
			}
		}
	} else if kind == Dynamic {
		c.expr(st, call.Fun)
	}
	for j, arg := range call.Args {
		if goStmt {
			c.escape(st, arg)
			continue
		}
		if ac, id := c.site(arg); id >= 0 {
			c.call(st, ac, false)
			// f(Acquire()) hands f the result and, for an acquirer with an
			// error result, the error too: f decides (a test helper that
			// extracts the error, say). Only a lone result is discarded.
			if _, tuple := c.info.TypeOf(ac).(*types.Tuple); kind == Static && !tuple && !c.o.Takes(fn, ParamIndex(fn, j)) {
				c.discard(id)
			}
			continue
		}
		if kind != Static {
			c.escape(st, arg)
			continue
		}
		pi := ParamIndex(fn, j)
		c.expr(st, arg)
		switch {
		case c.o.Releases(fn, pi):
			c.discharge(st, c.rootBits(arg), release)
		case c.o.Takes(fn, pi):
			c.discharge(st, c.rootBits(arg), store)
		}
	}
}

func (c *cleanup) rootBits(e ast.Expr) uint64 {
	if v := Root(c.info, e); v != nil {
		return c.known(v)
	}
	return 0
}

// ret handles a return statement: returned values escape (a resource
// returned as the first result makes the function an acquirer), and every
// obligation still live leaks through this exit.
func (c *cleanup) ret(st ostate, r *ast.ReturnStmt) {
	if len(r.Results) == 0 {
		var m uint64
		for i, v := range c.in.Results {
			b := c.known(v)
			if i == 0 {
				c.noteAcquirer(st, b, v)
			}
			m |= b
		}
		c.discharge(st, m, store)
	} else if len(r.Results) == 1 && c.in.Sig.Results().Len() > 1 {
		if call, id := c.site(r.Results[0]); id >= 0 {
			c.call(st, call, false)
			c.noteAcquirerCall()
		} else {
			c.escape(st, r.Results[0])
		}
	} else {
		for i, e := range r.Results {
			if call, id := c.site(e); id >= 0 {
				c.call(st, call, false)
				if i == 0 {
					c.noteAcquirerCall()
				}
				continue
			}
			if i == 0 {
				if v := VarOf(c.info, e); v != nil {
					c.noteAcquirer(st, c.known(v), v)
				}
			}
			c.escape(st, e)
		}
	}
	// Deferred closures see what the variables hold at exit.
	c.discharge(st, st[len(st)-1].holders, weak)
	if !c.record {
		return
	}
	for id := range c.obls {
		if !st[id].live {
			continue
		}
		if c.obls[id].call == nil {
			c.seedFail[id] = true
			continue
		}
		if prev := c.exitAt[id]; prev == nil || r.Pos() < prev.Pos() {
			c.exitAt[id] = r
		}
	}
}

// noteAcquirer records that the function returns, as its first result,
// variable v (with bit m): it is an acquirer when v holds an outstanding
// resource of v's own type (not a wrapper that merely may hold one, such
// as a bufio.Writer over a file).
func (c *cleanup) noteAcquirer(st ostate, m uint64, v *types.Var) {
	if !c.record || m == 0 {
		return
	}
	for id := range c.obls {
		ob := c.obls[id]
		if st[id].live && st[id].holders&m != 0 && ob.call != nil && types.Identical(v.Type(), firstResult(c.info, ob.call)) {
			c.acquirer = true
		}
	}
}

// firstResult returns the type of the first result of call.
func firstResult(info *types.Info, call *ast.CallExpr) types.Type {
	t := info.TypeOf(call)
	if tup, ok := t.(*types.Tuple); ok && tup.Len() > 0 {
		t = tup.At(0).Type()
	}
	return t
}

func (c *cleanup) noteAcquirerCall() {
	if c.record {
		c.acquirer = true
	}
}

// Prewalk lists the acquiring calls and the function literals of a body,
// without entering nested literals, and the parameters (-1: receiver) that
// the body releases or hands to a taker, directly or through a range loop.
func Prewalk(info *types.Info, o *Oracle, body *ast.BlockStmt, sig *types.Signature) (sites []*ast.CallExpr, lits []*ast.FuncLit, released []*types.Var) {
	if body == nil {
		return
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			lits = append(lits, n)
			ast.Inspect(n.Body, func(m ast.Node) bool {
				if call, ok := m.(*ast.CallExpr); ok {
					released = appendReleased(info, o, call, released)
				}
				return true
			})
			return false
		case *ast.CallExpr:
			fn, kind, _ := Callee(info, n)
			if kind == Static && o.Acquires(fn) {
				sites = append(sites, n)
			}
			released = appendReleased(info, o, n, released)
		}
		return true
	})
	return
}

func appendReleased(info *types.Info, o *Oracle, call *ast.CallExpr, out []*types.Var) []*types.Var {
	fn, kind, recv := Callee(info, call)
	if kind == Dynamic && recv != nil {
		if v := Root(info, recv); v != nil && mayRelease(fn) {
			out = append(out, v)
		}
		return out
	}
	if kind != Static {
		return out
	}
	if recv != nil && o.Takes(fn, -1) {
		if v := Root(info, recv); v != nil {
			out = append(out, v)
		}
	}
	for j, arg := range call.Args {
		if o.Takes(fn, ParamIndex(fn, j)) {
			if v := Root(info, arg); v != nil {
				out = append(out, v)
			}
		}
	}
	return out
}
