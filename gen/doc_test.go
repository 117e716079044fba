package gen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestDocTable checks docs/STATEGEN.md's table of what is generated
// against Methods: every function and method of the state has a row that
// names the contract line that makes it generated and its directive.
func TestDocTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "STATEGEN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| name | when | directive |\n| --- | --- | --- |\n")
	if !ok {
		t.Fatal("docs/STATEGEN.md has no table of what is generated")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var rows [][]string
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.ReplaceAll(strings.TrimSpace(cells[i]), "`", "")
		}
		rows = append(rows, cells)
	}
	seen := 0
	for _, name := range []string{"kv", "grid", "ring", "prefix"} {
		for _, c := range load(t, name).Contracts.Contracts {
			for _, m := range Methods(c) {
				if m.Recv == RecvSnapshot {
					continue
				}
				seen++
				name := m.Name
				if m.Recv == RecvFunc {
					// The table's example type: NewKVCacheState, NewKVCacheStateShared.
					name = "NewKVCacheState" + strings.TrimPrefix(name, ctorName(c.Type))
				}
				row := docRow(rows, name)
				switch {
				case row == nil:
					t.Errorf("no row for %s", name)
				case !strings.Contains(row[1], m.When):
					t.Errorf("%s: the table says it is generated with %q, Methods with %q", name, row[1], m.When)
				case m.Directive != "" && !strings.Contains(row[2], m.Directive):
					t.Errorf("%s: the table gives the directive %q, Methods %q", name, row[2], m.Directive)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no methods checked")
	}
}

// docRow returns the row of the table whose first cell names name.
func docRow(rows [][]string, name string) []string {
	for _, r := range rows {
		if len(r) < 3 {
			continue
		}
		for _, item := range strings.Split(r[0], ",") {
			item = strings.Fields(strings.TrimSpace(item) + " ")[0]
			if strings.TrimSuffix(strings.SplitN(item, "(", 2)[0], "()") == name {
				return r
			}
		}
	}
	return nil
}

// TestPackageDocListsMethods checks that the package comment (doc.go)
// names every function and method generated for the golden packages, in
// the item of the type it belongs to: TState, TSnapshot, and a group's
// GState and GSnapshot (member accessors aside: their names are the
// members').
func TestPackageDocListsMethods(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	items := docItems(string(src))
	reported := map[string]bool{}
	check := func(item, name string) {
		t.Helper()
		if !slices.Contains(strings.FieldsFunc(items[item], notIdent), name) && !reported[item+"."+name] {
			reported[item+"."+name] = true
			t.Errorf("the package comment does not list %s in its item for %s", name, item)
		}
	}
	seen := 0
	for _, pkg := range goldenPkgs {
		p := load(t, pkg)
		for _, c := range p.Contracts.Contracts {
			for _, m := range Methods(c) {
				seen++
				switch m.Recv {
				case RecvFunc:
					// NewKVCacheStateShared is NewTStateShared.
					rest := strings.TrimPrefix(strings.TrimPrefix(m.Name, "New"), "new")
					check("TState", "NewT"+rest[len(c.Type):])
				case RecvHead:
					check("TState", m.Name)
				case RecvSnapshot:
					check("TSnapshot", m.Name)
				}
			}
		}
		files, err := p.Generate()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range p.Contracts.Groups {
			members := map[string]bool{}
			for _, mem := range g.Members {
				members[mem.Name] = true
			}
			for _, f := range files {
				file, err := parser.ParseFile(token.NewFileSet(), f.Name, f.Content, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range file.Decls {
					fn, ok := d.(*ast.FuncDecl)
					if !ok || !fn.Name.IsExported() || members[fn.Name.Name] {
						continue
					}
					seen++
					switch recv := recvType(fn); recv {
					case "":
						if rest, ok := strings.CutPrefix(fn.Name.Name, "New"+g.Type); ok {
							check("GState", "NewG"+rest)
						}
					case g.Type + "State":
						check("GState", fn.Name.Name)
					case g.Type + "Snapshot":
						check("GSnapshot", fn.Name.Name)
					}
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no methods checked")
	}
}

// docItems returns the text of each item of the package comment's list,
// by the generated type it is about ("TState", "GSnapshot"). The group's
// item is about both of its types: GSnapshot's part starts at its name.
func docItems(src string) map[string]string {
	var text strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if rest, ok := strings.CutPrefix(line, "//"); ok {
			text.WriteString(rest + "\n")
		}
	}
	items := map[string]string{}
	for _, item := range strings.Split(text.String(), "\n   - ")[1:] {
		item, _, _ = strings.Cut(item, "\n\n")
		if first, _, _ := strings.Cut(item, ","); strings.HasPrefix(first, "T") {
			items[first] = item
		} else if g, snap, ok := strings.Cut(item, "GSnapshot,"); ok {
			items["GState"], items["GSnapshot"] = g, snap
		}
	}
	return items
}

// notIdent reports whether r cannot be part of a Go identifier.
func notIdent(r rune) bool {
	return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
}

// recvType returns the name of fn's receiver type, "" for a function.
func recvType(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) != 1 {
		return ""
	}
	e := fn.Recv.List[0].Type
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
