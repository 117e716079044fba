package gen

import (
	"fmt"
	"go/ast"
	"go/token"
	"sort"

	"github.com/gpustate/gpustate/contract"
)

// Names of what a generated file declares. Beside the names
// docs/STATEGEN.md lists ("Names": NewTState, NewTStateShared with a share
// line, TState, TSnapshot, TSpans and their methods, as
// contract.GeneratedNames spells them) it declares only helpers named as
// stringer names its own, with a leading underscore and the type's name:
// no Go programmer writes _T_layout, so they never clash with the user's
// code.

func layoutName(typ string) string { return "_" + typ + "_layout" }

func readName(typ string) string   { return "_" + typ + "_read" }
func spansName(typ string) string  { return "_" + typ + "_spans" }
func gatherName(typ string) string { return "_" + typ + "_readRows" }
func stepName(typ string) string   { return "_" + typ + "_step" }

func stepHostName(typ string) string { return "_" + typ + "_stepHost" }
func scratchName(typ string) string  { return "_" + typ + "_rows" }

// Types returns the types generated for contract c: TState first, then
// TSnapshot (with an immutable snapshot) and TSpans.
func Types(c *contract.Contract) []string {
	n := contract.GeneratedNames(c.Type)
	out := []string{n.Head}
	if snapshot(c) {
		out = append(out, n.Snapshot)
	}
	return append(out, n.Spans)
}

// Names returns every package-level name the file generated for c
// declares: the constructors, the types and the helpers.
func Names(c *contract.Contract) []string {
	var out []string
	for _, m := range Methods(c) {
		if m.Recv == RecvFunc {
			out = append(out, m.Name)
		}
	}
	out = append(out, Types(c)...)
	out = append(out, layoutName(c.Type), readName(c.Type), spansName(c.Type), gatherName(c.Type), headName(c.Type))
	if snapshot(c) {
		out = append(out, snapName(c.Type))
	}
	if c.Replay != nil {
		out = append(out, stepName(c.Type))
		if replayed(c) {
			out = append(out, stepHostName(c.Type), scratchName(c.Type))
		}
	}
	return out
}

// A Clash is a declaration of the user's that takes a name stategen
// generates: generating the file would break the package's build.
type Clash struct {
	Pos     token.Pos // the user's declaration
	Type    string    // the state type whose file would declare the name
	Message string    // names the declaration, the state type and the remedy
}

// members returns, for each type generated for c, the names its methods
// and fields take.
func members(c *contract.Contract) map[string][]string {
	n := contract.GeneratedNames(c.Type)
	head, snap := n.Head, n.Snapshot
	out := map[string][]string{head: {"h"}, n.Spans: nil}
	if snapshot(c) {
		out[snap] = []string{"snap"}
	}
	for _, m := range Methods(c) {
		switch m.Recv {
		case RecvHead:
			out[head] = append(out[head], m.Name)
		case RecvSnapshot:
			out[snap] = append(out[snap], m.Name)
		}
	}
	for _, f := range c.Fields {
		out[n.Spans] = append(out[n.Spans], f.Name)
	}
	return out
}

// Clashes returns the declarations, in the package's files that stategen
// did not generate, of names the files generated for its contracts
// declare, or of methods of the types they declare; in source order.
func (p *Package) Clashes() []Clash {
	names := make(map[string]string)            // package-level name -> state type
	methods := make(map[string]map[string]bool) // generated type -> its members
	owner := make(map[string]string)            // generated type -> state type
	for _, c := range p.Contracts.Contracts {
		for _, n := range Names(c) {
			names[n] = c.Type
		}
		for typ, ms := range members(c) {
			owner[typ] = c.Type
			methods[typ] = make(map[string]bool)
			for _, m := range ms {
				methods[typ][m] = true
			}
		}
	}
	for _, g := range p.Contracts.Groups {
		var members []*contract.Contract
		for _, mem := range g.Members {
			members = append(members, p.Contracts.Contract(mem.Type))
		}
		for _, n := range GroupNames(g, members) {
			names[n] = g.Type
		}
		for typ, ms := range groupMembers(g, members) {
			owner[typ] = g.Type
			methods[typ] = make(map[string]bool)
			for _, m := range ms {
				methods[typ][m] = true
			}
		}
	}
	var out []Clash
	clash := func(id *ast.Ident, typ, what string) {
		out = append(out, Clash{Pos: id.Pos(), Type: typ, Message: fmt.Sprintf(
			"%s is declared here, and stategen generates %s for %s; rename it", what, what, p.kindOf(typ))})
	}
	for _, f := range p.files {
		if isGeneratedFile(f) {
			continue
		}
		for _, d := range f.Decls {
			for _, id := range declared(d) {
				if typ, ok := names[id.Name]; ok {
					clash(id, typ, id.Name)
				}
			}
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
				if base := recvBase(fd.Recv); methods[base][fd.Name.Name] {
					clash(fd.Name, owner[base], base+"."+fd.Name.Name)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pos < out[j].Pos })
	return out
}

// kindOf names a type stategen generates for: "state type T" or "group G".
func (p *Package) kindOf(typ string) string {
	for _, g := range p.Contracts.Groups {
		if g.Type == typ {
			return "group " + typ
		}
	}
	return "state type " + typ
}

// declared returns the package-level names declaration d declares.
func declared(d ast.Decl) []*ast.Ident {
	var out []*ast.Ident
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil {
			out = append(out, d.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				out = append(out, s.Name)
			case *ast.ValueSpec:
				out = append(out, s.Names...)
			}
		}
	}
	return out
}

// recvBase returns the name of a receiver's base type.
func recvBase(recv *ast.FieldList) string {
	if len(recv.List) == 0 {
		return ""
	}
	t := recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.ParenExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// isGeneratedFile reports whether f starts with Header: a file stategen
// wrote, which it rewrites or removes.
func isGeneratedFile(f *ast.File) bool {
	if len(f.Comments) == 0 || len(f.Comments[0].List) == 0 {
		return false
	}
	first := f.Comments[0].List[0]
	return first.Text == Header && first.Pos() < f.Package
}

// slabName names the slab typ's handles of a kind come from (_T_states,
// _T_snapshots).
func slabName(typ, kind string) string { return "_" + typ + "_" + kind }
