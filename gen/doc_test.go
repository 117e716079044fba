package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
