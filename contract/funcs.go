package contract

import (
	"go/ast"
	"go/types"
	"strings"
)

// funcDoc parses the function directives in the doc comment of a func or
// method declaration.
func (p *pkgParser) funcDoc(decl *ast.FuncDecl) {
	var obj *types.Func
	if p.info != nil {
		obj, _ = p.info.Defs[decl.Name].(*types.Func)
	}
	p.funcDirs(decl.Doc, funcSig{
		name:   funcName(decl),
		ftype:  decl.Type,
		method: decl.Recv != nil && len(decl.Recv.List) > 0,
		obj:    obj,
	})
}

// ifaceMethods parses the function directives in the doc comments of the
// methods of an interface type declaration, and marks those comments
// handled. A call through the interface carries them.
func (p *pkgParser) ifaceMethods(ts *ast.TypeSpec, handled map[*ast.CommentGroup]bool) {
	it, ok := ts.Type.(*ast.InterfaceType)
	if !ok || it.Methods == nil {
		return
	}
	for _, m := range it.Methods.List {
		ft, ok := m.Type.(*ast.FuncType)
		if !ok || len(m.Names) != 1 || m.Doc == nil {
			continue // an embedded interface or a type term: its comments are not a method's
		}
		handled[m.Doc] = true
		var obj *types.Func
		if p.info != nil {
			obj, _ = p.info.Defs[m.Names[0]].(*types.Func)
		}
		p.funcDirs(m.Doc, funcSig{name: ts.Name.Name + "." + m.Names[0].Name, ftype: ft, method: true, iface: true, obj: obj})
	}
}

// funcSig is what the function directives are checked against: a func
// declaration, or a method of an interface type.
type funcSig struct {
	name   string        // "F", "T.M", "(*T).M", or "Iface.M"
	ftype  *ast.FuncType // nil: unknown
	method bool          // it has a receiver
	iface  bool          // a method of an interface type
	obj    *types.Func   // nil without type information
}

// funcDirs parses the function directives of doc, the doc comment of sig.
func (p *pkgParser) funcDirs(doc *ast.CommentGroup, sig funcSig) {
	dirs := p.funcDirectives(doc)
	if len(dirs) == 0 {
		return
	}
	fp := newFuncParse(p, sig, dirs[0])
	for _, d := range dirs {
		fp.directive(d)
	}
	if fp.recorded {
		p.out.Funcs = append(p.out.Funcs, fp.f)
	}
}

// funcDirectives returns the //state: lines of doc, reporting look-alike
// lines.
func (p *pkgParser) funcDirectives(doc *ast.CommentGroup) []*directive {
	var dirs []*directive
	for _, c := range doc.List {
		if !strings.Contains(c.Text, "state:") {
			continue
		}
		if d, ok := parseDirective(c); ok {
			dirs = append(dirs, d)
			continue
		}
		p.lookalike(c, "", funcVerbs)
	}
	return dirs
}

// funcParse holds the state of one func's directives while they are parsed.
type funcParse struct {
	p        *pkgParser
	ftype    *ast.FuncType
	f        *Func
	what     string                // "func F" or "method (*T).M", for messages
	params   map[string]*types.Var // nil values without type information
	nresults int
	method   bool            // it has a receiver
	seen     map[string]bool // verbs without arguments, seen once
	named    map[string]bool // "takes x", "writes x"
	recorded bool            // a directive was recorded on f
}

func newFuncParse(p *pkgParser, sig funcSig, first *directive) *funcParse {
	fp := &funcParse{
		p:      p,
		ftype:  sig.ftype,
		f:      &Func{Name: sig.name, Pos: first.pos, obj: sig.obj},
		params: funcParams(sig.ftype, sig.obj),
		method: sig.method,
		seen:   make(map[string]bool),
		named:  make(map[string]bool),
	}
	fp.what = "func " + fp.f.Name
	switch {
	case sig.iface:
		fp.what = "interface method " + fp.f.Name
	case sig.method:
		fp.what = "method " + fp.f.Name
	}
	if sig.ftype != nil && sig.ftype.Results != nil {
		fp.nresults = sig.ftype.Results.NumFields()
	}
	return fp
}

// directive parses one directive of the func.
func (fp *funcParse) directive(d *directive) {
	if !fp.accept(d) {
		return
	}
	if d.verb == "takes" || d.verb == "writes" {
		for _, a := range d.args {
			fp.param(d, a)
		}
		if len(d.args) == 0 {
			fp.p.errorf("", d.pos, d.end, "//state:%s on %s needs a parameter name; write //state:%s NAME", d.verb, fp.what, d.verb)
		}
		return
	}
	if fp.seen[d.verb] {
		fp.p.errorf("", d.pos, d.end, "repeated //state:%s on %s; keep one", d.verb, fp.what)
		return
	}
	fp.seen[d.verb] = true
	if len(d.args) > 0 {
		fp.p.errorf("", d.args[0].pos, d.args[len(d.args)-1].end, "//state:%s on %s takes no arguments; remove them", d.verb, fp.what)
		return
	}
	if fp.marker(d) {
		fp.recorded = true
	}
}

// accept reports what keeps d from being a function directive (a claim of
// durability, a type verb, an unknown verb, a malformed argument) and
// returns whether its arguments are to be parsed.
func (fp *funcParse) accept(d *directive) bool {
	p, what := fp.p, fp.what
	if p.claimsDurability(d, "", what) || p.externInDoc(d, "", what) {
		return false
	}
	switch {
	case isIn(d.verb, typeVerbs):
		p.errorf("", d.pos, d.end,
			"//state:%s applies to the doc comment of a state type, not to %s; move it above the type declaration", d.verb, what)
		return false
	case !isIn(d.verb, funcVerbs):
		p.unknownVerb(d, "", what, funcVerbs)
		return false
	}
	if d.argErr != nil {
		p.errorf("", d.argErr.pos, d.argErr.end, "malformed argument in //state:%s of %s: %s", d.verb, what, d.argErr.msg)
		return false
	}
	return true
}

// param records the parameter a names in //state:takes or //state:writes.
func (fp *funcParse) param(d *directive, a arg) {
	p, what := fp.p, fp.what
	if a.key != "" {
		p.errorf("", a.pos, a.end, "//state:%s on %s takes parameter names, not key=value; remove %s", d.verb, what, quote(a.key+"="+a.value))
		return
	}
	prm, ok := fp.params[a.value]
	if !ok {
		fp.noParam(d, a)
		return
	}
	key := d.verb + " " + a.value
	if fp.named[key] {
		p.errorf("", a.pos, a.end, "repeated //state:%s %s on %s; keep one", d.verb, a.value, what)
		return
	}
	if d.verb == "writes" && prm != nil && !writable(prm.Type()) {
		p.errorf("", a.pos, a.end,
			"//state:writes %s on %s: parameter %s has type %s, which is neither a slice nor a pointer, so a write through it cannot reach the caller; remove the directive or change the parameter",
			a.value, what, a.value, typeString(prm.Type(), p.pkg))
		return
	}
	fp.named[key] = true
	fp.recorded = true
	if d.verb == "takes" {
		fp.f.Takes = append(fp.f.Takes, a.value)
	} else {
		fp.f.Writes = append(fp.f.Writes, a.value)
	}
}

// noParam reports a name that is no parameter, with the nearest one.
func (fp *funcParse) noParam(d *directive, a arg) {
	p, what := fp.p, fp.what
	names := paramNames(fp.ftype)
	switch s := nearest(a.value, names); {
	case len(names) == 0:
		p.errorf("", a.pos, a.end, "//state:%s %s on %s names no parameter: %s has no named parameters", d.verb, a.value, what, fp.f.Name)
	case s != "":
		p.report(StContract, "", a.pos, a.end, []Fix{{
			Message: "replace " + a.value + " with " + s,
			Edits:   []Edit{{Pos: a.pos, End: a.end, NewText: s}},
		}}, "//state:%s %s on %s names no parameter; did you mean %s?", d.verb, a.value, what, s)
	default:
		p.errorf("", a.pos, a.end, "//state:%s %s on %s names no parameter; the parameters are %s", d.verb, a.value, what, strings.Join(names, ", "))
	}
}

// marker records a directive without arguments (acquire, release, mutates,
// appends, view) after checking that it fits the declaration, and returns
// whether it did.
func (fp *funcParse) marker(d *directive) bool {
	p, what, f := fp.p, fp.what, fp.f
	switch d.verb {
	case "acquire":
		if fp.nresults == 0 {
			p.errorf("", d.pos, d.end, "//state:acquire on %s: it returns nothing, but its first result must be the resource the caller releases", what)
			return false
		}
		f.Acquire = true
	case "release":
		if !fp.method {
			p.errorf("", d.pos, d.end,
				"//state:release applies to a method (it releases its receiver), and %s is a plain func; use //state:takes NAME for the parameter it releases", what)
			return false
		}
		f.Release = true
	case "mutates", "appends":
		if !fp.method {
			p.errorf("", d.pos, d.end,
				"//state:%s applies to a method (it changes its receiver), and %s is a plain func; use //state:writes NAME for a parameter it writes through", d.verb, what)
			return false
		}
		f.Mutates = true
		f.Appends = f.Appends || d.verb == "appends"
	case "view":
		if !fp.method {
			p.errorf("", d.pos, d.end, "//state:view applies to a method (its first result aliases the receiver), and %s is a plain func", what)
			return false
		}
		if fp.nresults == 0 {
			p.errorf("", d.pos, d.end, "//state:view on %s: it returns nothing, but its first result must alias the receiver's memory", what)
			return false
		}
		f.View = true
	}
	return true
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
func funcParams(ftype *ast.FuncType, obj *types.Func) map[string]*types.Var {
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
	for _, n := range paramNames(ftype) {
		m[n] = nil
	}
	return m
}

func paramNames(ftype *ast.FuncType) []string {
	var names []string
	if ftype == nil || ftype.Params == nil {
		return nil
	}
	for _, f := range ftype.Params.List {
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
