package contract

import (
	"fmt"
	"go/ast"
	"go/types"
	"strings"
)

// share parses //state:share prefix key=FIELD. The key names a field, so
// it is checked against the fields once the type is checked (shareCheck);
// the growth law and the window, once every line is read (crossCheck).
func (cp *contractParse) share(d *directive) {
	name := cp.name
	words, kv := cp.split(d, "key")
	cp.enumWord(d, words, "a sharing mode", "prefix")
	key, ok := kv["key"]
	switch {
	case !ok && cp.misspelt["key"]:
	case !ok:
		cp.errorf(d.pos, d.end,
			"//state:share of %s needs key=FIELD, the integer field whose values identify a prefix (e.g. key=Tokens)", name)
	case key.value == "":
		cp.errorf(key.pos, key.end,
			"empty key= in //state:share of %s; name the integer field whose values identify a prefix (e.g. key=Tokens)", name)
	default:
		// Checked whatever the mode, so that every fault shows at once.
		cp.shareKey = &key
	}
}

// shareCrossCheck reports a share line on a state whose growth cannot
// share its prefix: shared blocks are read only and must stay readable.
func (cp *contractParse) shareCrossCheck() {
	d, c := cp.seen["share"], cp.c
	if d == nil {
		return
	}
	switch {
	case c.Growth == GrowthMutable:
		cp.errorf(d.pos, d.end,
			"//state:share of %s needs append growth: shared blocks are read only, and a mutable state writes its rows in place; remove the share line or use //state:growth append bound=N", cp.name)
	case c.Window > 0:
		cp.errorf(d.pos, d.end,
			"//state:share of %s cannot share the prefix of a window: rows below the window expire, and a shared prefix must stay readable; remove the share line or use bound=N", cp.name)
	}
}

// shareCheck checks the key of the share line against the type's fields:
// a field of a sized integer element type (int8 to int64, uint8 to
// uint64, or a type over one), one element per row. It runs after
// typeCheck, which records the fields; a field typeCheck rejected was
// reported at the field and is not reported again here.
func (cp *contractParse) shareCheck() {
	a := cp.shareKey
	if a == nil {
		return
	}
	name := cp.name
	if !isIn(a.value, cp.fieldNames) {
		if len(cp.fieldNames) == 0 {
			return // reported at the //state:contract line: no fields, not a struct
		}
		if s := nearestField(a.value, cp.fieldNames); s != "" {
			cp.fix(a.valPos, a.end, []Fix{{
				Message: fmt.Sprintf("replace %s with %s", a.value, s),
				Edits:   []Edit{{Pos: a.valPos, End: a.end, NewText: s}},
			}}, "share key %s of %s names no field of %s; did you mean %s?", quote(a.value), name, name, s)
			return
		}
		cp.errorf(a.valPos, a.end, "share key %s of %s names no field of %s; use one of %s",
			quote(a.value), name, name, strings.Join(cp.fieldNames, ", "))
		return
	}
	if !cp.typed {
		cp.c.ShareKey = a.value // no type information: the name is all there is to check
		return
	}
	elem, ok := cp.elems[a.value]
	if !ok {
		return // a field rejected, and reported, at the field
	}
	var f Field
	for _, x := range cp.c.Fields {
		if x.Name == a.value {
			f = x
		}
	}
	switch {
	case !sizedInteger(elem):
		cp.errorf(a.valPos, a.end,
			"share key %s of %s has element type %s; a key is a sized integer (int8 to int64, uint8 to uint64, or a type over one), such as a token id: key on such a field",
			a.value, name, f.Elem)
	case f.Width != 1:
		cp.errorf(a.valPos, a.end,
			"share key %s of %s has width %d; a key is one value per row: key on a field of width 1 (no width tag)", a.value, name, f.Width)
	default:
		cp.c.ShareKey = a.value
	}
}

// sizedInteger reports whether t is int8 to int64, uint8 to uint64, or a
// named type over one: a key whose bytes mean the same on every platform.
func sizedInteger(t types.Type) bool {
	b, ok := types.Unalias(t).Underlying().(*types.Basic)
	if !ok {
		return false
	}
	switch b.Kind() {
	case types.Int8, types.Int16, types.Int32, types.Int64, types.Uint8, types.Uint16, types.Uint32, types.Uint64:
		return true
	}
	return false
}

// nearestField returns the field name closest to word, ignoring case, or
// "" when none is close enough to be a misspelling.
func nearestField(word string, names []string) string {
	lower := make([]string, len(names))
	for i, n := range names {
		lower[i] = strings.ToLower(n)
	}
	s := nearest(word, lower)
	for i, l := range lower {
		if s != "" && l == s {
			return names[i]
		}
	}
	return ""
}

// astFieldNames returns the names of the fields of the struct type of ts,
// for a package parsed without type information.
func astFieldNames(ts *ast.TypeSpec) []string {
	st, ok := ts.Type.(*ast.StructType)
	if !ok || st.Fields == nil {
		return nil
	}
	var out []string
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			out = append(out, n.Name)
		}
	}
	return out
}
