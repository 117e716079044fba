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

// edge refines the state along a conditional edge: an obligation whose
// error variable is proved non-nil was never acquired, one whose holder is
// proved nil holds nothing, and one that contradicts what was known when it
// was acquired (an error variable known nil, a boolean known true or false)
// cannot be on this edge. What the condition proves is then known on it.
func (c *cleanup) edge(b *cfg.Block, succ int, out ostate) ostate {
	cond := dataflow.BranchCond(b, c.conds)
	if cond == nil {
		return out
	}
	imp := dataflow.ImplyWith(c.info, cond, succ == 0, c.hooks)
	var nonNil, isNil, isTrue, isFalse uint64
	for _, v := range imp.NonNil {
		if types.Identical(v.Type(), c.errType) && c.local(v) {
			nonNil |= c.bit(v) // known non-nil from here on: see besideError
		} else {
			nonNil |= c.known(v)
		}
	}
	for _, v := range imp.Nil {
		isNil |= c.known(v)
	}
	if v := emptied(c.info, cond, succ == 0); v != nil {
		isNil |= c.known(v) // an empty list holds nothing
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
		if i < len(c.obls) && o.errs&nonNil != 0 && o.olds&^isNil != 0 {
			// This run's acquire failed; the previous runs' resource is
			// still held by the variables that kept it.
			*o = obl{live: true, holders: o.olds &^ isNil, nils: o.nils, trues: o.trues, falses: o.falses}
			continue
		}
		if i < len(c.obls) && (o.errs&nonNil != 0 || o.holders&isNil != 0 || o.taken&isNil != 0 || contradicts(*o)) {
			// Never acquired, null, or taken by a takes-onsuccess
			// callee that succeeded.
			*o = obl{}
			continue
		}
		o.olds &^= isNil
		o.taken &^= nonNil // the callee failed: the caller still owns it
		o.nils = o.nils&^nonNil | isNil&c.errVars
		o.nonnils = o.nonnils&^isNil | nonNil&c.errVars
		o.trues = o.trues&^isFalse | isTrue
		o.falses = o.falses&^isTrue | isFalse
	}
	return st
}

// emptied returns the slice variable that cond, being truth, proves empty:
// len(v) == 0 true, or len(v) > 0 or len(v) != 0 false (the end of a loop
// that pops and releases each element); else nil.
func emptied(info *types.Info, cond ast.Expr, truth bool) *types.Var {
	b, ok := ast.Unparen(cond).(*ast.BinaryExpr)
	if !ok || !isZero(info, b.Y) {
		return nil
	}
	switch {
	case b.Op == token.EQL && truth, (b.Op == token.GTR || b.Op == token.NEQ) && !truth:
	default:
		return nil
	}
	call, ok := ast.Unparen(b.X).(*ast.CallExpr)
	if !ok || len(call.Args) != 1 || ownership.BuiltinName(info, call) != "len" {
		return nil
	}
	return dataflow.VarOf(info, call.Args[0])
}

// isZero reports whether e is the constant 0.
func isZero(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	return ok && tv.Value != nil && tv.Value.String() == "0"
}
