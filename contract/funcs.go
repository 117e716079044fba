package contract

import (
	"go/ast"
	"go/types"
	"strings"
)

// funcDoc parses the function directives in the doc comment of a func or
// method declaration.
func (p *pkgParser) funcDoc(decl *ast.FuncDecl) {
	var dirs []*directive
	for _, c := range decl.Doc.List {
		if !strings.Contains(c.Text, "state:") {
			continue
		}
		if d, ok := parseDirective(c); ok {
			dirs = append(dirs, d)
			continue
		}
		p.lookalike(c, "", funcVerbs)
	}
	if len(dirs) == 0 {
		return
	}
	var obj *types.Func
	if p.info != nil {
		obj, _ = p.info.Defs[decl.Name].(*types.Func)
	}
	f := &Func{Name: funcName(decl), Pos: dirs[0].pos, obj: obj}
	what := "func " + f.Name
	if decl.Recv != nil {
		what = "method " + f.Name
	}
	params := funcParams(decl, obj)
	nresults := 0
	if decl.Type != nil && decl.Type.Results != nil {
		nresults = decl.Type.Results.NumFields()
	}

	seen := make(map[string]bool)
	named := make(map[string]bool) // "takes x", "writes x"
	recorded := false
	for _, d := range dirs {
		if p.claimsDurability(d, "", what) {
			continue
		}
		switch {
		case isIn(d.verb, typeVerbs):
			p.errorf("", d.pos, d.end,
				"//state:%s applies to the doc comment of a state type, not to %s; move it above the type declaration", d.verb, what)
			continue
		case !isIn(d.verb, funcVerbs):
			p.unknownVerb(d, "", what, funcVerbs)
			continue
		}
		if d.argErr != nil {
			p.errorf("", d.argErr.pos, d.argErr.end, "malformed argument in //state:%s of %s: %s", d.verb, what, d.argErr.msg)
			continue
		}
		switch d.verb {
		case "takes", "writes":
			if len(d.args) == 0 {
				p.errorf("", d.pos, d.end, "//state:%s on %s needs a parameter name; write //state:%s NAME", d.verb, what, d.verb)
				continue
			}
			for _, a := range d.args {
				if a.key != "" {
					p.errorf("", a.pos, a.end, "//state:%s on %s takes parameter names, not key=value; remove %s", d.verb, what, quote(a.key+"="+a.value))
					continue
				}
				prm, ok := params[a.value]
				if !ok {
					names := paramNames(decl)
					switch s := nearest(a.value, names); {
					case len(names) == 0:
						p.errorf("", a.pos, a.end, "//state:%s %s on %s names no parameter: %s has no named parameters", d.verb, a.value, what, f.Name)
					case s != "":
						p.report(StContract, "", a.pos, a.end, []Fix{{
							Message: "replace " + a.value + " with " + s,
							Edits:   []Edit{{Pos: a.pos, End: a.end, NewText: s}},
						}}, "//state:%s %s on %s names no parameter; did you mean %s?", d.verb, a.value, what, s)
					default:
						p.errorf("", a.pos, a.end, "//state:%s %s on %s names no parameter; the parameters are %s", d.verb, a.value, what, strings.Join(names, ", "))
					}
					continue
				}
				key := d.verb + " " + a.value
				if named[key] {
					p.errorf("", a.pos, a.end, "repeated //state:%s %s on %s; keep one", d.verb, a.value, what)
					continue
				}
				if d.verb == "writes" && prm != nil && !writable(prm.Type()) {
					p.errorf("", a.pos, a.end,
						"//state:writes %s on %s: parameter %s has type %s, which is neither a slice nor a pointer, so a write through it cannot reach the caller; remove the directive or change the parameter",
						a.value, what, a.value, typeString(prm.Type(), p.pkg))
					continue
				}
				named[key] = true
				recorded = true
				if d.verb == "takes" {
					f.Takes = append(f.Takes, a.value)
				} else {
					f.Writes = append(f.Writes, a.value)
				}
			}
			continue
		}
		if seen[d.verb] {
			p.errorf("", d.pos, d.end, "repeated //state:%s on %s; keep one", d.verb, what)
			continue
		}
		seen[d.verb] = true
		if len(d.args) > 0 {
			a := d.args[0]
			p.errorf("", a.pos, d.args[len(d.args)-1].end, "//state:%s on %s takes no arguments; remove them", d.verb, what)
			continue
		}
		method := decl.Recv != nil && len(decl.Recv.List) > 0
		switch d.verb {
		case "acquire":
			if nresults == 0 {
				p.errorf("", d.pos, d.end, "//state:acquire on %s: it returns nothing, but its first result must be the resource the caller releases", what)
				continue
			}
			f.Acquire = true
		case "release":
			if !method {
				p.errorf("", d.pos, d.end,
					"//state:release applies to a method (it releases its receiver), and %s is a plain func; use //state:takes NAME for the parameter it releases", what)
				continue
			}
			f.Release = true
		case "mutates", "appends":
			if !method {
				p.errorf("", d.pos, d.end,
					"//state:%s applies to a method (it changes its receiver), and %s is a plain func; use //state:writes NAME for a parameter it writes through", d.verb, what)
				continue
			}
			f.Mutates = true
			if d.verb == "appends" {
				f.Appends = true
			}
		case "view":
			if !method {
				p.errorf("", d.pos, d.end, "//state:view applies to a method (its first result aliases the receiver), and %s is a plain func", what)
				continue
			}
			if nresults == 0 {
				p.errorf("", d.pos, d.end, "//state:view on %s: it returns nothing, but its first result must alias the receiver's memory", what)
				continue
			}
			f.View = true
		}
		recorded = true
	}
	if recorded {
		p.out.Funcs = append(p.out.Funcs, f)
	}
}

// funcName returns "F", "T.M" or "(*T).M".
func funcName(decl *ast.FuncDecl) string {
	if decl.Recv == nil || len(decl.Recv.List) == 0 {
		return decl.Name.Name
	}
	t := decl.Recv.List[0].Type
	star := false
	if p, ok := t.(*ast.ParenExpr); ok {
		t = p.X
	}
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = true, s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	recv := "?"
	if id, ok := t.(*ast.Ident); ok {
		recv = id.Name
	}
	if star {
		return "(*" + recv + ")." + decl.Name.Name
	}
	return recv + "." + decl.Name.Name
}

// funcParams maps parameter names to their variables (nil without types).
func funcParams(decl *ast.FuncDecl, obj *types.Func) map[string]*types.Var {
	m := make(map[string]*types.Var)
	if obj != nil {
		if sig, ok := obj.Type().(*types.Signature); ok {
			for i := 0; i < sig.Params().Len(); i++ {
				v := sig.Params().At(i)
				if v.Name() != "" && v.Name() != "_" {
					m[v.Name()] = v
				}
			}
			return m
		}
	}
	for _, n := range paramNames(decl) {
		m[n] = nil
	}
	return m
}

func paramNames(decl *ast.FuncDecl) []string {
	var names []string
	if decl.Type == nil || decl.Type.Params == nil {
		return nil
	}
	for _, f := range decl.Type.Params.List {
		for _, n := range f.Names {
			if n.Name != "_" {
				names = append(names, n.Name)
			}
		}
	}
	return names
}

// writable reports whether a write through a value of type t can reach the
// caller: t is a slice, a pointer, unsafe.Pointer, or a type parameter all of
// whose types are.
func writable(t types.Type) bool {
	switch u := types.Unalias(t).(type) {
	case *types.TypeParam:
		iface, ok := u.Constraint().Underlying().(*types.Interface)
		if !ok {
			return false
		}
		terms := 0
		for i := 0; i < iface.NumEmbeddeds(); i++ {
			switch e := iface.EmbeddedType(i).(type) {
			case *types.Union:
				for j := 0; j < e.Len(); j++ {
					terms++
					if !writable(e.Term(j).Type()) {
						return false
					}
				}
			default:
				if _, isIface := e.Underlying().(*types.Interface); !isIface {
					terms++
					if !writable(e) {
						return false
					}
				}
			}
		}
		return terms > 0
	}
	switch u := t.Underlying().(type) {
	case *types.Slice, *types.Pointer:
		return true
	case *types.Basic:
		return u.Kind() == types.UnsafePointer
	}
	return false
}
