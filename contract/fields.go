package contract

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"reflect"
	"strings"
)

// sizes are the sizes of the gc compiler on amd64: element sizes in a
// contract do not depend on the machine that runs the analysis.
var sizes = types.SizesFor("gc", "amd64")

// maxRowBytes bounds the bytes of one row of one field.
const maxRowBytes = 1 << 40

// typeCheck checks that the state type is a concrete struct type and
// computes its fields.
func (cp *contractParse) typeCheck(ts *ast.TypeSpec, obj *types.TypeName, head *directive) {
	name := cp.name
	if ts.Assign.IsValid() {
		cp.errorf(head.pos, head.end, "state type %s is an alias; declare it as a defined struct type (type %s struct{...})", name, name)
		return
	}
	if ts.TypeParams != nil && len(ts.TypeParams.List) > 0 {
		cp.errorf(head.pos, head.end, "state type %s has type parameters; a state type must be a concrete struct type (declare one type per element type)", name)
		return
	}
	if obj == nil {
		// No type information: check the syntax only.
		cp.fieldNames = astFieldNames(ts)
		if _, ok := ts.Type.(*ast.StructType); !ok {
			cp.errorf(head.pos, head.end, "state type %s is not a struct type; declare it as type %s struct{ Field []Elem; ... }", name, name)
		}
		return
	}
	st, ok := obj.Type().Underlying().(*types.Struct)
	if !ok {
		cp.errorf(head.pos, head.end, "state type %s is not a struct type; declare it as type %s struct{ Field []Elem; ... }", name, name)
		return
	}
	if st.NumFields() == 0 {
		cp.errorf(head.pos, head.end, "state type %s has no fields; add one slice field per column (e.g. Keys []float32)", name)
		return
	}
	cp.typed, cp.elems = true, make(map[string]types.Type)
	for i := 0; i < st.NumFields(); i++ {
		cp.fieldNames = append(cp.fieldNames, st.Field(i).Name())
	}
	tags := tagLits(ts)
	for i := 0; i < st.NumFields(); i++ {
		cp.field(st.Field(i), st.Tag(i), tags[st.Field(i).Pos()], head)
	}
}

// tagLits maps the position of each field name in the struct type of ts to
// the field's tag literal, for fields that have one.
func tagLits(ts *ast.TypeSpec) map[token.Pos]*ast.BasicLit {
	m := make(map[token.Pos]*ast.BasicLit)
	st, ok := ts.Type.(*ast.StructType)
	if !ok || st.Fields == nil {
		return m
	}
	for _, f := range st.Fields.List {
		if f.Tag == nil {
			continue
		}
		for _, n := range f.Names {
			m[n.Pos()] = f.Tag
		}
	}
	return m
}

// field checks one field of a state type and records it. tag is the
// field's tag literal in this package's source, nil when it has none or the
// field was declared elsewhere (type T other.S).
func (cp *contractParse) field(v *types.Var, tag string, lit *ast.BasicLit, head *directive) {
	name := cp.name
	pos, end := v.Pos(), v.Pos()+token.Pos(len(v.Name()))
	if v.Pkg() != cp.p.pkg || !pos.IsValid() {
		pos, end = head.pos, head.end
	}
	if v.Embedded() {
		cp.errorf(pos, end, "embedded field %s in state type %s; state fields are named slices of fixed-size elements (e.g. %s []float32)", v.Name(), name, v.Name())
		return
	}
	if v.Name() == "_" {
		cp.errorf(pos, end, "blank field in state type %s; name the column or remove it", name)
		return
	}
	elem, size, ok := cp.element(v, pos, end)
	if !ok {
		return
	}
	if lit != nil {
		pos, end = lit.Pos(), lit.End()
	}
	width, ok := cp.width(v, tag, size, pos, end)
	if !ok {
		return
	}
	cp.elems[v.Name()] = elem
	cp.c.Fields = append(cp.c.Fields, Field{
		Name:     v.Name(),
		Elem:     typeString(elem, cp.p.pkg),
		ElemSize: size,
		Width:    width,
		RowBytes: size * int64(width),
	})
}

// element checks that field v is a slice of fixed-size elements and returns
// the element type and its size.
func (cp *contractParse) element(v *types.Var, pos, end token.Pos) (types.Type, int64, bool) {
	name := cp.name
	sl, ok := types.Unalias(v.Type()).Underlying().(*types.Slice)
	if !ok {
		cp.errorf(pos, end, "field %s of state type %s has type %s; state fields are slices of fixed-size elements (e.g. []float32, [][8]uint16)",
			v.Name(), name, typeString(v.Type(), cp.p.pkg))
		return nil, 0, false
	}
	elem := sl.Elem()
	if !fixedSize(elem) {
		cp.errorf(pos, end, "field %s of state type %s has element type %s, which is not fixed-size; use an integer or float type, a named type over one, or an array of them",
			v.Name(), name, typeString(elem, cp.p.pkg))
		return nil, 0, false
	}
	size := sizes.Sizeof(elem)
	if size <= 0 || size > maxRowBytes {
		cp.errorf(pos, end, "field %s of state type %s has an element of %d bytes; use an element of at least one byte and at most %d", v.Name(), name, size, int64(maxRowBytes))
		return nil, 0, false
	}
	return elem, size, true
}

// width reads the width of field v from its tag and checks it against the
// element size: a positive integer constant, evaluated like a bound, whose
// rows fit maxRowBytes. [pos, end) is the tag, or the field without one.
func (cp *contractParse) width(v *types.Var, tag string, size int64, pos, end token.Pos) (int, bool) {
	name := cp.name
	expr, msg := parseWidth(tag)
	if msg != "" {
		cp.errorf(pos, end, "field %s of state type %s: %s", v.Name(), name, msg)
		return 0, false
	}
	if expr == "" {
		return 1, true
	}
	// A field declared in another package is evaluated in that package's
	// scope: its imports are not in this package's files.
	evalPkg, evalPos := cp.p.pkg, pos
	if v.Pkg() != cp.p.pkg {
		evalPkg, evalPos = v.Pkg(), token.NoPos
	}
	w, msg := evalConst(evalPkg, evalPos, expr)
	if msg == "" && w <= 0 {
		msg = fmt.Sprintf("is %d", w)
	}
	if msg != "" {
		cp.errorf(pos, end, "field %s of state type %s: bad width %s in tag, which %s; write state:\"width=W\" with W a positive integer constant, the elements per row (128, Dim, 2*Dim, pkg.Dim)",
			v.Name(), name, quote(expr), msg)
		return 0, false
	}
	if w > maxRowBytes/size {
		cp.errorf(pos, end, "field %s of state type %s has rows of more than %d bytes (width %d of %d-byte elements); use a smaller width", v.Name(), name, int64(maxRowBytes), w, size)
		return 0, false
	}
	return int(w), true
}

// fixedSize reports whether t is an integer or float type, a named type
// over one, or an array of them.
func fixedSize(t types.Type) bool {
	switch u := types.Unalias(t).Underlying().(type) {
	case *types.Basic:
		info := u.Info()
		return info&(types.IsInteger|types.IsFloat) != 0 && info&(types.IsUntyped|types.IsComplex) == 0
	case *types.Array:
		return u.Len() > 0 && fixedSize(u.Elem())
	}
	return false
}

// parseWidth reads the state:"width=W" struct tag and returns the
// expression W, "" when the tag has no state key (a width of 1). Parts are
// separated by commas, so W may hold spaces (width=2 * Dim).
func parseWidth(tag string) (string, string) {
	val, ok := reflect.StructTag(tag).Lookup("state")
	if !ok {
		if strings.Contains(tag, "state:") {
			return "", fmt.Sprintf("malformed struct tag %s; write `state:\"width=W\"`", quote(tag))
		}
		return "", ""
	}
	width, seen := "", false
	for _, part := range strings.Split(val, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, hasEq := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if k != "width" {
			if s := nearest(k, []string{"width"}); s != "" {
				return "", fmt.Sprintf("unknown key %s in tag state:%s; did you mean %s?", k, quote(val), s)
			}
			return "", fmt.Sprintf("unknown key %s in tag state:%s; the only key is width=W", k, quote(val))
		}
		if seen {
			return "", "repeated width in tag; keep one"
		}
		seen = true
		v = strings.TrimSpace(v)
		if !hasEq || v == "" {
			return "", fmt.Sprintf("bad width %s in tag; write width=W with W a positive integer constant (elements per row)", quote(v))
		}
		width = v
	}
	if !seen {
		return "", fmt.Sprintf("tag state:%s has no width; write state:\"width=W\" or remove the tag", quote(val))
	}
	return width, ""
}

// typeString writes t relative to pkg as it is spelled in source: cgo's
// _Ctype_int32_t is C.int32_t.
func typeString(t types.Type, pkg *types.Package) string {
	return strings.ReplaceAll(types.TypeString(t, types.RelativeTo(pkg)), "_Ctype_", "C.")
}
