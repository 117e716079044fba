package contract

import (
	"fmt"
	"go/token"
	"go/types"
	"strings"
)

// externTarget is what the full name of an extern line resolved to.
type externTarget struct {
	fn      *types.Func // nil: not resolved
	missing bool        // the name was reported as naming nothing
}

// resolveExtern looks the readings xs of path up among the package's
// dependencies. A name in a dependency that does not exist is reported,
// with the nearest existing one, where the dependency's scope is complete
// (type-checked from source, or the export data of a direct import); a
// package that is no dependency is left to be matched by name at call sites.
func (p *pkgParser) resolveExtern(path arg, xs []externPath) externTarget {
	if p.pkg == nil {
		return externTarget{}
	}
	if p.deps == nil {
		p.deps = dependencies(p.pkg)
	}
	deps := p.deps
	// The longest package path that is a dependency wins (yaml.v3 over yaml).
	for i := len(xs) - 1; i >= 0; i-- {
		if tp := deps[xs[i].pkg]; tp != nil {
			return p.lookupExtern(path, xs[i], tp)
		}
	}
	return externTarget{}
}

// lookupExtern finds the func or method x names in tp.
func (p *pkgParser) lookupExtern(path arg, x externPath, tp *types.Package) externTarget {
	scope := tp.Scope()
	own := tp == p.pkg
	certain := func(name string) bool { return (own || tp.Complete()) && (own || token.IsExported(name)) }
	at := func(off int, s string) (token.Pos, token.Pos) {
		return path.pos + token.Pos(off), path.pos + token.Pos(off+len(s))
	}
	if x.recv == "" {
		pos, end := at(x.nameOff, x.name)
		switch o := scope.Lookup(x.name).(type) {
		case *types.Func:
			return externTarget{fn: o}
		case *types.TypeName:
			p.errorf("", pos, end, "%s names type %s.%s, not a func; name a method as %s.%s.Method", path.value, tp.Name(), x.name, x.pkg, x.name)
		case nil:
			if !certain(x.name) {
				return externTarget{}
			}
			funcs := sortedNames(scope, func(o types.Object) bool {
				_, ok := o.(*types.Func)
				return ok && (own || o.Exported())
			})
			p.noName(pos, end, x.name, "func", tp, funcs)
		default:
			p.errorf("", pos, end, "%s names %s, not a func", path.value, types.ObjectString(o, types.RelativeTo(tp)))
		}
		return externTarget{missing: true}
	}
	pos, end := at(x.recvOff, x.recv)
	tn, ok := scope.Lookup(x.recv).(*types.TypeName)
	if !ok {
		if scope.Lookup(x.recv) == nil && !certain(x.recv) {
			return externTarget{}
		}
		tnames := sortedNames(scope, func(o types.Object) bool {
			_, ok := o.(*types.TypeName)
			return ok && (own || o.Exported())
		})
		p.noName(pos, end, x.recv, "type", tp, tnames)
		return externTarget{missing: true}
	}
	obj, _, _ := types.LookupFieldOrMethod(tn.Type(), true, tp, x.name)
	fn, ok := obj.(*types.Func)
	if !ok {
		if !certain(x.recv) {
			return externTarget{}
		}
		pos, end := at(x.nameOff, x.name)
		p.noName(pos, end, x.name, "method of "+x.recv, tp, methodNames(tn.Type()))
		return externTarget{missing: true}
	}
	if x.ptr && types.IsInterface(tn.Type()) {
		pos, end := at(x.recvOff-2, "(*"+x.recv+")")
		p.report(StContract, "", pos, end, []Fix{{
			Message: "write " + x.recv + " without (*...)",
			Edits:   []Edit{{Pos: pos, End: end, NewText: x.recv}},
		}}, "%s is an interface, whose methods are named %s.%s.%s, without (*...)", x.recv, x.pkg, x.recv, x.name)
		return externTarget{missing: true}
	}
	return externTarget{fn: fn}
}

// noName reports a name that names nothing in tp, with the nearest
// existing one among cands (a fix when it is a plausible misspelling).
func (p *pkgParser) noName(pos, end token.Pos, name, kind string, tp *types.Package, cands []string) {
	if s := nearName(name, cands); s != "" {
		p.report(StContract, "", pos, end, []Fix{{
			Message: fmt.Sprintf("replace %s with %s", name, s),
			Edits:   []Edit{{Pos: pos, End: end, NewText: s}},
		}}, "//state:extern names no %s %s in %s; did you mean %s?", kind, name, tp.Path(), s)
		return
	}
	if s := closest(name, cands); s != "" {
		p.errorf("", pos, end, "//state:extern names no %s %s in %s; the nearest existing name is %s", kind, name, tp.Path(), s)
		return
	}
	p.errorf("", pos, end, "//state:extern names no %s %s in %s, which has none", kind, name, tp.Path())
}

// nearName returns the candidate nearest to word, a Go name, when it is a
// plausible misspelling (case aside), or "".
func nearName(word string, cands []string) string {
	s := closest(word, cands)
	if s == "" {
		return ""
	}
	lw, ls := strings.ToLower(word), strings.ToLower(s)
	if nearest(lw, []string{ls}) == "" {
		return ""
	}
	return s
}

// closest returns the candidate nearest to word, however far.
func closest(word string, cands []string) string {
	best, bestD := "", -1
	lw := strings.ToLower(word)
	for _, c := range cands {
		if d := distance(lw, strings.ToLower(c)); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// methodNames returns the names of the methods of t and *t.
func methodNames(t types.Type) []string {
	var out []string
	seen := make(map[string]bool)
	for _, c := range []types.Type{t, types.NewPointer(t)} {
		if types.IsInterface(t) && c != t {
			break
		}
		ms := types.NewMethodSet(c)
		for i := range ms.Len() {
			if n := ms.At(i).Obj().Name(); !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// externFits reports a directive that cannot apply to fn, and returns
// whether it applies.
func (p *pkgParser) externFits(fn *types.Func, verb arg, names []arg, path arg) bool {
	sig := fn.Signature()
	switch {
	case needsMethod(verb.value) && sig.Recv() == nil:
		msg := map[string]string{
			"release": "it releases its receiver; use //state:extern frees NAME for the parameter it releases",
			"mutates": "it changes its receiver; use //state:extern writes NAME for a parameter it writes through",
			"appends": "it grows its receiver",
			"view":    "its first result aliases the receiver",
			"valid":   "it reports whether its receiver holds a resource",
		}[verb.value]
		p.errorf("", verb.pos, verb.end, "//state:extern %s applies to a method (%s), and %s is a plain func", verb.value, msg, path.value)
		return false
	case (verb.value == "acquire" || verb.value == "view") && sig.Results().Len() == 0:
		p.errorf("", verb.pos, verb.end, "//state:extern %s on %s: it returns nothing, but its first result must be the resource", verb.value, path.value)
		return false
	}
	switch verb.value {
	case "acquire", "valid", "errmap":
		return true // checked by externDirective
	case "child":
		if len(names) == 1 && names[0].value == "recv" {
			if sig.Recv() == nil {
				p.errorf("", names[0].pos, names[0].end, "//state:extern child recv on %s: a plain func has no receiver; name the parameter the result belongs to", path.value)
				return false
			}
			return true
		}
	}
	ok := true
	for _, a := range names {
		if !p.externParam(sig, verb, a, path) {
			ok = false
		}
	}
	return ok
}

// externParam checks the parameter a of //state:extern takes or writes.
func (p *pkgParser) externParam(sig *types.Signature, verb, a, path arg) bool {
	var names []string
	for v := range sig.Params().Variables() {
		if v.Name() == "" || v.Name() == "_" {
			continue
		}
		if v.Name() != a.value {
			names = append(names, v.Name())
			continue
		}
		if verb.value == "writes" && !writable(v.Type()) {
			p.errorf("", a.pos, a.end,
				"//state:extern writes %s on %s: parameter %s has type %s, which is neither a slice nor a pointer, so a write through it cannot reach the caller",
				a.value, path.value, a.value, typeString(v.Type(), p.pkg))
			return false
		}
		return true
	}
	switch s := nearName(a.value, names); {
	case len(names) == 0:
		p.errorf("", a.pos, a.end, "//state:extern %s %s names no parameter: %s has no named parameters", verb.value, a.value, path.value)
	case s != "":
		p.report(StContract, "", a.pos, a.end, []Fix{{
			Message: "replace " + a.value + " with " + s,
			Edits:   []Edit{{Pos: a.pos, End: a.end, NewText: s}},
		}}, "//state:extern %s %s names no parameter of %s; did you mean %s?", verb.value, a.value, path.value, s)
	default:
		p.errorf("", a.pos, a.end, "//state:extern %s %s names no parameter of %s; the parameters are %s", verb.value, a.value, path.value, strings.Join(names, ", "))
	}
	return false
}
