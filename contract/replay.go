package contract

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
)

// Replay is the policy of a //state:replay line: the history of the state
// keeps each step's input and step function instead of the rows it wrote,
// and past versions are rebuilt by running the steps again (docs/DIRECTIVES.md).
type Replay struct {
	Input  string  // the input type, a struct type of the package
	Verify bool    // verify=hash: each step records a hash of the rows it produced
	Fields []Field // the input type's fields, in declaration order
}

// replay parses //state:replay input=T [verify=hash]. T is checked against
// the package's types once the lines are read (replayCheck).
func (cp *contractParse) replay(d *directive) {
	name := cp.name
	words, kv := cp.split(d, "input", "verify")
	cp.noWords(d, words, "input=T, optionally verify=hash")
	r := &Replay{}
	if v, ok := kv["verify"]; ok && cp.enumValue(d, v, "hash") == "hash" {
		r.Verify = true
	}
	in, ok := kv["input"]
	switch {
	case !ok && cp.misspelt["input"]:
	case !ok:
		cp.errorf(d.pos, d.end,
			"//state:replay of %s needs input=T, the struct type of one step's input (rows of fixed-size fields, like a state type's)", name)
	case in.quoted || !token.IsIdentifier(in.value):
		cp.errorf(in.valPos, in.end,
			"input %s in //state:replay of %s is not a type name; write input=T with T a struct type declared in this package", quote(in.value), name)
	default:
		r.Input = in.value
		cp.replayInput = &in
	}
	cp.c.Replay = r
}

// replayCrossCheck reports a replay line on a state that cannot replay:
// steps rewrite rows in place (mutable growth), and replay seeds from a
// checkpoint.
func (cp *contractParse) replayCrossCheck() {
	d, c := cp.seen["replay"], cp.c
	if d == nil {
		return
	}
	if c.Growth == GrowthAppend {
		cp.errorf(d.pos, d.end,
			"//state:replay of %s needs mutable growth: a step rewrites the rows of the state in place; remove the replay line or use //state:growth mutable bound=N", cp.name)
	}
	if cp.seen["checkpoint"] == nil && !cp.spaced["checkpoint"] {
		cp.errorf(d.pos, d.end,
			"//state:replay of %s needs a //state:checkpoint line: replay seeds from a checkpoint and runs the steps after it; add //state:checkpoint every=N keep=K", cp.name)
	}
}

// replayCheck checks the input type of the replay line: a struct type of
// the package whose fields follow the rules of a state type's fields.
// Every fault is reported at the line's input=T, where the remedy is
// chosen. It runs after typeCheck; without type information it checks
// nothing.
func (cp *contractParse) replayCheck() {
	a := cp.replayInput
	if a == nil || cp.p.pkg == nil {
		return
	}
	name, in := cp.name, a.value
	at := func(format string, args ...any) {
		cp.errorf(a.valPos, a.end, "input %s in //state:replay of %s %s", in, name, fmt.Sprintf(format, args...))
	}
	obj := cp.p.pkg.Scope().Lookup(in)
	tn, ok := obj.(*types.TypeName)
	if !ok {
		switch {
		case obj == nil && types.Universe.Lookup(in) != nil:
			elem := map[string]string{"int": "int64", "uint": "uint64", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
				"uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "float64": "float64", "byte": "byte", "rune": "rune"}[in]
			at("is a predeclared type, not a struct type of the package; declare type %sInput struct{ X []%s } beside %s and name it", name, cmp.Or(elem, "float32"), name)
		case obj == nil:
			at("names no type of the package; declare type %s struct{ Field []Elem } beside %s", in, name)
		default:
			at("is not a type; name a struct type declared in this package")
		}
		return
	}
	if in == name {
		at("is the state type itself; declare a separate struct type for one step's input")
		return
	}
	if tn.IsAlias() {
		at("is an alias; declare it as a defined struct type (type %s struct{...})", in)
		return
	}
	if named, ok := tn.Type().(*types.Named); ok && named.TypeParams().Len() > 0 {
		at("has type parameters; declare a concrete struct type")
		return
	}
	st, ok := tn.Type().Underlying().(*types.Struct)
	if !ok {
		at("is not a struct type; declare it as type %s struct{ Field []Elem; ... }", in)
		return
	}
	if st.NumFields() == 0 {
		at("has no fields; add one slice field per column of the input (e.g. X []float32)")
		return
	}
	tags := inputTagLits(cp.p, tn)
	fields := make([]Field, 0, st.NumFields())
	for i := range st.NumFields() {
		f, msg := cp.inputField(st.Field(i), st.Tag(i), tags)
		if msg != "" {
			at("has %s", msg)
			return
		}
		fields = append(fields, f)
	}
	cp.c.Replay.Fields = fields
}

// inputField checks one field of an input type as typeCheck checks a state
// type's, and returns it or what is wrong with it.
func (cp *contractParse) inputField(v *types.Var, tag string, tags map[token.Pos]*ast.BasicLit) (Field, string) {
	pkg := cp.p.pkg
	switch {
	case v.Embedded():
		return Field{}, fmt.Sprintf("embedded field %s; input fields are named slices of fixed-size elements (e.g. %s []float32)", v.Name(), v.Name())
	case v.Name() == "_":
		return Field{}, "a blank field; name the column or remove it"
	}
	sl, ok := types.Unalias(v.Type()).Underlying().(*types.Slice)
	if !ok {
		return Field{}, fmt.Sprintf("field %s of type %s; input fields are slices of fixed-size elements (e.g. []float32, [][8]uint16)", v.Name(), typeString(v.Type(), pkg))
	}
	elem := sl.Elem()
	if !fixedSize(elem) {
		return Field{}, fmt.Sprintf("field %s of element type %s, which is not fixed-size; use an integer or float type, a named type over one, or an array of them", v.Name(), typeString(elem, pkg))
	}
	size := sizes.Sizeof(elem)
	if size <= 0 || size > maxRowBytes {
		return Field{}, fmt.Sprintf("field %s with an element of %d bytes; use an element of at least one byte and at most %d", v.Name(), size, int64(maxRowBytes))
	}
	expr, msg := parseWidth(tag)
	if msg != "" {
		return Field{}, fmt.Sprintf("field %s: %s", v.Name(), msg)
	}
	w := int64(1)
	if expr != "" {
		pos := token.NoPos
		if lit := tags[v.Pos()]; lit != nil && v.Pkg() == pkg {
			pos = lit.Pos()
		}
		w, msg = evalConst(v.Pkg(), pos, expr)
		if msg == "" && w <= 0 {
			msg = fmt.Sprintf("is %d", w)
		}
		if msg == "" && w > maxRowBytes/size {
			msg = "makes rows too large"
		}
		if msg != "" {
			return Field{}, fmt.Sprintf("field %s with bad width %s in its tag, which %s; write state:\"width=W\" with W a positive integer constant", v.Name(), quote(expr), msg)
		}
	}
	return Field{Name: v.Name(), Elem: typeString(elem, pkg), ElemSize: size, Width: int(w), RowBytes: size * w}, ""
}

// inputTagLits returns the tag literals of the struct type that declares
// tn, found in the package's files; empty when tn is not declared in them.
func inputTagLits(p *pkgParser, tn *types.TypeName) map[token.Pos]*ast.BasicLit {
	for _, f := range p.files {
		if f.FileStart > tn.Pos() || tn.Pos() > f.FileEnd {
			continue
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range gd.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Pos() == tn.Pos() {
					return tagLits(ts)
				}
			}
		}
	}
	return nil
}
