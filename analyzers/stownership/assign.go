package stownership

import (
	"go/ast"
	"go/types"

	"github.com/gpustate/gpustate/analyzers/internal/dataflow"
)

// assign handles lhs = rhs and lhs := rhs (and var specs) as a parallel
// assignment: every right-hand side is evaluated first, then the left-hand
// variables lose what they held and gain what their right-hand side
// aliases.
func (c *cleanup) assign(st ostate, stmt ast.Node, lhs, rhs []ast.Expr) {
	switch {
	case len(rhs) == 0: // var x T: the zero value
		c.assignZero(st, stmt, lhs)
	case len(rhs) == 1 && len(lhs) > 1:
		c.assignTuple(st, stmt, lhs, rhs[0])
	case len(lhs) == len(rhs):
		c.assignParallel(st, stmt, lhs, rhs)
	}
	// Otherwise the assignment is ill-typed.
}

// assignZero handles var x T: each variable loses what it held, and an
// error variable is known nil wherever an obligation is live.
func (c *cleanup) assignZero(st ostate, stmt ast.Node, lhs []ast.Expr) {
	for _, l := range lhs {
		v := c.localVar(l)
		if v == nil {
			continue
		}
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

// assignTuple handles a, b = f(): the call is evaluated, the variables
// lose what they held, and an acquiring call's resource is held by the
// first with the last as its error.
func (c *cleanup) assignTuple(st ostate, stmt ast.Node, lhs []ast.Expr, rhs ast.Expr) {
	call, id := c.site(rhs)
	if id >= 0 {
		c.call(st, call, false)
	} else {
		c.expr(st, rhs)
	}
	c.lhsUses(st, lhs)
	c.kill(st, c.lhsVars(lhs), stmt)
	if id < 0 {
		return
	}
	ids := c.sameCall(id)
	for _, j := range ids {
		if r := c.obls[j].result; r < len(lhs) {
			c.acquire(st, j, stmt, lhs[r], lhs[len(lhs)-1])
		}
	}
	// A releaser returned beside the resource (w, release, err :=
	// newWindow()) holds it: calling it, or deferring it, releases it.
	if r := c.o.Releaser(c.obls[id].fn); r >= 0 && r < len(lhs) {
		if rv := c.localVar(lhs[r]); rv != nil {
			for _, j := range ids {
				if st[j].live {
					st[j].holders |= c.bit(rv)
				}
			}
		}
	}
}

// assignParallel handles a, b = x, y (and a single assignment): right-hand
// sides first, then stores to places that are not local variables (the
// resources they alias escape), then the update of every holder set, then
// the acquisitions.
func (c *cleanup) assignParallel(st ostate, stmt ast.Node, lhs, rhs []ast.Expr) {
	sites := make([]int, len(rhs))
	alias := make([]uint64, len(rhs))
	derived := make([]uint64, len(rhs))
	litSites := make([][]int, len(rhs))
	for i, r := range rhs {
		sites[i] = -1
		if call, id := c.site(r); id >= 0 {
			c.call(st, call, false)
			sites[i] = id
			continue
		}
		// w := &batch{ctx: b.NewContext()}: w holds the new context.
		c.collecting = len(lhs) == len(rhs) && (c.localVar(lhs[i]) != nil || c.fieldOfLocal(lhs[i]) != nil)
		alias[i], derived[i] = c.aliasExpr(st, r)
		c.collecting = false
		litSites[i], c.litSites = c.litSites, nil
	}
	c.lhsUses(st, lhs)
	for i, l := range lhs {
		if isBlank(l) {
			if sites[i] >= 0 {
				c.discard(sites[i])
			}
			continue
		}
		if v := c.fieldOfLocal(l); v != nil {
			c.storeField(st, stmt, v, rhs[i], alias[i]|derived[i])
			continue
		}
		if c.localVar(l) == nil {
			c.discharge(st, alias[i]|derived[i], store)
		}
	}
	c.rebind(st, stmt, lhs, rhs, alias, derived)
	for i, l := range lhs {
		if sites[i] >= 0 && !isBlank(l) {
			c.acquire(st, sites[i], stmt, l, nil)
		}
		for _, id := range litSites[i] {
			c.acquire(st, id, stmt, l, nil)
			if c.record {
				delete(c.holderOf, id) // held by the struct, not as itself
				delete(c.defs, id)
			}
		}
	}
}

// rebind updates every holder set for a parallel assignment to the local
// variables among lhs: they lose what they held and gain what their
// right-hand side aliases (alias[i]), or for an acquire, only derives from
// (derived[i]: the result of a call given a part of it). A parameter whose
// taking is being inferred is not held by a value computed from its parts:
// returning h.stats(h.r) does not keep h. An error variable assigned nil is
// known nil; a resource whose last holder is overwritten is lost.
func (c *cleanup) rebind(st ostate, stmt ast.Node, lhs, rhs []ast.Expr, alias, derived []uint64) {
	killed := c.lhsVars(lhs)
	var nils uint64
	mapped := make([]uint64, len(lhs)) // err2 := mapErr(err): err2 stands for err
	for i, l := range lhs {
		v := c.localVar(l)
		if v == nil || !types.Identical(v.Type(), c.errType) {
			continue
		}
		if dataflow.IsNil(c.info, rhs[i]) {
			nils |= c.bit(v)
		}
		if call, ok := ast.Unparen(rhs[i]).(*ast.CallExpr); ok {
			if a := c.errMapArg(call); a != nil {
				if av := dataflow.VarOf(c.info, a); av != nil {
					mapped[i] = c.known(av)
				}
			}
		}
	}
	for id := range c.obls {
		ob := &st[id]
		if !ob.live {
			continue
		}
		if ob.taken&killed != 0 {
			// The error of a takes-onsuccess call is overwritten
			// unchecked: assume the callee took it.
			*ob = obl{}
			continue
		}
		var errs, mnils, mnonnils uint64
		for i, l := range lhs {
			if mapped[i] == 0 {
				continue
			}
			b := c.bit(c.localVar(l))
			if ob.errs&mapped[i] != 0 {
				errs |= b
			}
			if ob.nils&mapped[i] != 0 {
				mnils |= b
			}
			if ob.nonnils&mapped[i] != 0 {
				mnonnils |= b
			}
		}
		var add, addOld uint64
		for i, l := range lhs {
			a := alias[i]
			if c.obls[id].call != nil {
				a |= derived[i]
			}
			if v := c.localVar(l); v != nil {
				if a&ob.holders != 0 {
					add |= c.bit(v)
				}
				if a&ob.olds != 0 {
					addOld |= c.bit(v)
				}
			}
		}
		old, olds := ob.holders, ob.olds
		ob.holders = ob.holders&^killed | add
		ob.olds = ob.olds&^killed | addOld
		ob.errs = ob.errs&^killed | errs
		ob.nils = ob.nils&^killed | nils | mnils
		ob.nonnils = ob.nonnils&^killed | mnonnils
		ob.trues &^= killed
		ob.falses &^= killed
		if old != 0 && ob.holders == 0 || olds != 0 && ob.olds == 0 {
			c.lost(st, id, stmt)
		}
	}
	g := &st[len(st)-1]
	g.nils = g.nils&^killed | nils
	g.nonnils &^= killed
	g.trues &^= killed
	g.falses &^= killed
}

// applyPending records the hand-offs of the statement just evaluated to
// takes-onsuccess callees: what they were given is taken where the error
// variable of the call is nil.
func (c *cleanup) applyPending(st ostate) {
	for _, p := range c.pending {
		b := c.bit(p.err)
		for id := range c.obls {
			if st[id].live && st[id].holders&p.m != 0 {
				if b == 0 {
					st[id] = obl{}
					continue
				}
				st[id].taken |= b
			}
		}
	}
	c.pending = c.pending[:0]
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

// lhsVars returns the bits of the indexed local variables among lhs.
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
	g.nonnils &^= m
	g.trues &^= m
	g.falses &^= m
	for id := range c.obls {
		ob := &st[id]
		if !ob.live {
			continue
		}
		if ob.taken&m != 0 {
			*ob = obl{} // a takes-onsuccess call's error overwritten unchecked
			continue
		}
		ob.nonnils &^= m
		old, olds := ob.holders, ob.olds
		ob.holders &^= m
		ob.olds &^= m
		ob.errs &^= m
		ob.nils &^= m
		ob.trues &^= m
		ob.falses &^= m
		if old != 0 && ob.holders == 0 || olds != 0 && ob.olds == 0 {
			c.lost(st, id, at)
		}
	}
}

// lost ends obligation id, whose last holder the statement at overwrote:
// in the final pass, an acquire is recorded as lost there (at its first
// such statement) and a seeded parameter as not taken.
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

// acquire starts obligation id, held by the variable l (with error
// variable errLHS, when the callee has an error result).
func (c *cleanup) acquire(st ostate, id int, stmt ast.Node, l, errLHS ast.Expr) {
	if isBlank(l) {
		// A result assigned to _ is discarded, with or without its error
		// (_, err := s.Snapshot(): on success nobody holds the snapshot).
		st[id] = obl{}
		if c.record {
			c.discarded[id] = true
			if errLHS != nil && !isBlank(errLHS) {
				c.blank[id] = true
			}
		}
		return
	}
	v := c.localVar(l)
	if v == nil {
		if fv := c.fieldOfLocal(l); fv != nil {
			// out.ctx = b.NewContext(): held by the local struct.
			if b := c.bit(fv); b != 0 {
				g := st[len(st)-1]
				st[id] = obl{live: true, holders: b, nils: g.nils, nonnils: g.nonnils, trues: g.trues, falses: g.falses}
				return
			}
		}
		st[id] = obl{} // stored straight into a field, global or element
		if c.record {
			c.escaped[id] = true
		}
		return
	}
	g := st[len(st)-1]
	ob := obl{live: true, holders: c.bit(v), nils: g.nils, nonnils: g.nonnils, trues: g.trues, falses: g.falses}
	if prev := st[id]; prev.live {
		// The resource of the call's previous run (a loop) is still
		// held: by the variables that are not the one assigned now.
		ob.olds = (prev.holders | prev.olds) &^ ob.holders
	}
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

// fieldOfLocal returns v when l is a field v.f of a local variable v of
// struct type (not through a pointer): storing into it keeps the value in
// the function.
// A field path may be nested (v.inner.f), and may start through a local
// pointer that only ever holds a new struct (w := &window{}; w.tex = t):
// the struct is the function's own, and the resource stays tracked
// through v until v is released, returned or stored.
func (c *cleanup) fieldOfLocal(l ast.Expr) *types.Var {
	sel, ok := ast.Unparen(l).(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	for {
		s, ok := c.info.Selections[sel]
		if !ok || s.Kind() != types.FieldVal {
			return nil
		}
		x := ast.Unparen(sel.X)
		if inner, ok := x.(*ast.SelectorExpr); ok {
			if s.Indirect() {
				return nil
			}
			sel = inner
			continue
		}
		v := c.localVar(x)
		if v == nil {
			return nil
		}
		switch u := v.Type().Underlying().(type) {
		case *types.Struct:
			if s.Indirect() && len(s.Index()) > 1 {
				return nil // through an embedded pointer
			}
			return v
		case *types.Pointer:
			if c.fresh[v] && len(s.Index()) == 1 {
				if _, ok := u.Elem().Underlying().(*types.Struct); ok {
					return v
				}
			}
		}
		return nil
	}
}

// storeField handles v.f = rhs for a local struct v (a named result, say):
// v holds what rhs aliases (m) until it is returned or stored; v.f = nil
// clears it, so a resource whose last holder was v is lost there.
func (c *cleanup) storeField(st ostate, stmt ast.Node, v *types.Var, rhs ast.Expr, m uint64) {
	b := c.bit(v)
	if b == 0 {
		return
	}
	clear := dataflow.IsNil(c.info, rhs)
	for id := range c.obls {
		ob := &st[id]
		if !ob.live {
			continue
		}
		switch {
		case ob.holders&m != 0:
			ob.holders |= b
		case clear && ob.holders&b != 0:
			ob.holders &^= b
			if ob.holders == 0 {
				c.lost(st, id, stmt)
			}
		}
	}
}
