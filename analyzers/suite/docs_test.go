package suite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/analyzers/suite"
)

// TestDocs checks that every analyzer has its page in docs/analyzers, with
// the summary its doc.go gives, a link to that doc.go and the sections every
// page has, and that the index lists it.
func TestDocs(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "analyzers")
	index, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range suite.Analyzers() {
		page, err := os.ReadFile(filepath.Join(dir, a.Name+".md"))
		if err != nil {
			t.Errorf("%s has no page: %v", a.Name, err)
			continue
		}
		text := string(page)
		title, _, _ := strings.Cut(a.Doc, "\n")
		// The page quotes the summary line statevet help prints.
		if !strings.HasPrefix(text, "# "+a.Name+"\n\n> "+a.Name+": "+title+"\n") {
			t.Errorf("docs/analyzers/%s.md does not start from the doc's summary %q", a.Name, title)
		}
		if !strings.Contains(text, "(../../analyzers/"+a.Name+"/doc.go)") {
			t.Errorf("docs/analyzers/%s.md does not link to the analyzer's doc.go", a.Name)
		}
		for _, section := range []string{"# " + a.Name + "\n", "\n## Why\n", "\n## Example\n", "\n## Fix\n", "\n## Blind spots\n", "\n## Suppressing\n"} {
			if !strings.Contains(text, section) {
				t.Errorf("docs/analyzers/%s.md has no %q", a.Name, strings.TrimSpace(section))
			}
		}
		if !strings.Contains(text, "//statevet:ignore "+a.Name+` reason="`) {
			t.Errorf("docs/analyzers/%s.md does not show how to suppress a finding", a.Name)
		}
		if !strings.Contains(string(index), "["+a.Name+"]("+a.Name+".md)") {
			t.Errorf("docs/analyzers/README.md does not list %s", a.Name)
		}
	}
}
