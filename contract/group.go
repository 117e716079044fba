package contract

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
)

// Group is the parse of a //state:group type: state types of one package
// that move together (docs/GUIDE.md, "Coupled state"). Like Contract it is
// gob-encodable (exported fields, no maps).
type Group struct {
	Type    string    // the named struct type
	Pos     token.Pos // the //state:group line
	Purpose string    // the purpose="..." of the group line
	Owner   string    // the owner kind, every member's
	Members []Member  // the struct's fields, in declaration order
	// Valid: no stcontract diagnostics for the group, and every member's
	// contract is valid.
	Valid bool

	obj *types.TypeName
}

// Member is one field of a group: a state type of the group's package.
type Member struct {
	Name string    // the field's name: the name of the group's accessor
	Type string    // the state type
	Pos  token.Pos // the field
}

// Object returns the group's type, or nil when the record was decoded from
// a fact or parsed without type information.
func (g *Group) Object() *types.TypeName { return g.obj }

// Contract returns the contract of member m in pkg, nil when none.
func (pkg *Package) Contract(typ string) *Contract {
	for _, c := range pkg.Contracts {
		if c.Type == typ {
			return c
		}
	}
	return nil
}

// groupParse holds a group between its lines (read with the file) and
// its members (checked once every contract of the package is known).
type groupParse struct {
	g      *Group
	ts     *ast.TypeSpec
	head   *directive
	fields []groupField
	start  int // index of the group's first diagnostic
	// notStruct: the group is no plain struct type (reported at its line).
	notStruct bool
}

// groupField is one field of a group's struct, as written.
type groupField struct {
	name     string
	typ      ast.Expr
	pos, end token.Pos
	embedded bool
}

// groupVerbs are the directives a group's doc comment takes.
var groupVerbs = []string{"group", "owner"}

// group parses the doc comment of a //state:group type: the group line,
// its owner, and its fields as written. Members are checked by
// checkGroups, once the package's contracts are known.
func (p *pkgParser) group(ts *ast.TypeSpec, obj *types.TypeName, dirs []*directive, head *directive, spaced map[string]bool, start int) {
	name := ts.Name.Name
	gp := &groupParse{g: &Group{Type: name, Pos: head.pos, obj: obj}, ts: ts, head: head, start: start}
	cp := &contractParse{p: p, c: &Contract{Type: name}, name: name, seen: make(map[string]*directive), spaced: spaced}
	for _, d := range dirs {
		if p.claimsDurability(d, name, "group "+name) {
			continue
		}
		switch {
		case isIn(d.verb, funcVerbs):
			cp.errorf(d.pos, d.end, "//state:%s applies to a func or method, not to group %s; move it to the doc comment of the func", d.verb, name)
			continue
		case isIn(d.verb, typeVerbs) && !isIn(d.verb, groupVerbs):
			cp.errorf(d.pos, d.end,
				"//state:%s on group %s: a group takes only //state:group and //state:owner, and each member keeps its own contract; move the line to the members' state types", d.verb, name)
			continue
		case !isIn(d.verb, typeVerbs):
			p.unknownVerb(d, name, "group "+name, groupVerbs)
			continue
		}
		if prev := cp.seen[d.verb]; prev != nil {
			cp.errorf(d.pos, d.end, "repeated //state:%s on group %s (first at line %d); keep one", d.verb, name, p.line(prev.pos))
			continue
		}
		cp.seen[d.verb] = d
		if d.argErr != nil {
			cp.errorf(d.argErr.pos, d.argErr.end, "malformed argument in //state:%s of %s: %s", d.verb, name, d.argErr.msg)
			continue
		}
		if d.verb == "group" {
			words, kv := cp.split(d, "purpose")
			cp.noWords(d, words, `purpose="..."`)
			gp.g.Purpose = kv["purpose"].value
			continue
		}
		cp.owner(d)
		gp.g.Owner = cp.c.Owner
	}
	if cp.seen["owner"] == nil && !spaced["owner"] {
		cp.errorf(head.pos, head.end,
			"group %s has no //state:owner line; add //state:owner KIND, the owner kind of its members", name)
	}
	gp.fields = groupFields(ts)
	if _, ok := ts.Type.(*ast.StructType); !ok || ts.Assign.IsValid() || ts.TypeParams != nil && len(ts.TypeParams.List) > 0 {
		cp.errorf(head.pos, head.end,
			"group %s is not a struct type; declare it as type %s struct{ A StateA; B StateB }, one field per member", name, name)
		gp.notStruct = true
	}
	p.groups = append(p.groups, gp)
}

// groupFields returns the fields of the struct type of ts, as written.
func groupFields(ts *ast.TypeSpec) []groupField {
	st, ok := ts.Type.(*ast.StructType)
	if !ok || st.Fields == nil {
		return nil
	}
	var out []groupField
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 {
			out = append(out, groupField{typ: f.Type, pos: f.Type.Pos(), end: f.Type.End(), embedded: true})
			continue
		}
		for _, n := range f.Names {
			out = append(out, groupField{name: n.Name, typ: f.Type, pos: n.Pos(), end: n.End()})
		}
	}
	return out
}

// checkGroups checks the members of every group of the package, now that
// its contracts are known, and records the groups.
func (p *pkgParser) checkGroups() {
	for _, gp := range p.groups {
		p.checkGroup(gp)
		g := gp.g
		g.Valid = true
		for _, d := range p.out.Diagnostics[gp.start:] {
			if d.Analyzer == StContract && d.Type == g.Type {
				g.Valid = false
			}
		}
		for _, m := range g.Members {
			if c := p.out.Contract(m.Type); c == nil || !c.Valid {
				g.Valid = false
			}
		}
		p.out.Groups = append(p.out.Groups, g)
	}
}

// checkGroup checks each field of a group (a state type of the package),
// their number, and that the members agree on owner kind and retention.
func (p *pkgParser) checkGroup(gp *groupParse) {
	g := gp.g
	if gp.notStruct {
		return
	}
	for _, f := range gp.fields {
		if m, ok := p.member(g, f); ok {
			g.Members = append(g.Members, m)
		}
	}
	if len(gp.fields) < 2 {
		p.errorf(g.Type, gp.head.pos, gp.head.end,
			"group %s has %d member%s; a group couples at least two state types: add a field of another state type, or use the state type alone",
			g.Type, len(gp.fields), plural(len(gp.fields)))
	}
	var first *Contract
	var firstName string
	for _, m := range g.Members {
		c := p.out.Contract(m.Type)
		if c == nil || !c.Valid {
			continue // its contract reports its own faults
		}
		if g.Owner != "" && c.Owner != "" && c.Owner != g.Owner {
			p.errorf(g.Type, m.Pos, m.Pos+token.Pos(len(m.Name)),
				"member %s of group %s is a state of owner kind %s, and the group's owner kind is %s; a group has one owner: write //state:owner %s on both %s and group %s",
				m.Name, g.Type, c.Owner, g.Owner, g.Owner, c.Type, g.Type)
		}
		if first == nil {
			first, firstName = c, m.Name
			continue
		}
		if c.Retention != first.Retention {
			p.errorf(g.Type, m.Pos, m.Pos+token.Pos(len(m.Name)),
				"member %s of group %s has retention %s, and member %s has retention %s; members agree on retention, as an evicted member would leave its partner inconsistent: declare //state:retention %s on %s too, or %s on both",
				m.Name, g.Type, c.Retention, firstName, first.Retention, first.Retention, c.Type, c.Retention)
		}
	}
}

// member checks one field of group g: a named state type declared in the
// package, neither embedded nor behind a pointer.
func (p *pkgParser) member(g *Group, f groupField) (Member, bool) {
	what := "field " + f.name
	if f.embedded {
		what = "embedded field " + types.ExprString(f.typ)
	}
	if f.embedded || f.name == "_" {
		p.errorf(g.Type, f.pos, f.end,
			"%s of group %s has no name of its own; name each member (e.g. KV KVCache): the name is its accessor", what, g.Type)
		return Member{}, false
	}
	id, ok := f.typ.(*ast.Ident)
	if !ok {
		hint := ""
		if star, ok := f.typ.(*ast.StarExpr); ok {
			if x, ok := star.X.(*ast.Ident); ok && p.out.Contract(x.Name) != nil {
				hint = fmt.Sprintf(" (write %s, not *%s)", x.Name, x.Name)
			}
		}
		p.errorf(g.Type, f.pos, f.end,
			"%s of group %s has type %s; a member is a state type declared in this package%s", what, g.Type, types.ExprString(f.typ), hint)
		return Member{}, false
	}
	if p.out.Contract(id.Name) == nil {
		if p.isGroup(id.Name) {
			p.errorf(g.Type, f.pos, f.end,
				"%s of group %s is group %s; groups do not nest: list the state types of %s as members of %s", what, g.Type, id.Name, id.Name, g.Type)
			return Member{}, false
		}
		p.errorf(g.Type, f.pos, f.end,
			"%s of group %s has type %s, which is not a state type of this package; a member is a struct type with //state:contract declared beside the group",
			what, g.Type, id.Name)
		return Member{}, false
	}
	return Member{Name: f.name, Type: id.Name, Pos: f.pos}, true
}

// isGroup reports whether the package declares a group named name.
func (p *pkgParser) isGroup(name string) bool {
	for _, gp := range p.groups {
		if gp.g.Type == name {
			return true
		}
	}
	return false
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
