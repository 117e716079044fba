package contract

import (
	"go/ast"
	"go/types"
	"slices"
	"strconv"
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
	fp.finish()
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
	nresults int                   // -1: unknown
	results  *types.Tuple          // nil without type information
	method   bool                  // it has a receiver
	unknown  bool                  // the signature is unknown (an extern line naming a package not imported)
	seen     map[string]bool       // verbs without arguments, seen once
	named    map[string]bool       // "takes x", "writes x"
	recorded bool                  // a directive was recorded on f
	childAt  *directive            // the //state:child line
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
	if sig.obj != nil {
		fp.results = sig.obj.Signature().Results()
		fp.nresults = fp.results.Len()
	}
	return fp
}

// finish reports directives that contradict each other.
func (fp *funcParse) finish() {
	if fp.childAt != nil && fp.f.Acquire {
		d := fp.childAt
		fp.p.errorf("", d.pos, d.end,
			"//state:child and //state:acquire on %s contradict each other: a child needs no release of its own, it is released with its parent; keep one", fp.what)
		fp.f.Child = ""
	}
}

// directive parses one directive of the func.
func (fp *funcParse) directive(d *directive) {
	if !fp.accept(d) {
		return
	}
	switch d.verb {
	case "takes", "writes", "frees":
		names, onsuccess := fp.onSuccess(d)
		for _, a := range names {
			fp.param(d, a, onsuccess)
		}
		if len(d.args) == 0 {
			fp.p.errorf("", d.pos, d.end, "//state:%s on %s needs a parameter name; write //state:%s NAME", d.verb, fp.what, d.verb)
		}
		return
	case "child":
		fp.child(d)
		return
	case "acquire":
		if len(d.args) > 0 {
			fp.acquireArgs(d)
			return
		}
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

// onSuccess splits the arguments of //state:takes NAME... onsuccess into
// the names and the modifier, reporting the modifier where it cannot apply.
func (fp *funcParse) onSuccess(d *directive) ([]arg, bool) {
	n := len(d.args)
	if n < 2 || d.args[n-1].key != "" || d.args[n-1].value != "onsuccess" {
		return d.args, false
	}
	last := d.args[n-1]
	switch {
	case d.verb != "takes":
		fp.p.errorf("", last.pos, last.end, "onsuccess applies to //state:takes, not to //state:%s on %s; remove it", d.verb, fp.what)
		return d.args[:n-1], false
	case !fp.unknown && fp.obj() != nil && !lastIsError(fp.results):
		fp.p.errorf("", last.pos, last.end,
			"//state:takes ... onsuccess on %s: it has no error result, so it cannot take a parameter only on success; remove onsuccess", fp.what)
		return d.args[:n-1], false
	}
	return d.args[:n-1], true
}

// lastIsError reports whether the last of rs has type error.
func lastIsError(rs *types.Tuple) bool {
	return rs.Len() > 0 && isError(rs.At(rs.Len()-1).Type())
}

func isError(t types.Type) bool {
	return types.Identical(t, types.Universe.Lookup("error").Type())
}

// param records the parameter a names in //state:takes, //state:frees or
// //state:writes.
func (fp *funcParse) param(d *directive, a arg, onsuccess bool) {
	p, what := fp.p, fp.what
	if a.key != "" {
		p.errorf("", a.pos, a.end, "//state:%s on %s takes parameter names, not key=value; remove %s", d.verb, what, quote(a.key+"="+a.value))
		return
	}
	prm, ok := fp.params[a.value]
	if !ok && !fp.unknown {
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
	switch {
	case d.verb == "takes" && onsuccess:
		fp.f.TakesOnSuccess = append(fp.f.TakesOnSuccess, a.value)
	case d.verb == "takes":
		fp.f.Takes = append(fp.f.Takes, a.value)
	case d.verb == "frees":
		fp.f.Frees = append(fp.f.Frees, a.value)
	default:
		fp.f.Writes = append(fp.f.Writes, a.value)
	}
}

// child parses //state:child NAME: the first result belongs to parameter
// NAME, or to the receiver (recv).
func (fp *funcParse) child(d *directive) {
	p, what := fp.p, fp.what
	if fp.seen[d.verb] {
		p.errorf("", d.pos, d.end, "repeated //state:child on %s; keep one", what)
		return
	}
	fp.seen[d.verb] = true
	if len(d.args) != 1 || d.args[0].key != "" {
		p.errorf("", d.pos, d.end, "//state:child on %s needs one parameter name, or recv for the receiver; write //state:child NAME", what)
		return
	}
	a := d.args[0]
	switch {
	case fp.nresults == 0:
		p.errorf("", d.pos, d.end, "//state:child on %s: it returns nothing, but its first result must be the child", what)
		return
	case a.value == "recv":
		if !fp.method && !fp.unknown {
			p.errorf("", a.pos, a.end, "//state:child recv on %s: a plain func has no receiver; name the parameter the result belongs to", what)
			return
		}
	default:
		if _, ok := fp.params[a.value]; !ok && !fp.unknown {
			fp.noParam(d, a)
			return
		}
	}
	fp.f.Child = a.value
	fp.childAt = d
	fp.recorded = true
}

// acquireArgs parses //state:acquire N... [release=N]: the results that
// are each a new resource, and the result that releases them.
func (fp *funcParse) acquireArgs(d *directive) {
	p, what := fp.p, fp.what
	if fp.seen[d.verb] {
		p.errorf("", d.pos, d.end, "repeated //state:acquire on %s; keep one", what)
		return
	}
	fp.seen[d.verb] = true
	var idx []int
	rel := 0
	for _, a := range d.args {
		switch a.key {
		case "":
			n, ok := fp.resultIndex(a, a.value)
			if !ok {
				return
			}
			if slices.Contains(idx, n) {
				p.errorf("", a.pos, a.end, "repeated result %d in //state:acquire on %s; keep one", n, what)
				return
			}
			if fp.obj() != nil && isError(fp.results.At(n).Type()) {
				p.errorf("", a.pos, a.end, "//state:acquire %d on %s: result %d is its error, not a resource", n, what, n)
				return
			}
			idx = append(idx, n)
		case "release":
			n, ok := fp.resultIndex(a, a.value)
			if !ok {
				return
			}
			if fp.obj() != nil && !isReleaser(fp.results.At(n).Type()) {
				p.errorf("", a.pos, a.end, "//state:acquire release=%d on %s: result %d has type %s, not a func() that releases the resource",
					n, what, n, typeString(fp.results.At(n).Type(), p.pkg))
				return
			}
			rel = n + 1
		default:
			p.errorf("", a.pos, a.end, "unknown key %s in //state:acquire on %s; the only key is release=N, the result that releases the resource", quote(a.key), what)
			return
		}
	}
	if rel > 0 && slices.Contains(idx, rel-1) {
		p.errorf("", d.pos, d.end, "//state:acquire on %s: result %d cannot be both a resource and its releaser", what, rel-1)
		return
	}
	if rel > 0 && len(idx) == 0 && rel == 1 {
		p.errorf("", d.pos, d.end, "//state:acquire release=0 on %s: the first result is the resource; name the releaser's index", what)
		return
	}
	fp.f.Acquire = true
	if !(len(idx) == 1 && idx[0] == 0) {
		fp.f.Results = idx
	}
	fp.f.Releaser = rel
	fp.recorded = true
}

// resultIndex parses s, the 0-based index of a result.
func (fp *funcParse) resultIndex(a arg, s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		fp.p.errorf("", a.pos, a.end, "//state:acquire on %s takes result indices (0, 1, ...), and %s is not one", fp.what, quote(s))
		return 0, false
	}
	if fp.nresults >= 0 && !fp.unknown && n >= fp.nresults {
		fp.p.errorf("", a.pos, a.end, "//state:acquire on %s: result %d does not exist; it has %d results", fp.what, n, fp.nresults)
		return 0, false
	}
	return n, true
}

// isReleaser reports whether t is a func without parameters that returns
// nothing or an error.
func isReleaser(t types.Type) bool {
	sig, ok := t.Underlying().(*types.Signature)
	if !ok || sig.Params().Len() != 0 {
		return false
	}
	r := sig.Results()
	return r.Len() == 0 || r.Len() == 1 && isError(r.At(0).Type())
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
// appends, view, valid, errmap) after checking that it fits the declaration, and returns
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
				"//state:release applies to a method (it releases its receiver), and %s is a plain func; use //state:frees NAME for the parameter it releases", what)
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
	case "valid":
		if !fp.method && !fp.unknown {
			p.errorf("", d.pos, d.end, "//state:valid applies to a method (it reports whether its receiver holds a resource), and %s is a plain func", what)
			return false
		}
		if fp.obj() != nil && !(fp.results.Len() == 1 && isBool(fp.results.At(0).Type())) {
			p.errorf("", d.pos, d.end, "//state:valid on %s: it must return a single bool, true when the receiver holds a resource", what)
			return false
		}
		f.Valid = true
	case "errmap":
		if fp.obj() != nil && !errMapShape(fp.obj().Signature()) {
			p.errorf("", d.pos, d.end, "//state:errmap on %s: it must take an error and return an error as its first result (a nil error exactly when the argument is nil)", what)
			return false
		}
		f.ErrMap = true
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

// obj returns the function the directives are parsed for, or nil.
func (fp *funcParse) obj() *types.Func { return fp.f.obj }

// errMapShape reports whether sig takes an error and returns an error
// first.
func errMapShape(sig *types.Signature) bool {
	if sig.Results().Len() == 0 || !isError(sig.Results().At(0).Type()) {
		return false
	}
	for v := range sig.Params().Variables() {
		if isError(v.Type()) {
			return true
		}
	}
	return false
}

func isBool(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Kind() == types.Bool
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
