package contract

import (
	"fmt"
	"go/token"
	"go/types"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Extern is one //state:extern line: a function directive for a func or
// method the user cannot annotate (a third-party binding), named by its full
// name. It holds in the package that declares it and in every package that
// imports that package. It is gob-encodable, so that it travels as a fact.
type Extern struct {
	// Name is the key call sites are matched by: "pkg/path.F" for a func,
	// "pkg/path.T.M" for a method of T or *T or of the interface T (see
	// ExternName).
	Name string
	Pos  token.Pos // the //state:extern line
	// Func holds the one directive of the line; Func.Name is the full name
	// as written.
	Func Func
	// Resolved says the name was found in a package among the declaring
	// package's dependencies (else it names a package it does not import).
	Resolved bool
}

// externVerb is the verb of an extern line.
const externVerb = "extern"

// placedVerbs are the verbs a //state: line outside a doc comment may be
// a look-alike of.
var placedVerbs = append(append([]string{}, allVerbs...), externVerb)

// ExternName returns the name extern lines use for fn: "pkg/path.F" for a
// func, "pkg/path.T.M" for a method of T, *T or the interface T, of the
// generic declaration for an instance. It returns "" for a func extern
// lines cannot name (a method of an unnamed or function-local type, a func
// without a package).
func ExternName(fn *types.Func) string {
	if fn == nil || fn.Pkg() == nil {
		return ""
	}
	fn = fn.Origin()
	sig, ok := fn.Type().(*types.Signature)
	if !ok {
		return ""
	}
	recv := sig.Recv()
	if recv == nil {
		return fn.Pkg().Path() + "." + fn.Name()
	}
	t := types.Unalias(recv.Type())
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Parent() != n.Obj().Pkg().Scope() {
		return ""
	}
	return fn.Pkg().Path() + "." + n.Obj().Name() + "." + fn.Name()
}

// externPath is one reading of the full name of an extern line: which
// package, receiver type and func it names, with offsets in the token.
type externPath struct {
	pkg, recv, name string
	ptr             bool // written (*T).M
	recvOff         int  // offset of recv in the token
	nameOff         int  // offset of name in the token
	pkgEnd          int  // offset of the dot after the package path
}

func (x externPath) key() string {
	if x.recv == "" {
		return x.pkg + "." + x.name
	}
	return x.pkg + "." + x.recv + "." + x.name
}

// parseExternPath returns the readings of s, a full name written as Go
// names symbols (pkg/path.F, pkg/path.T.M, pkg/path.(*T).M): one for each
// dot after the last slash that can end the package path (the last element
// of a path may hold dots, as in gopkg.in/yaml.v3), first dot first. It
// returns none when s is malformed, with the reason.
func parseExternPath(s string) ([]externPath, string) {
	slash := strings.LastIndexByte(s, '/')
	var out []externPath
	for i := slash + 1; i < len(s); i++ {
		if s[i] != '.' {
			continue
		}
		if strings.HasPrefix(s[i+1:], ".") {
			break
		}
		if x, ok := externRest(s[i+1:], i+1); ok {
			x.pkg = strings.ReplaceAll(s[:i], "%2e", ".")
			x.pkgEnd = i
			if validPkgPath(x.pkg) {
				out = append(out, x)
			}
		}
	}
	if len(out) > 0 {
		return out, ""
	}
	if strings.ContainsAny(s, "()*") || strings.Count(s[slash+1:], ".") > 0 {
		return nil, "write pkg/path.Func, pkg/path.Type.Method or pkg/path.(*Type).Method"
	}
	return nil, "it names no package; write pkg/path.Func, pkg/path.Type.Method or pkg/path.(*Type).Method"
}

// externRest parses what follows the package path: F, T.M or (*T).M. off is
// the offset of rest in the token.
func externRest(rest string, off int) (externPath, bool) {
	var x externPath
	switch {
	case strings.HasPrefix(rest, "(*"):
		i := strings.Index(rest, ").")
		if i < 0 {
			return x, false
		}
		x.recv, x.name, x.ptr = rest[2:i], rest[i+2:], true
		x.recvOff, x.nameOff = off+2, off+i+2
	case strings.Contains(rest, "."):
		i := strings.IndexByte(rest, '.')
		x.recv, x.name = rest[:i], rest[i+1:]
		x.recvOff, x.nameOff = off, off+i+1
	default:
		x.name, x.nameOff = rest, off
	}
	if !token.IsIdentifier(x.name) || x.name == "_" || x.recv != "" && !token.IsIdentifier(x.recv) {
		return x, false
	}
	return x, true
}

// validPkgPath reports whether s can be an import path.
func validPkgPath(s string) bool {
	if s == "" {
		return false
	}
	for _, el := range strings.Split(s, "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
		for _, r := range el {
			if !(r == '-' || r == '.' || r == '_' || r == '~' || r == '+' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
				return false
			}
		}
	}
	return true
}

// externInDoc reports an extern line inside the doc comment of a
// declaration, and returns whether d is one.
func (p *pkgParser) externInDoc(d *directive, typ, what string) bool {
	if d.verb != externVerb {
		return false
	}
	p.errorf(typ, d.pos, d.end,
		"//state:extern is a line of its own, outside any doc comment, and here it is in the doc comment of %s; separate it from the declaration by a blank line", what)
	return true
}

// extern parses a free-standing //state:extern VERB [NAME...] PATH line.
func (p *pkgParser) extern(d *directive) {
	const what = "//state:extern"
	if p.claimsDurability(d, "", "the extern line") {
		return
	}
	if d.argErr != nil {
		p.errorf("", d.argErr.pos, d.argErr.end, "malformed argument in %s: %s", what, d.argErr.msg)
		return
	}
	for i, a := range d.args {
		if a.key != "" && !(a.key == "release" && i > 0 && d.args[0].key == "" && d.args[0].value == "acquire") {
			p.errorf("", a.pos, a.end, "%s takes a directive, parameter names and a full name, not key=value; remove %s", what, quote(a.key+"="+a.value))
			return
		}
	}
	if len(d.args) == 0 {
		p.errorf("", d.pos, d.end, "%s needs a directive and the full name of a func or method; write e.g. //state:extern acquire example.com/gpu.Open", what)
		return
	}
	verb := d.args[0]
	if !p.externVerbOK(verb) {
		return
	}
	if len(d.args) == 1 {
		p.errorf("", d.pos, d.end, "%s %s needs the full name of a func or method; write e.g. //state:extern %s example.com/gpu.(*Buf).M", what, verb.value, verb.value)
		return
	}
	path, names := d.args[len(d.args)-1], d.args[1:len(d.args)-1]
	xs, why := parseExternPath(path.value)
	if len(xs) == 0 {
		p.errorf("", path.pos, path.end, "malformed full name %s in %s: %s", quote(path.value), what, why)
		return
	}
	onsuccess := false
	if n := len(names); verb.value == "takes" && n > 1 && names[n-1].key == "" && names[n-1].value == "onsuccess" {
		names, onsuccess = names[:n-1], true
	}
	named := verb.value == "takes" || verb.value == "writes" || verb.value == "frees" || verb.value == "child"
	switch {
	case named && len(names) == 0:
		p.errorf("", verb.pos, verb.end, "%s %s needs a parameter name before the full name; write //state:extern %s NAME %s", what, verb.value, verb.value, path.value)
		return
	case !named && len(names) > 0 && (verb.value != "acquire" || !slices.ContainsFunc(names, isIndex)):
		p.errorf("", names[0].pos, names[len(names)-1].end, "%s %s takes no parameter names; remove %s", what, verb.value, quote(names[0].value))
		return
	case verb.value == "child" && len(names) > 1:
		p.errorf("", names[1].pos, names[len(names)-1].end, "%s child takes one parameter name, or recv; remove %s", what, quote(names[1].value))
		return
	}
	e := &Extern{Name: xs[0].key(), Pos: d.pos, Func: Func{Name: path.value, Pos: d.pos}}
	r := p.resolveExtern(path, xs)
	switch {
	case r.fn != nil:
		if !p.externFits(r.fn, verb, names, path) {
			return
		}
		e.Name, e.Resolved = ExternName(r.fn), true
		e.Func.obj = r.fn
	case r.missing:
		return
	case !slices.ContainsFunc(xs, func(x externPath) bool { return x.recv != "" }) && needsMethod(verb.value):
		p.errorf("", verb.pos, verb.end, "%s %s applies to a method, and %s names a plain func", what, verb.value, path.value)
		return
	}
	if !p.externDirective(e, r.fn, verb, names, path) {
		return
	}
	if onsuccess {
		if r.fn != nil && !lastIsError(r.fn.Signature().Results()) {
			last := d.args[len(d.args)-2]
			p.errorf("", last.pos, last.end,
				"%s takes ... onsuccess on %s: it has no error result, so it cannot take a parameter only on success; remove onsuccess", what, path.value)
			return
		}
		verb.value = "takes onsuccess"
	}
	p.recordExtern(e, verb, names)
}

// externDirective checks and records, through the parser of doc
// directives, the verbs of an extern line whose arguments are more than
// parameter names (acquire N... release=N, child, valid, errmap) on e,
// against fn's signature (nil: unknown), and reports whether it applies.
func (p *pkgParser) externDirective(e *Extern, fn *types.Func, verb arg, names []arg, path arg) bool {
	switch verb.value {
	case "acquire", "child", "valid", "errmap":
	default:
		return true
	}
	sig := funcSig{name: path.value, obj: fn}
	if fn != nil {
		sig.method = fn.Signature().Recv() != nil
	}
	d := &directive{verb: verb.value, pos: verb.pos, end: verb.end, verbPos: verb.pos, verbEnd: verb.end, args: names}
	if len(names) > 0 {
		d.end = names[len(names)-1].end
	}
	fp := newFuncParse(p, sig, d)
	fp.what = path.value
	if fn == nil {
		fp.unknown, fp.nresults = true, -1
	}
	ndiag := len(p.out.Diagnostics)
	fp.directive(d)
	if len(p.out.Diagnostics) > ndiag || !fp.recorded {
		return false
	}
	f := &e.Func
	f.Results, f.Releaser, f.Child, f.Valid, f.ErrMap = fp.f.Results, fp.f.Releaser, fp.f.Child, fp.f.Valid, fp.f.ErrMap
	return true
}

// externVerbOK reports a verb that is no function directive, and returns
// whether verb is one.
func (p *pkgParser) externVerbOK(verb arg) bool {
	v := verb.value
	switch {
	case isIn(v, funcVerbs):
		return true
	case isIn(v, typeVerbs) || v == externVerb:
		p.errorf("", verb.pos, verb.end,
			"//state:extern carries a function directive (%s), and %s is not one", strings.Join(funcVerbs, ", "), v)
	default:
		if s := nearest(v, funcVerbs); s != "" {
			p.report(StContract, "", verb.pos, verb.end, []Fix{{
				Message: fmt.Sprintf("replace %s with %s", v, s),
				Edits:   []Edit{{Pos: verb.pos, End: verb.end, NewText: s}},
			}}, "unknown directive %s in //state:extern; did you mean %s?", quote(v), s)
		} else {
			p.errorf("", verb.pos, verb.end, "unknown directive %s in //state:extern; use one of %s", quote(v), strings.Join(funcVerbs, ", "))
		}
	}
	return false
}

func needsMethod(verb string) bool {
	return verb == "release" || verb == "mutates" || verb == "appends" || verb == "view" || verb == "valid"
}

// recordExtern adds e, with the directive of verb and names, to the
// package, reporting a line repeated for the same target.
func (p *pkgParser) recordExtern(e *Extern, verb arg, names []arg) {
	f := &e.Func
	switch verb.value {
	case "acquire":
		f.Acquire = true
	case "release":
		f.Release = true
	case "mutates":
		f.Mutates = true
	case "appends":
		f.Mutates, f.Appends = true, true
	case "view":
		f.View = true
	case "takes":
		f.Takes = argValues(names)
	case "takes onsuccess":
		f.TakesOnSuccess = argValues(names)
	case "frees":
		f.Frees = argValues(names)
	case "child", "valid", "errmap":
		// recorded by externDirective
	case "writes":
		f.Writes = argValues(names)
	}
	for _, prev := range p.out.Externs {
		if prev.Name == e.Name && externVerbOf(&prev.Func) == externVerbOf(f) && slices.Equal(prev.Func.Takes, f.Takes) && slices.Equal(prev.Func.Writes, f.Writes) &&
			slices.Equal(prev.Func.Frees, f.Frees) && slices.Equal(prev.Func.TakesOnSuccess, f.TakesOnSuccess) && prev.Func.Child == f.Child {
			p.errorf("", e.Pos, e.Pos+token.Pos(len("//state:extern")),
				"repeated //state:extern %s for %s (first at line %d); keep one", verb.value, e.Name, p.line(prev.Pos))
			return
		}
	}
	p.out.Externs = append(p.out.Externs, e)
}

// externVerbOf returns the verb an extern record carries.
func externVerbOf(f *Func) string {
	switch {
	case f.Acquire:
		return "acquire"
	case f.Release:
		return "release"
	case f.Appends:
		return "appends"
	case f.Mutates:
		return "mutates"
	case f.View:
		return "view"
	case len(f.Takes) > 0:
		return "takes"
	case len(f.TakesOnSuccess) > 0:
		return "takes onsuccess"
	case len(f.Frees) > 0:
		return "frees"
	case f.Child != "":
		return "child"
	case f.Valid:
		return "valid"
	case f.ErrMap:
		return "errmap"
	}
	return "writes"
}

// isIndex reports whether a is a result index or a key=value argument:
// not a parameter name.
func isIndex(a arg) bool {
	if a.key != "" {
		return true
	}
	_, err := strconv.Atoi(a.value)
	return err == nil
}

func argValues(as []arg) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.value
	}
	return out
}

// dependencies returns the packages pkg imports, directly or not, by path.
func dependencies(pkg *types.Package) map[string]*types.Package {
	deps := map[string]*types.Package{pkg.Path(): pkg}
	stack := []*types.Package{pkg}
	for len(stack) > 0 {
		q := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, imp := range q.Imports() {
			if deps[imp.Path()] == nil {
				deps[imp.Path()] = imp
				stack = append(stack, imp)
			}
		}
	}
	return deps
}

// sortedNames returns the names of a scope that pass keep, sorted.
func sortedNames(scope *types.Scope, keep func(types.Object) bool) []string {
	var out []string
	for _, n := range scope.Names() {
		if keep(scope.Lookup(n)) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
