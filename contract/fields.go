package contract

import (
	"fmt"
	"go/token"
	"go/types"
	"reflect"
	"strconv"
	"strings"
)

// sizes are the sizes of the gc compiler on amd64: element sizes in a
// contract do not depend on the machine that runs the analysis.
var sizes = types.SizesFor("gc", "amd64")

// maxRowBytes bounds the bytes of one row of one field.
const maxRowBytes = 1 << 40

// field checks one field of a state type and records it.
func (cp *contractParse) field(v *types.Var, tag string, head *directive) {
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
	sl, ok := types.Unalias(v.Type()).Underlying().(*types.Slice)
	if !ok {
		cp.errorf(pos, end, "field %s of state type %s has type %s; state fields are slices of fixed-size elements (e.g. []float32, [][8]uint16)",
			v.Name(), name, typeString(v.Type(), cp.p.pkg))
		return
	}
	elem := sl.Elem()
	if !fixedSize(elem) {
		cp.errorf(pos, end, "field %s of state type %s has element type %s, which is not fixed-size; use an integer or float type, a named type over one, or an array of them",
			v.Name(), name, typeString(elem, cp.p.pkg))
		return
	}
	size := sizes.Sizeof(elem)
	if size <= 0 || size > maxRowBytes {
		cp.errorf(pos, end, "field %s of state type %s has an element of %d bytes; use an element of at least one byte and at most %d", v.Name(), name, size, int64(maxRowBytes))
		return
	}
	width, msg := parseWidth(tag)
	if msg != "" {
		cp.errorf(pos, end, "field %s of state type %s: %s", v.Name(), name, msg)
		return
	}
	if int64(width) > maxRowBytes/size {
		cp.errorf(pos, end, "field %s of state type %s has rows of more than %d bytes; use a smaller width", v.Name(), name, int64(maxRowBytes))
		return
	}
	cp.c.Fields = append(cp.c.Fields, Field{
		Name:     v.Name(),
		Elem:     typeString(elem, cp.p.pkg),
		ElemSize: size,
		Width:    width,
		RowBytes: size * int64(width),
	})
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

// parseWidth reads the state:"width=W" struct tag; W defaults to 1.
func parseWidth(tag string) (int, string) {
	val, ok := reflect.StructTag(tag).Lookup("state")
	if !ok {
		if strings.Contains(tag, "state:") {
			return 0, fmt.Sprintf("malformed struct tag %s; write `state:\"width=W\"`", quote(tag))
		}
		return 1, ""
	}
	width, seen := 1, false
	for _, part := range strings.FieldsFunc(val, func(r rune) bool { return r == ',' || r == ' ' }) {
		k, v, hasEq := strings.Cut(part, "=")
		if k != "width" {
			if s := nearest(k, []string{"width"}); s != "" {
				return 0, fmt.Sprintf("unknown key %s in tag state:%s; did you mean %s?", k, quote(val), s)
			}
			return 0, fmt.Sprintf("unknown key %s in tag state:%s; the only key is width=W", k, quote(val))
		}
		if seen {
			return 0, "repeated width in tag; keep one"
		}
		seen = true
		n, err := strconv.Atoi(v)
		if !hasEq || err != nil || n <= 0 {
			return 0, fmt.Sprintf("bad width %s in tag; write width=W with W a positive integer (elements per row)", quote(v))
		}
		width = n
	}
	if !seen {
		return 0, fmt.Sprintf("tag state:%s has no width; write state:\"width=W\" or remove the tag", quote(val))
	}
	return width, ""
}

// typeString writes t relative to pkg as it is spelled in source: cgo's
// _Ctype_int32_t is C.int32_t.
func typeString(t types.Type, pkg *types.Package) string {
	return strings.ReplaceAll(types.TypeString(t, types.RelativeTo(pkg)), "_Ctype_", "C.")
}
